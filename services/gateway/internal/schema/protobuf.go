package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoSchema is a compiled .proto file: its messages are what the message indexes of a record choose from.
type protoSchema struct {
	file    protoreflect.FileDescriptor
	marshal protojson.MarshalOptions
	unmarsh proto.UnmarshalOptions
}

// mainProto is the name the schema's own text compiles under (imports name the others).
const mainProto = "ssegate-schema.proto"

// compileProto compiles .proto text whose imports are files (by import path: a reference's name).
func compileProto(ctx context.Context, text string, imports map[string]string) (*protoSchema, error) {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: func(path string) (io.ReadCloser, error) {
				if path == mainProto {
					return io.NopCloser(strings.NewReader(text)), nil
				}
				if t, ok := imports[path]; ok {
					return io.NopCloser(strings.NewReader(t)), nil
				}
				return nil, fmt.Errorf("import %q: no reference of that name", path)
			},
		}),
	}
	files, err := c.Compile(ctx, mainProto)
	if err != nil {
		return nil, err
	}
	return newProtoSchema(files)
}

func newProtoSchema(files linker.Files) (*protoSchema, error) {
	fd := files[0]
	if fd.Messages().Len() == 0 {
		return nil, fmt.Errorf("the schema has no message")
	}
	res := files.AsResolver()
	return &protoSchema{
		file: fd,
		// Canonical proto3 JSON (lowerCamelCase names, 64-bit integers as strings, enums by name, unset fields
		// left out); Any resolved against the schema's own files.
		marshal: protojson.MarshalOptions{Resolver: res},
		unmarsh: proto.UnmarshalOptions{Resolver: res},
	}, nil
}

// message returns the message a record's indexes name: the first is a top-level message of the file, each
// next one a message nested in the previous.
func (s *protoSchema) message(index []int) (protoreflect.MessageDescriptor, error) {
	var md protoreflect.MessageDescriptor
	msgs := s.file.Messages()
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: no such message", index)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, fmt.Errorf("an empty message index")
	}
	return md, nil
}

// render appends the canonical JSON of a record's payload: the message indexes, then the message.
func (s *protoSchema) render(dst, payload []byte) ([]byte, error) {
	index, rest, err := messageIndex(payload)
	if err != nil {
		return dst, err
	}
	md, err := s.message(index)
	if err != nil {
		return dst, err
	}
	m := dynamicpb.NewMessage(md)
	if err := s.unmarsh.Unmarshal(rest, m); err != nil {
		return dst, err
	}
	out, err := s.marshal.Marshal(m)
	if err != nil {
		return dst, err
	}
	// protojson varies its whitespace on purpose; a frame must be the same bytes on every pod and every read.
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, out); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// maxIndexes bounds the message indexes of a record (nesting deeper than this is not a real schema).
const maxIndexes = 64

// messageIndex reads the message indexes that start a Protobuf payload of the wire format: a count, then
// that many indexes, zig-zag varints; a count of 0 alone means [0], the first message.
func messageIndex(b []byte) ([]int, []byte, error) {
	count, n := zigzag(b)
	if n <= 0 {
		return nil, nil, errShort
	}
	b = b[n:]
	if count == 0 {
		return []int{0}, b, nil
	}
	if count < 0 || count > maxIndexes {
		return nil, nil, fmt.Errorf("a message index count of %d", count)
	}
	index := make([]int, count)
	for i := range index {
		v, n := zigzag(b)
		if n <= 0 {
			return nil, nil, errShort
		}
		index[i], b = int(v), b[n:]
	}
	return index, b, nil
}

func zigzag(b []byte) (int64, int) {
	u, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, n
	}
	return protowire.DecodeZigZag(u), n
}
