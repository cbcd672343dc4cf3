package schema

import (
	"context"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// describeProto describes .proto text: its first message, which is what a record whose message indexes are
// the default ([0]) holds, in the canonical JSON mapping protojson writes.
func describeProto(ctx context.Context, d *Description, text string, refs []reference, namer Namer) error {
	p, err := compileProto(ctx, text, byName(refs))
	if err != nil {
		return err
	}
	w := protoDescriber{namer: namer, defs: d.Defs}
	d.Root = w.message(p.file.Messages().Get(0))
	return nil
}

type protoDescriber struct {
	namer Namer
	defs  map[string]any
}

// wellKnown is the JSON form of the well-known types protojson writes specially; nil for the rest.
func wellKnown(name protoreflect.FullName) map[string]any {
	str := func(extra ...any) map[string]any {
		m := map[string]any{"type": "string"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	switch name {
	case "google.protobuf.Timestamp":
		return str("format", "date-time")
	case "google.protobuf.Duration":
		return str("pattern", `^-?[0-9]+(\.[0-9]{1,9})?s$`)
	case "google.protobuf.FieldMask":
		return str()
	case "google.protobuf.Struct":
		return map[string]any{"type": "object"}
	case "google.protobuf.Value":
		return map[string]any{}
	case "google.protobuf.ListValue":
		return map[string]any{"type": "array"}
	case "google.protobuf.Empty":
		return map[string]any{"type": "object", "maxProperties": 0}
	case "google.protobuf.Any":
		return map[string]any{
			"type": "object", "required": []string{"@type"},
			"properties": map[string]any{"@type": str()},
		}
	case "google.protobuf.BoolValue":
		return map[string]any{"type": "boolean"}
	case "google.protobuf.StringValue":
		return str()
	case "google.protobuf.BytesValue":
		return base64Schema()
	case "google.protobuf.Int32Value", "google.protobuf.UInt32Value":
		return map[string]any{"type": "integer"}
	case "google.protobuf.Int64Value", "google.protobuf.UInt64Value":
		return str("pattern", `^-?[0-9]+$`)
	case "google.protobuf.FloatValue", "google.protobuf.DoubleValue":
		return floatSchema()
	}
	return nil
}

// message describes a message: a well-known type's own form, or a reference to its definition.
func (w protoDescriber) message(m protoreflect.MessageDescriptor) map[string]any {
	if s := wellKnown(m.FullName()); s != nil {
		return s
	}
	name := string(m.FullName())
	key := w.namer.Key(name)
	if _, ok := w.defs[key]; !ok {
		// Fields at their default value are left out, so none is required; protojson writes no others.
		def := map[string]any{"type": "object", "additionalProperties": false, "title": name}
		w.defs[key] = def // before the fields: a field may refer back to this message
		props := map[string]any{}
		fields := m.Fields()
		for i := range fields.Len() {
			f := fields.Get(i)
			props[f.JSONName()] = w.field(f)
		}
		def["properties"] = props
	}
	return w.namer.Ref(name)
}

// field describes a field: repeated as an array, a map as an object, else its value.
func (w protoDescriber) field(f protoreflect.FieldDescriptor) map[string]any {
	switch {
	case f.IsMap():
		return map[string]any{"type": "object", "additionalProperties": w.value(f.MapValue())}
	case f.IsList():
		return map[string]any{"type": "array", "items": w.value(f)}
	}
	return w.value(f)
}

// value describes one value of a field's kind.
func (w protoDescriber) value(f protoreflect.FieldDescriptor) map[string]any {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return map[string]any{"type": "integer"}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return map[string]any{"type": "string", "pattern": `^-?[0-9]+$`}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return floatSchema()
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return base64Schema()
	case protoreflect.EnumKind:
		e := f.Enum()
		if e.FullName() == "google.protobuf.NullValue" {
			return map[string]any{"type": "null"}
		}
		var names []any
		for i := range e.Values().Len() {
			names = append(names, string(e.Values().Get(i).Name()))
		}
		// A number the schema does not name is written as the number.
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "enum": names},
			map[string]any{"type": "integer"},
		}}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return w.message(f.Message())
	}
	return map[string]any{}
}
