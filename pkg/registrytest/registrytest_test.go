package registrytest_test

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/ssegate/ssegate/pkg/registrytest"
)

// schema is how the registry answers GET /schemas/ids/{id} and GET /subjects/{subject}/versions/{version}
// (the latter adds subject, version and id).
type schema struct {
	Subject    string                   `json:"subject"`
	Version    int                      `json:"version"`
	ID         int                      `json:"id"`
	Schema     string                   `json:"schema"`
	SchemaType string                   `json:"schemaType"`
	References []registrytest.Reference `json:"references"`
}

const (
	avro       = `{"type":"record","name":"Trade","namespace":"ssegate.test","fields":[{"name":"id","type":"long"},{"name":"sym","type":"string"}]}`
	jsonSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Trade","type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
	money      = "syntax = \"proto3\";\npackage ssegate.money;\n\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n"
	trade      = "syntax = \"proto3\";\npackage ssegate.test;\n\nimport \"ssegate/money.proto\";\n\nmessage Trade {\n  int64 id = 1;\n  ssegate.money.Money price = 2;\n}\n"
)

// TestRoundTrip registers a schema of each type, and a Protobuf schema that imports another through a
// reference, and reads each back by id as a client that decodes records would: text, type and references
// must come back as they were registered.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	moneySubject := registrytest.Subject(t, "money")
	moneyRef := registrytest.Reference{Name: "ssegate/money.proto", Subject: moneySubject, Version: 1}
	cases := []struct {
		name, subject, schemaType, text string
		refs                            []registrytest.Reference
	}{
		{"avro", registrytest.Subject(t, "avro"), "AVRO", avro, nil},
		{"json", registrytest.Subject(t, "json"), "JSON", jsonSchema, nil},
		{"money", moneySubject, "PROTOBUF", money, nil}, // registered before the schema that imports it
		{"trade", registrytest.Subject(t, "trade"), "PROTOBUF", trade, []registrytest.Reference{moneyRef}},
	}
	for _, c := range cases {
		subject := c.subject
		id := registrytest.Register(t, subject, c.schemaType, c.text, c.refs...)
		if again := registrytest.Register(t, subject, c.schemaType, c.text, c.refs...); again != id {
			t.Errorf("%s: registering the same schema again gave id %d, not %d", c.name, again, id)
		}
		var got schema
		registrytest.Do(t, http.MethodGet, "/schemas/ids/"+strconv.Itoa(id), nil, &got)
		check(t, c.name+" by id", got, c.schemaType, c.text, c.refs)

		// A client resolves references by subject and version.
		var byVersion schema
		registrytest.Do(t, http.MethodGet, "/subjects/"+url.PathEscape(subject)+"/versions/1", nil, &byVersion)
		check(t, c.name+" by version", byVersion, c.schemaType, c.text, c.refs)
		if byVersion.ID != id || byVersion.Subject != subject || byVersion.Version != 1 {
			t.Errorf("%s by version: id %d, subject %q, version %d; want %d, %q, 1",
				c.name, byVersion.ID, byVersion.Subject, byVersion.Version, id, subject)
		}
	}
}

func check(t *testing.T, what string, got schema, schemaType, text string, refs []registrytest.Reference) {
	t.Helper()
	if got.Schema != text {
		t.Errorf("%s: schema %q, want %q", what, got.Schema, text)
	}
	// As in Confluent's registry, an AVRO schema comes back without schemaType.
	if got.SchemaType != schemaType && (schemaType != "AVRO" || got.SchemaType != "") {
		t.Errorf("%s: schemaType %q, want %q", what, got.SchemaType, schemaType)
	}
	if len(got.References) != len(refs) || (len(refs) > 0 && !reflect.DeepEqual(got.References, refs)) {
		t.Errorf("%s: references %v, want %v", what, got.References, refs)
	}
}

// TestRefused checks that Register's failures reach the test: the registry refuses a Protobuf schema whose
// reference names a subject that does not exist.
func TestRefused(t *testing.T) {
	t.Parallel()
	registrytest.URL(t)
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		registrytest.Register(ft, registrytest.Subject(t, "trade"), "PROTOBUF", trade,
			registrytest.Reference{Name: "ssegate/money.proto", Subject: registrytest.Subject(t, "none"), Version: 1})
	}()
	<-done
	if !ft.failed {
		t.Fatal("Register of a schema with an unresolvable reference did not fail the test")
	}
	t.Logf("refused as expected: %s", ft.msg)
}

// fakeT records a fatal failure instead of failing the real test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
