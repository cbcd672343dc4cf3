package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Description is a JSON Schema (draft 07, the dialect AsyncAPI reads by default) of the JSON the gateway
// renders for the values of one registered schema: Root, and the named types Root refers to, each a
// definition in Defs that a "$ref" of Namer's making names. The mapping is the one docs/gateway.md gives for
// each format ("Schema formats"), so that a value the gateway sends decoded is valid under its description.
type Description struct {
	Kind    Kind
	Subject string
	Version int
	ID      int
	Root    map[string]any
	Defs    map[string]any
}

// Namer turns a named type of a schema (an Avro full name, a Protobuf message's full name, a JSON Schema
// document) into the key of its definition, and that key into the "$ref" that points at it.
type Namer struct {
	// Namespace is put before every name, so that two schemas' types of the same name stay apart.
	Namespace string
	// Prefix is what a "$ref" to a definition starts with ("#/components/schemas/" in an AsyncAPI document).
	Prefix string
}

var defKeyChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// Key is the definition key of name: the namespace and the name, with every character an AsyncAPI
// component key may not hold replaced by '_'.
func (n Namer) Key(name string) string {
	return defKeyChars.ReplaceAllString(n.Namespace+"."+name, "_")
}

// Ref is a schema that refers to the definition of name.
func (n Namer) Ref(name string) map[string]any { return map[string]any{"$ref": n.Prefix + n.Key(name)} }

// Describe looks up the latest version of subject in src, with its references, and describes it.
func Describe(ctx context.Context, src Source, subject string, namer Namer) (*Description, error) {
	s, err := src.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		return nil, fmt.Errorf("subject %s: %w", subject, err)
	}
	refs, err := (&Decoders{src: src}).references(ctx, s.References, map[string]bool{}, 0)
	if err != nil {
		return nil, fmt.Errorf("subject %s: %w", subject, err)
	}
	d := &Description{Subject: subject, Version: s.Version, ID: s.ID, Defs: map[string]any{}}
	switch s.Type {
	case sr.TypeAvro:
		d.Kind = Avro
		err = describeAvro(d, s.Schema.Schema, refs, namer)
	case sr.TypeProtobuf:
		d.Kind = Protobuf
		err = describeProto(ctx, d, s.Schema.Schema, refs, namer)
	case sr.TypeJSON:
		d.Kind = JSONSchema
		err = describeJSONSchema(d, s.Schema.Schema, refs, namer)
	default:
		err = fmt.Errorf("schema type %q", s.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("subject %s version %d: %w", subject, s.Version, err)
	}
	return d, nil
}

// describeAvro describes Avro schema text, with its references parsed first.
func describeAvro(d *Description, text string, refs []reference, namer Namer) error {
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if _, err := avro.ParseWithCache(r.text, "", cache); err != nil {
			return fmt.Errorf("a referenced schema: %w", err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return err
	}
	w := avroDescriber{namer: namer, defs: d.Defs}
	d.Root = w.schema(s)
	return nil
}

type avroDescriber struct {
	namer Namer
	defs  map[string]any
}

func (w avroDescriber) schema(s avro.Schema) map[string]any {
	switch s := s.(type) {
	case *avro.RefSchema:
		return w.schema(s.Schema())
	case *avro.RecordSchema:
		key := w.namer.Key(s.FullName())
		if _, ok := w.defs[key]; !ok {
			def := map[string]any{"type": "object", "additionalProperties": false}
			w.defs[key] = def // before the fields: a field may refer back to this record
			props, required := map[string]any{}, []string{}
			for _, f := range s.Fields() {
				props[f.Name()] = w.schema(f.Type())
				required = append(required, f.Name())
			}
			def["properties"], def["required"] = props, required
			if doc := s.Doc(); doc != "" {
				def["description"] = doc
			}
			def["title"] = s.FullName()
		}
		return w.namer.Ref(s.FullName())
	case *avro.EnumSchema:
		return map[string]any{"type": "string", "enum": s.Symbols()}
	case *avro.ArraySchema:
		return map[string]any{"type": "array", "items": w.schema(s.Items())}
	case *avro.MapSchema:
		return map[string]any{"type": "object", "additionalProperties": w.schema(s.Values())}
	case *avro.UnionSchema:
		var branches []any
		for _, b := range s.Types() {
			branches = append(branches, w.schema(b))
		}
		return map[string]any{"anyOf": branches}
	case *avro.FixedSchema:
		if l, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalSchema(l.Scale())
		}
		if l := s.Logical(); l != nil && l.Type() == avro.Duration && s.Size() == 12 {
			return durationSchema()
		}
		return base64Schema()
	case *avro.PrimitiveSchema:
		return avroPrimitive(s)
	}
	return map[string]any{"type": "null"}
}

// avroPrimitive describes a primitive type with its logical type, as primitiveNode compiles it.
func avroPrimitive(s *avro.PrimitiveSchema) map[string]any {
	logical := ""
	if l := s.Logical(); l != nil {
		logical = string(l.Type())
		if d, ok := l.(*avro.DecimalLogicalSchema); ok && s.Type() == avro.Bytes {
			return decimalSchema(d.Scale())
		}
	} else if p, ok := s.Prop("logicalType").(string); ok {
		logical = p
	}
	switch {
	case logical == string(avro.Date) && s.Type() == avro.Int:
		return map[string]any{"type": "string", "format": "date"}
	case logical == string(avro.TimeMillis) && s.Type() == avro.Int:
		return map[string]any{"type": "string", "pattern": `^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}$`}
	case logical == string(avro.TimeMicros) && s.Type() == avro.Long:
		return map[string]any{"type": "string", "pattern": `^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}$`}
	case s.Type() == avro.Long:
		if _, local, ok := timestampUnit(logical); ok {
			if local {
				return map[string]any{"type": "string", "pattern": `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$`}
			}
			return map[string]any{"type": "string", "format": "date-time"}
		}
	case logical == string(avro.UUID) && s.Type() == avro.String:
		return map[string]any{"type": "string", "format": "uuid"}
	}
	switch s.Type() {
	case avro.Null:
		return map[string]any{"type": "null"}
	case avro.Boolean:
		return map[string]any{"type": "boolean"}
	case avro.Int:
		return map[string]any{"type": "integer", "minimum": -1 << 31, "maximum": 1<<31 - 1}
	case avro.Long:
		return map[string]any{"type": "integer"}
	case avro.Float, avro.Double:
		return floatSchema()
	case avro.Bytes:
		return base64Schema()
	}
	return map[string]any{"type": "string"}
}

// floatSchema is a float as appendFloat and protojson write it: a number, or a string for NaN and infinities.
func floatSchema() map[string]any {
	return map[string]any{"anyOf": []any{
		map[string]any{"type": "number"},
		map[string]any{"type": "string", "enum": []any{"NaN", "Infinity", "-Infinity"}},
	}}
}

func base64Schema() map[string]any {
	return map[string]any{"type": "string", "contentEncoding": "base64"}
}

// decimalSchema is a decimal as appendDecimal writes it: a string with exactly scale digits after the point.
func decimalSchema(scale int) map[string]any {
	pattern := `^-?[0-9]+$`
	if scale > 0 {
		pattern = fmt.Sprintf(`^-?[0-9]+\.[0-9]{%d}$`, scale)
	}
	return map[string]any{"type": "string", "pattern": pattern}
}

func durationSchema() map[string]any {
	n := map[string]any{"type": "integer", "minimum": 0, "maximum": 1<<32 - 1}
	return map[string]any{
		"type": "object", "additionalProperties": false,
		"properties": map[string]any{"months": n, "days": n, "milliseconds": n},
		"required":   []string{"months", "days", "milliseconds"},
	}
}

// describeJSONSchema describes a JSON Schema value: the schema itself (values are sent as they are), with
// its references as definitions of their own and every "$ref" that names one of them, or a place in the
// schema itself, pointed at the definitions.
func describeJSONSchema(d *Description, text string, refs []reference, namer Namer) error {
	const self = "schema"
	docs := map[string]string{self: text}
	names := map[string]string{} // a $ref's document part -> its name
	for _, r := range refs {
		docs[r.name] = r.text
		names[r.name] = r.name
	}
	for name, doc := range docs {
		var v any
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		names[""] = name // a "$ref" of "#..." is within the document it is in
		d.Defs[namer.Key(name)] = rewriteRefs(v, names, namer)
	}
	d.Root = namer.Ref(self)
	return nil
}

// rewriteRefs returns v with every "$ref" to a known document (by name, or "#..." for the document itself)
// pointing at that document's definition, and without "$id" and "$schema", which would change how the
// rewritten references resolve.
func rewriteRefs(v any, names map[string]string, namer Namer) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			switch k {
			case "$id", "$schema":
				continue
			case "$ref":
				if s, ok := e.(string); ok {
					doc, frag, _ := strings.Cut(s, "#")
					if name, ok := names[doc]; ok {
						out[k] = namer.Prefix + namer.Key(name) + frag
						continue
					}
				}
			}
			out[k] = rewriteRefs(e, names, namer)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = rewriteRefs(e, names, namer)
		}
		return out
	}
	return v
}
