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
// in name order). Names starting with "." are ignored (a mounted ConfigMap's own entries).
//
// The directory is read once, by LoadFiles: an id means the same schema for the life of the process, and on
// every pod started from the same files, whatever is edited in the directory later (a ConfigMap updated in
// place reaches each pod at another moment; the chart rolls the pods instead).
type Files struct {
	dir    string
	byID   map[int]sr.Schema
	shared map[string]string // a shared definition's file name -> its text
}

// filesSubject is the subject of a shared definition in Files' references: "file:" and its name.
const filesSubject = "file:"

// maxFilesBytes bounds what LoadFiles reads: far more than a ConfigMap holds (1 MiB).
const maxFilesBytes = 64 << 20

var errNoSchemaFile = errors.New("no schema file of that id")

// schemaExt is the extension of a format's schema files.
type schemaExt struct {
	ext string
	typ sr.SchemaType
}

// exts are the schema files' extensions.
var exts = []schemaExt{{".avsc", sr.TypeAvro}, {".proto", sr.TypeProtobuf}, {".json", sr.TypeJSON}}

// LoadFiles reads the schema files of dir (see Files).
func LoadFiles(dir string) (*Files, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("schema-files: %w", err)
	}
	f := &Files{dir: dir, byID: map[int]sr.Schema{}, shared: map[string]string{}}
	total := 0
	refs := map[string][]sr.SchemaReference{} // by extension, in name order (ReadDir sorts)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		i := slices.IndexFunc(exts, func(x schemaExt) bool { return strings.HasSuffix(name, x.ext) })
		if i < 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("schema-files: %w", err)
		}
		if total += len(b); total > maxFilesBytes {
			return nil, fmt.Errorf("schema-files: %s holds more than %d MiB of schemas", dir, maxFilesBytes>>20)
		}
		base := strings.TrimSuffix(name, exts[i].ext)
		if id, err := strconv.Atoi(base); err == nil {
			if _, dup := f.byID[id]; dup {
				return nil, fmt.Errorf("schema-files: two files of schema id %d in %s", id, dir)
			}
			f.byID[id] = sr.Schema{Schema: string(b), Type: exts[i].typ}
			continue
		}
		f.shared[name] = string(b)
		refs[exts[i].ext] = append(refs[exts[i].ext], sr.SchemaReference{Name: name, Subject: filesSubject + name, Version: 1})
	}
	for id, s := range f.byID {
		for _, e := range exts {
			if e.typ == s.Type {
				s.References = refs[e.ext]
			}
		}
		f.byID[id] = s
	}
	return f, nil
}

// local marks Files a localSource: it answers from memory.
func (*Files) local() {}

// SchemaByID returns the schema of id, with the directory's shared definitions of its format as references.
func (f *Files) SchemaByID(_ context.Context, id int) (sr.Schema, error) {
	s, ok := f.byID[id]
	if !ok {
		return sr.Schema{}, fmt.Errorf("schema id %d: %w in %s", id, errNoSchemaFile, f.dir)
	}
	return s, nil
}

// SchemaByVersion returns a shared definition named in a reference.
func (f *Files) SchemaByVersion(_ context.Context, subject string, _ int) (sr.SubjectSchema, error) {
	name, ok := strings.CutPrefix(subject, filesSubject)
	text, found := f.shared[name]
	if !ok || !found {
		return sr.SubjectSchema{}, fmt.Errorf("subject %q: not a file of %s", subject, f.dir)
	}
	return sr.SubjectSchema{Subject: subject, Version: 1, Schema: sr.Schema{Schema: text}}, nil
}
