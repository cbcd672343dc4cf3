package position

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
)

// PrefixCompact is the version prefix of a compact id.
const PrefixCompact = "v2:"

// MaxCompactLen is the longest compact id ParseCompact accepts, and the most AppendCompact writes, in bytes.
const MaxCompactLen = 1024

// maxCompactRaw is how many bytes of varints fit MaxCompactLen once base64-encoded after the prefix.
const maxCompactRaw = (MaxCompactLen - len(PrefixCompact)) * 3 / 4

// compactEncoding is the base64 alphabet of compact ids: URL-safe (nothing a header or a query parameter
// must escape), no padding, and strict, so that one vector has one spelling.
var compactEncoding = base64.RawURLEncoding.Strict()

// Ref names a checkpoint record: its partition and offset in the position topic, and its Check.
type Ref struct {
	Partition int32
	Offset    int64
	// Check is the record's CheckpointSum (1 to 127), or 0 for none (ids written before checks, which
	// resolve unchecked). A resolver that finds another record at the offset (the position topic deleted and
	// created again, or records lost and their offsets written anew) refuses the id instead of applying it to
	// the wrong vector.
	Check uint8
}

// Record returns r without its Check: where the record is, the key of caches of checkpoints.
func (r Ref) Record() Ref { return Ref{Partition: r.Partition, Offset: r.Offset} }

// Fits reports whether cp, read at r's record, can be the checkpoint an id naming r was made against: r has
// no check, or cp's record has r's.
func (r Ref) Fits(cp *Checkpoint) bool { return r.Check == 0 || r.Check == cp.Sum }

// Compact is a parsed compact id: a checkpoint it refers to, and the entries in which the position differs
// from the checkpoint's vector. It says nothing until applied to that vector (Apply).
//
// The id is "v2:" followed by the unpadded URL-safe base64 of a run of minimal unsigned varints: the
// checkpoint's partition<<7 | check (see Ref.Check) and offset, then one or two per entry, in ascending partition order. The first is
// gap<<2 | step, gap being the partition's distance from the previous entry's minus one (the first entry's:
// the partition itself). A step of 1 to 3 says the partition moved that many offsets past the checkpoint's
// (the common case, one byte in all); a step of 0 is followed by a second varint: in a partition the
// checkpoint has, how far it moved minus 4; in one it lacks, the offset itself. An entry is only written
// where the position moved, and a step of 1 to 3 only in a partition the checkpoint has, so every position
// has one spelling against its checkpoint.
type Compact struct {
	ref   Ref
	parts []int32
	vals  []int64 // -1 to -3: a step of 1 to 3; otherwise the second varint
}

// Ref returns the checkpoint the id refers to.
func (c Compact) Ref() Ref { return c.ref }

// Len returns the number of entries the id lists beside its checkpoint.
func (c Compact) Len() int { return len(c.parts) }

// IsCompact reports whether id has the compact prefix (it may still be malformed).
func IsCompact(id string) bool { return strings.HasPrefix(id, PrefixCompact) }

// AppendCompact appends to dst the compact id of pos against base, the vector of the checkpoint at ref. It
// returns dst unchanged and false when pos cannot be said that way: pos lacks a partition of base or is
// behind it somewhere (base is not a position pos came from), or the id would be longer than maxLen bytes
// (at most MaxCompactLen). It does not allocate when dst has room.
func AppendCompact(dst []byte, ref Ref, base, pos Vector, maxLen int) ([]byte, bool) {
	maxLen = min(maxLen, MaxCompactLen)
	rawMax := (maxLen - len(PrefixCompact)) * 3 / 4
	if ref.Partition < 0 || ref.Offset < 0 || ref.Check > maxCheck || rawMax <= 0 {
		return dst, false
	}
	var stack [maxCompactRaw]byte
	raw := stack[:0]
	raw = binary.AppendUvarint(raw, uint64(ref.Partition)<<7|uint64(ref.Check))
	raw = binary.AppendUvarint(raw, uint64(ref.Offset))
	prev := int32(-1)
	i := 0
	for _, e := range pos.e {
		if i < len(base.e) && base.e[i].Partition < e.Partition {
			return dst, false // base has a partition pos lacks
		}
		gap := uint64(e.Partition-prev-1) << 2
		if i < len(base.e) && base.e[i].Partition == e.Partition {
			b := base.e[i].Offset
			i++
			switch inc := e.Offset - b; {
			case inc < 0:
				return dst, false
			case inc == 0:
				continue
			case inc <= 3:
				raw = binary.AppendUvarint(raw, gap|uint64(inc))
			default:
				raw = binary.AppendUvarint(raw, gap)
				raw = binary.AppendUvarint(raw, uint64(inc-4))
			}
		} else {
			raw = binary.AppendUvarint(raw, gap)
			raw = binary.AppendUvarint(raw, uint64(e.Offset))
		}
		prev = e.Partition
		if len(raw) > rawMax {
			return dst, false
		}
	}
	if i < len(base.e) {
		return dst, false
	}
	dst = append(dst, PrefixCompact...)
	return compactEncoding.AppendEncode(dst, raw), true
}

// ParseCompact decodes a compact id. It accepts exactly the spelling AppendCompact writes and rejects
// anything else with a *SyntaxError wrapping ErrEmpty, ErrTooLong, ErrVersion, ErrSyntax or ErrRange. It
// never panics and runs in time linear in len(id).
func ParseCompact(id string) (Compact, error) {
	n := len(id)
	switch {
	case n > MaxCompactLen:
		return Compact{}, syntaxError(id, MaxLen, ErrTooLong)
	case n == 0:
		return Compact{}, syntaxError(id, 0, ErrEmpty)
	case !IsCompact(id):
		return Compact{}, syntaxError(id, 0, ErrVersion)
	}
	for i := len(PrefixCompact); i < n; i++ {
		// The base64 decoder skips CR and LF; an id has neither (nor anything else outside the alphabet).
		if !isCompactByte(id[i]) {
			return Compact{}, syntaxError(id, i, ErrSyntax)
		}
	}
	var stack [maxCompactRaw]byte
	raw, err := compactEncoding.AppendDecode(stack[:0], []byte(id[len(PrefixCompact):]))
	if err != nil {
		return Compact{}, syntaxError(id, len(PrefixCompact), ErrSyntax)
	}
	at := 0
	next := func(limit uint64) (uint64, error) {
		x, k := binary.Uvarint(raw[at:])
		switch {
		case k == 0:
			return 0, ErrSyntax
		case k < 0:
			return 0, ErrRange
		case k != uvarintLen(x):
			return 0, ErrSyntax // not the minimal spelling
		case x > limit:
			return 0, ErrRange
		}
		at += k
		return x, nil
	}
	fail := func(err error) (Compact, error) {
		return Compact{}, syntaxError(id, len(PrefixCompact)+at*4/3, err)
	}
	var c Compact
	p, err := next(math.MaxInt32<<7 | maxCheck)
	if err != nil {
		return fail(err)
	}
	o, err := next(math.MaxInt64)
	if err != nil {
		return fail(err)
	}
	c.ref = Ref{Partition: int32(p >> 7), Offset: int64(o), Check: uint8(p & maxCheck)}
	prev := int64(-1)
	for at < len(raw) {
		x, err := next(math.MaxUint64)
		if err != nil {
			return fail(err)
		}
		part := prev + 1 + int64(x>>2)
		if x>>2 > math.MaxInt32 || part > math.MaxInt32 {
			return fail(ErrRange)
		}
		val := -int64(x & 3)
		if val == 0 {
			v, err := next(math.MaxInt64)
			if err != nil {
				return fail(err)
			}
			val = int64(v)
		}
		if c.parts == nil {
			c.parts = make([]int32, 0, len(raw)-at+1)
			c.vals = make([]int64, 0, len(raw)-at+1)
		}
		c.parts = append(c.parts, int32(part))
		c.vals = append(c.vals, val)
		prev = part
	}
	return c, nil
}

// maxCheck is the largest Ref.Check: it takes the low 7 bits of the id's first varint, so that the usual
// partition 0 still spells it in one byte.
const maxCheck = 127

// CheckpointSum returns the check of a checkpoint record (its value as AppendCheckpoint wrote it): 1 to 127,
// from its CRC-32, so that a resolver tells it from another record with odds of 126 in 127.
func CheckpointSum(record []byte) uint8 {
	return uint8(1 + crc32.ChecksumIEEE(record)%maxCheck) //nolint:gosec // at most 127
}

// isCompactByte reports whether b is in the URL-safe base64 alphabet.
func isCompactByte(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_'
}

// uvarintLen returns the length of the minimal varint of x.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// offset returns the offset entry k of c says, against base (bi: the entry's index in base, -1 when base
// lacks its partition).
func (c Compact) offset(k int, base Vector, bi int) (int64, error) {
	p, val := c.parts[k], c.vals[k]
	switch {
	case bi < 0 && val < 0:
		return 0, fmt.Errorf("%w: a step in partition %d, which the checkpoint lacks", ErrSyntax, p)
	case bi < 0:
		return val, nil
	case val < 0:
		return base.e[bi].Offset - val, nil // a step of 1 to 3: no overflow short of MaxInt64-3
	}
	b := base.e[bi].Offset
	if val > math.MaxInt64-b-4 {
		return 0, fmt.Errorf("%w: partition %d moves past the largest offset", ErrRange, p)
	}
	return b + 4 + val, nil
}

// Apply returns the position c says, against base, the vector of the checkpoint c refers to. It fails with
// an error wrapping ErrRange when an offset would pass math.MaxInt64, or ErrSyntax when c uses a step in a
// partition base lacks (c was not made against base). The result shares no storage with base.
func (c Compact) Apply(base Vector) (Vector, error) {
	out := make([]Entry, 0, len(base.e)+len(c.parts))
	i := 0
	for k, p := range c.parts {
		for i < len(base.e) && base.e[i].Partition < p {
			out = append(out, base.e[i])
			i++
		}
		bi := -1
		if i < len(base.e) && base.e[i].Partition == p {
			bi = i
			i++
		}
		off, err := c.offset(k, base, bi)
		if err != nil {
			return Vector{}, err
		}
		if off < 0 {
			return Vector{}, fmt.Errorf("%w: partition %d moves past the largest offset", ErrRange, p)
		}
		out = append(out, Entry{Partition: p, Offset: off})
	}
	out = append(out, base.e[i:]...)
	if len(out) == 0 {
		return Vector{}, nil
	}
	return Vector{e: out}, nil
}

// AppendEntries appends to dst the entries c lists, with the offsets they have against base (the vector of
// the checkpoint c refers to), in ascending partition order; the partitions c does not list have base's
// offsets. It is Apply without building the whole vector, for callers that already hold base's entries. It
// fails like Apply.
func (c Compact) AppendEntries(dst []Entry, base Vector) ([]Entry, error) {
	for k, p := range c.parts {
		bi, ok := base.find(p)
		if !ok {
			bi = -1
		}
		off, err := c.offset(k, base, bi)
		if err != nil {
			return dst, err
		}
		if off < 0 {
			return dst, fmt.Errorf("%w: partition %d moves past the largest offset", ErrRange, p)
		}
		dst = append(dst, Entry{Partition: p, Offset: off})
	}
	return dst, nil
}
