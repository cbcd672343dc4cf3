package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonSchema is a compiled JSON Schema; nil sch passes values through (valid JSON, not validated).
type jsonSchema struct {
	sch *jsonschema.Schema
}

// jsonBase is where a schema and its references live for the compiler: a reference's name (what "$ref"
// says) resolves against it, and nothing is ever loaded from the network or the disk.
const jsonBase = "mem://ssegate/schemas/"

// compileJSONSchema compiles schema text whose references are documents by name; with validate false the
// schema is only checked to be JSON, and values are passed through.
func compileJSONSchema(text string, refs map[string]string, validate bool) (*jsonSchema, error) {
	if !validate {
		if !json.Valid([]byte(text)) {
			return nil, fmt.Errorf("the schema is not JSON")
		}
		return &jsonSchema{}, nil
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	add := func(name, doc string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			return err
		}
		u, err := url.Parse(jsonBase)
		if err != nil {
			return err
		}
		ref, err := url.Parse(name)
		if err != nil {
			return err
		}
		return c.AddResource(u.ResolveReference(ref).String(), v)
	}
	for name, doc := range refs {
		if err := add(name, doc); err != nil {
			return nil, fmt.Errorf("reference %q: %w", name, err)
		}
	}
	if err := add("main.json", text); err != nil {
		return nil, err
	}
	sch, err := c.Compile(jsonBase + "main.json")
	if err != nil {
		return nil, err
	}
	if err := checkFanOut(sch); err != nil {
		return nil, err
	}
	return &jsonSchema{sch: sch}, nil
}

// noLoader refuses every URL the schemas did not bring: a schema cannot make the gateway read files or the
// network.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s: not a schema or one of its references", u)
}

// errNotJSON is a JSON Schema value that is not JSON at all.
var errNotJSON = errorString("the value is not JSON")

// render appends the value compacted (one line, no insignificant whitespace), after validating it.
func (s *jsonSchema) render(dst, payload []byte) ([]byte, error) {
	if s.sch != nil {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
		if err != nil {
			return dst, errNotJSON
		}
		if err := s.sch.Validate(v); err != nil {
			return dst, &invalidError{err}
		}
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, payload); err != nil {
		return dst, errNotJSON
	}
	return buf.Bytes(), nil
}

// invalidError is a JSON value its schema does not accept.
type invalidError struct{ err error }

func (e *invalidError) Error() string { return "not valid under its schema: " + e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }
