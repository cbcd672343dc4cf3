package schema

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/hamba/avro/v2"
)

// avroKind is what an avroNode renders: an Avro type, or a logical type on one.
type avroKind uint8

const (
	avroNull avroKind = iota
	avroBoolean
	avroInt
	avroLong
	avroFloat
	avroDouble
	avroBytes
	avroString
	avroRecord
	avroEnum
	avroArray
	avroMap
	avroUnion
	avroFixed
	avroDecimalBytes
	avroDecimalFixed
	avroDate
	avroTimeMillis
	avroTimeMicros
	avroTimestamp      // UTC, "Z": unit in avroNode.unit
	avroLocalTimestamp // no zone
	avroDuration
)

// avroNode is a compiled Avro schema: what to read and how to render it, with the JSON of names and symbols
// written once, at compile time. Named types that refer to themselves are one node pointing back at itself.
type avroNode struct {
	kind     avroKind
	keys     [][]byte    // record: `"field":` of each field
	fields   []*avroNode // record: the fields' types, in schema order
	items    *avroNode   // array items, map values
	branches []*avroNode // union
	symbols  [][]byte    // enum: each symbol as a JSON string
	size     int         // fixed, decimal on fixed
	scale    int         // decimal
	digits   int         // decimal: its precision, the most digits of its unscaled value
	unit     timeUnit    // timestamps
}

// avroCompiler turns hamba/avro's parsed schemas into avroNodes, one node per named type.
type avroCompiler struct {
	named map[string]*avroNode
	err   error // the first thing found that the renderer refuses
}

// maxDecimalPrecision bounds a decimal's precision (and so its scale, which is at most its precision): the
// JSON of a decimal is at most that many digits, and reading one costs at most that much. Java's BigDecimal,
// what most decimal producers use, is far past what any real schema declares; databases stop at 38 to 1000.
const maxDecimalPrecision = 1000

// compileAvro parses schema text (with the named types of refs, parsed first, in order) and compiles it.
func compileAvro(text string, refs []string) (*avroNode, error) {
	cache := &avro.SchemaCache{} // per schema id: the same name may mean other fields under another id
	for _, r := range refs {
		if _, err := avro.ParseWithCache(r, "", cache); err != nil {
			return nil, fmt.Errorf("a referenced schema: %w", err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	c := &avroCompiler{named: map[string]*avroNode{}}
	n := c.node(s)
	return n, c.err
}

func (c *avroCompiler) node(s avro.Schema) *avroNode {
	switch s := s.(type) {
	case *avro.RefSchema:
		return c.node(s.Schema())
	case *avro.RecordSchema:
		if n, ok := c.named[s.FullName()]; ok {
			return n
		}
		n := &avroNode{kind: avroRecord}
		c.named[s.FullName()] = n // before the fields: a field may refer back to this record
		for _, f := range s.Fields() {
			n.keys = append(n.keys, append(appendString(nil, f.Name()), ':'))
			n.fields = append(n.fields, c.node(f.Type()))
		}
		return n
	case *avro.EnumSchema:
		n := &avroNode{kind: avroEnum}
		for _, sym := range s.Symbols() {
			n.symbols = append(n.symbols, appendString(nil, sym))
		}
		return n
	case *avro.ArraySchema:
		return &avroNode{kind: avroArray, items: c.node(s.Items())}
	case *avro.MapSchema:
		return &avroNode{kind: avroMap, items: c.node(s.Values())}
	case *avro.UnionSchema:
		n := &avroNode{kind: avroUnion}
		for _, b := range s.Types() {
			n.branches = append(n.branches, c.node(b))
		}
		return n
	case *avro.FixedSchema:
		return c.checked(fixedNode(s))
	case *avro.PrimitiveSchema:
		return c.checked(primitiveNode(s))
	case *avro.NullSchema:
		return &avroNode{kind: avroNull}
	}
	// hamba/avro has no other schema types; a future one renders as null rather than misreading bytes.
	return &avroNode{kind: avroNull}
}

// checked notes a decimal of a precision past maxDecimalPrecision.
func (c *avroCompiler) checked(n *avroNode) *avroNode {
	if (n.kind == avroDecimalBytes || n.kind == avroDecimalFixed) && n.digits > maxDecimalPrecision && c.err == nil {
		c.err = fmt.Errorf("a decimal of precision %d (at most %d)", n.digits, maxDecimalPrecision)
	}
	return n
}

func fixedNode(s *avro.FixedSchema) *avroNode {
	n := &avroNode{kind: avroFixed, size: s.Size()}
	switch l := s.Logical().(type) {
	case *avro.DecimalLogicalSchema:
		n.kind, n.scale, n.digits = avroDecimalFixed, l.Scale(), l.Precision()
	case nil:
	default:
		if l.Type() == avro.Duration && s.Size() == 12 {
			n.kind = avroDuration
		}
	}
	return n
}

// primitiveNode compiles a primitive type with its logical type. hamba/avro knows every logical type of the
// specification except the nanosecond timestamps, which stay in the schema's properties.
func primitiveNode(s *avro.PrimitiveSchema) *avroNode {
	base := map[avro.Type]avroKind{
		avro.Null: avroNull, avro.Boolean: avroBoolean, avro.Int: avroInt, avro.Long: avroLong,
		avro.Float: avroFloat, avro.Double: avroDouble, avro.Bytes: avroBytes, avro.String: avroString,
	}[s.Type()]
	n := &avroNode{kind: base}
	logical := ""
	decimal := false
	if l := s.Logical(); l != nil {
		logical = string(l.Type())
		if d, ok := l.(*avro.DecimalLogicalSchema); ok {
			n.scale, n.digits, decimal = d.Scale(), d.Precision(), true
		}
	} else if p, ok := s.Prop("logicalType").(string); ok && p != string(avro.Decimal) {
		// The nanosecond timestamps. An invalid decimal (hamba/avro leaves its logicalType here) is its
		// underlying type, as the specification says of invalid logical types.
		logical = p
	}
	switch {
	case decimal && base == avroBytes:
		n.kind = avroDecimalBytes
	case logical == string(avro.Date) && base == avroInt:
		n.kind = avroDate
	case logical == string(avro.TimeMillis) && base == avroInt:
		n.kind = avroTimeMillis
	case logical == string(avro.TimeMicros) && base == avroLong:
		n.kind = avroTimeMicros
	case base == avroLong:
		if unit, local, ok := timestampUnit(logical); ok {
			n.kind, n.unit = avroTimestamp, unit
			if local {
				n.kind = avroLocalTimestamp
			}
		}
	}
	return n
}

// timestampUnit names the unit of a timestamp logical type, and whether it is a local one.
func timestampUnit(logical string) (unit timeUnit, local, ok bool) {
	switch logical {
	case "timestamp-millis":
		return millis, false, true
	case "timestamp-micros":
		return micros, false, true
	case "timestamp-nanos":
		return nanos, false, true
	case "local-timestamp-millis":
		return millis, true, true
	case "local-timestamp-micros":
		return micros, true, true
	case "local-timestamp-nanos":
		return nanos, true, true
	}
	return 0, false, false
}

// avroReader renders one datum of Avro's binary encoding as JSON.
type avroReader struct {
	b     []byte
	items int // array and map items still allowed: bounds the work of items that take no bytes (null)
	depth int
	limit int // the longest dst may grow to (renderBudget)
}

// maxAvroDepth bounds nesting (a recursive schema can nest as deep as its bytes say).
const maxAvroDepth = 256

// renderAvro appends the JSON of the datum v, which must be exactly one datum of n, as long as dst stays
// within limit bytes. Every node writes at least one byte, so limit bounds the work too.
func renderAvro(dst []byte, n *avroNode, v []byte, limit int) ([]byte, error) {
	r := avroReader{b: v, items: len(v) + 4096, limit: limit}
	dst, err := r.value(dst, n)
	if err != nil {
		return dst, err
	}
	if len(r.b) > 0 {
		return dst, fmt.Errorf("%d bytes after the datum", len(r.b))
	}
	return dst, nil
}

var errShort = errorString("the value ends early")

func (r *avroReader) long() (int64, error) {
	u, n := binary.Uvarint(r.b)
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, fmt.Errorf("a long longer than 64 bits")
	}
	r.b = r.b[n:]
	return int64(u>>1) ^ -int64(u&1), nil // zig-zag
}

func (r *avroReader) int() (int32, error) {
	v, err := r.long()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		err = fmt.Errorf("an int out of range: %d", v)
	}
	return int32(v), err
}

func (r *avroReader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.b) {
		return nil, errShort
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, nil
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)) {
		return nil, errShort
	}
	return r.take(int(n))
}

func (r *avroReader) value(dst []byte, n *avroNode) ([]byte, error) {
	switch n.kind {
	case avroNull:
		return append(dst, "null"...), nil
	case avroBoolean:
		b, err := r.take(1)
		if err != nil {
			return dst, err
		}
		if b[0] > 1 {
			return dst, fmt.Errorf("a boolean byte of %d", b[0])
		}
		return strconv.AppendBool(dst, b[0] == 1), nil
	case avroInt:
		v, err := r.int()
		return strconv.AppendInt(dst, int64(v), 10), err
	case avroLong:
		v, err := r.long()
		return strconv.AppendInt(dst, v, 10), err
	case avroFloat:
		b, err := r.take(4)
		if err != nil {
			return dst, err
		}
		return appendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32), nil
	case avroDouble:
		b, err := r.take(8)
		if err != nil {
			return dst, err
		}
		return appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64), nil
	case avroBytes:
		b, err := r.bytes()
		return appendBase64(dst, b), err
	case avroString:
		b, err := r.bytes()
		return appendStringBytes(dst, b), err
	case avroFixed:
		b, err := r.take(n.size)
		return appendBase64(dst, b), err
	case avroRecord, avroArray, avroMap, avroUnion, avroEnum:
		return r.complex(dst, n)
	}
	return r.logical(dst, n)
}

// complex renders the types that hold other values (and enums, which are an index like a union's).
func (r *avroReader) complex(dst []byte, n *avroNode) ([]byte, error) {
	if r.depth++; r.depth > maxAvroDepth {
		return dst, fmt.Errorf("nested deeper than %d", maxAvroDepth)
	}
	if len(dst) > r.limit {
		return dst, errTooLarge
	}
	defer func() { r.depth-- }()
	var err error
	switch n.kind {
	case avroRecord:
		dst = append(dst, '{')
		for i, f := range n.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, n.keys[i]...)
			if dst, err = r.value(dst, f); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case avroEnum, avroUnion:
		i, err := r.long()
		if err != nil {
			return dst, err
		}
		if n.kind == avroEnum {
			if i < 0 || i >= int64(len(n.symbols)) {
				return dst, fmt.Errorf("enum symbol %d of %d", i, len(n.symbols))
			}
			return append(dst, n.symbols[i]...), nil
		}
		if i < 0 || i >= int64(len(n.branches)) {
			return dst, fmt.Errorf("union branch %d of %d", i, len(n.branches))
		}
		return r.value(dst, n.branches[i])
	}
	return r.blocks(dst, n)
}

// blocks renders an array or a map: blocks of items, each block a count (negative: followed by the block's
// size in bytes) and its items, up to a block of count 0.
func (r *avroReader) blocks(dst []byte, n *avroNode) ([]byte, error) {
	open, closing := byte('['), byte(']')
	if n.kind == avroMap {
		open, closing = '{', '}'
	}
	dst = append(dst, open)
	first := true
	for {
		count, err := r.long()
		if err != nil {
			return dst, err
		}
		if count == 0 {
			return append(dst, closing), nil
		}
		if count < 0 {
			if count == math.MinInt64 {
				return dst, fmt.Errorf("a block count out of range")
			}
			count = -count
			if _, err := r.long(); err != nil { // the block's size, of no use here
				return dst, err
			}
		}
		if count > int64(r.items) {
			return dst, fmt.Errorf("more array or map items than the datum can hold")
		}
		r.items -= int(count)
		for range count {
			if len(dst) > r.limit {
				return dst, errTooLarge
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if n.kind == avroMap {
				k, err := r.bytes()
				if err != nil {
					return dst, err
				}
				dst = append(appendStringBytes(dst, k), ':')
			}
			if dst, err = r.value(dst, n.items); err != nil {
				return dst, err
			}
		}
	}
}

// logical renders the logical types.
func (r *avroReader) logical(dst []byte, n *avroNode) ([]byte, error) {
	switch n.kind {
	case avroDecimalBytes, avroDecimalFixed:
		var b []byte
		var err error
		if n.kind == avroDecimalBytes {
			b, err = r.bytes()
		} else {
			b, err = r.take(n.size)
		}
		if err != nil {
			return dst, err
		}
		return appendDecimal(dst, b, n.scale, n.digits)
	case avroDate:
		v, err := r.int()
		if err != nil {
			return dst, err
		}
		return appendDate(dst, int64(v))
	case avroTimeMillis, avroTimeMicros:
		v, unit := int64(0), millis
		var err error
		if n.kind == avroTimeMillis {
			var i int32
			i, err = r.int()
			v = int64(i)
		} else {
			v, err = r.long()
			unit = micros
		}
		if err != nil {
			return dst, err
		}
		return appendTimeOfDay(dst, v, unit)
	case avroTimestamp, avroLocalTimestamp:
		v, err := r.long()
		if err != nil {
			return dst, err
		}
		return appendTimestamp(dst, v, n.unit, n.kind == avroTimestamp)
	case avroDuration:
		b, err := r.take(12)
		if err != nil {
			return dst, err
		}
		dst = append(dst, `{"months":`...)
		dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(b)), 10)
		dst = append(dst, `,"days":`...)
		dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(b[4:])), 10)
		dst = append(dst, `,"milliseconds":`...)
		dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(b[8:])), 10)
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("avro node kind %d", n.kind)
}
