package schema

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// Files is a Source for clusters without a registry: a directory (a ConfigMap in the chart) where the schema
// of id N is the file N.avsc (Avro), N.proto (Protobuf) or N.json (JSON Schema). Files not named by an id are
// shared definitions, references of every schema of their format: a .proto file is importable by its name, a
// .json file is a "$ref" target by its name, and .avsc files define named types for every Avro schema (read
// in name order). Files are read when an id is first looked up; names starting with "." are ignored (a
// mounted ConfigMap's own entries).
type Files string

// filesSubject is the subject of a shared definition in Files' references: "file:" and its name.
const filesSubject = "file:"

var errNoSchemaFile = errors.New("no schema file of that id")

// exts are the schema files' extensions, in the order they are looked for.
var exts = []struct {
	ext string
	typ sr.SchemaType
}{{".avsc", sr.TypeAvro}, {".proto", sr.TypeProtobuf}, {".json", sr.TypeJSON}}

// SchemaByID reads the file of id, with the directory's shared definitions of its format as references.
func (f Files) SchemaByID(_ context.Context, id int) (sr.Schema, error) {
	for _, e := range exts {
		ext, typ := e.ext, e.typ
		b, err := os.ReadFile(filepath.Join(string(f), strconv.Itoa(id)+ext))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return sr.Schema{}, err
		}
		refs, err := f.shared(ext)
		if err != nil {
			return sr.Schema{}, err
		}
		return sr.Schema{Schema: string(b), Type: typ, References: refs}, nil
	}
	return sr.Schema{}, fmt.Errorf("schema id %d: %w in %s", id, errNoSchemaFile, string(f))
}

// shared lists the files of ext not named by an id, in name order.
func (f Files) shared(ext string) ([]sr.SchemaReference, error) {
	entries, err := os.ReadDir(string(f))
	if err != nil {
		return nil, err
	}
	var refs []sr.SchemaReference
	for _, e := range entries {
		name := e.Name()
		base, ok := strings.CutSuffix(name, ext)
		if !ok || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		if _, err := strconv.Atoi(base); err == nil {
			continue
		}
		refs = append(refs, sr.SchemaReference{Name: name, Subject: filesSubject + name, Version: 1})
	}
	slices.SortFunc(refs, func(a, b sr.SchemaReference) int { return strings.Compare(a.Name, b.Name) })
	return refs, nil
}

// SchemaByVersion reads a shared definition named in a reference.
func (f Files) SchemaByVersion(_ context.Context, subject string, _ int) (sr.SubjectSchema, error) {
	name, ok := strings.CutPrefix(subject, filesSubject)
	if !ok || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return sr.SubjectSchema{}, fmt.Errorf("subject %q: not a file of %s", subject, string(f))
	}
	b, err := os.ReadFile(filepath.Join(string(f), name))
	if err != nil {
		return sr.SubjectSchema{}, err
	}
	return sr.SubjectSchema{Subject: subject, Version: 1, Schema: sr.Schema{Schema: string(b)}}, nil
}
