// Package registrytest gives tests a real schema registry with the Confluent-compatible REST API: the one
// named by the SCHEMA_REGISTRY_URL environment variable (the API's base URL), which `make test`
// (pkg/kafkatest/with-services.sh) starts on loopback with pkg/registrytest/registry.sh.
//
// Without SCHEMA_REGISTRY_URL a test that needs the registry is skipped, except under CI=true, where it
// fails: CI must never pass by skipping the tests that matter. Tests share the registry and it keeps every
// schema until it stops, so each test should register under subjects of its own (Subject).
//
// Concurrency: the helpers may be called from parallel tests.
package registrytest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/proctest"
)

// Reference names another registered schema that a schema imports: Name is how the schema refers to it
// (for Protobuf, the import path), Subject and Version say which registered schema it is.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// URL returns the test registry's base URL (without a trailing slash), or skips t (fails it under CI=true)
// when there is none.
func URL(t testing.TB) string {
	t.Helper()
	return strings.TrimSuffix(proctest.Service(t, "SCHEMA_REGISTRY_URL", "a local schema registry"), "/")
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Subject returns a subject name unique to this test run, ending with "-" and name.
func Subject(t testing.TB, name string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	test := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(test) > 100 {
		test = test[:100]
	}
	return "test." + test + "." + hex.EncodeToString(b[:]) + "-" + name
}

// Register registers schema under subject, exactly as named, and returns the schema's id. schemaType is
// "AVRO", "PROTOBUF" or "JSON" ("" means AVRO). It fails t when the registry refuses the schema.
func Register(t testing.TB, subject, schemaType, schema string, refs ...Reference) int {
	t.Helper()
	body := struct {
		Schema     string      `json:"schema"`
		SchemaType string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
	}{schema, schemaType, refs}
	var out struct {
		ID int `json:"id"`
	}
	Do(t, http.MethodPost, "/subjects/"+url.PathEscape(subject)+"/versions", body, &out)
	if out.ID <= 0 {
		t.Fatalf("registrytest: register %s: the registry answered no id", subject)
	}
	return out.ID
}

// Do sends a request to the registry's API (path relative to URL) with in, when not nil, as its JSON body,
// and decodes the JSON answer into out, when not nil. It fails t on any answer but 200.
func Do(t testing.TB, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("registrytest: %s %s: %v", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, URL(t)+path, body)
	if err != nil {
		t.Fatalf("registrytest: %s %s: %v", method, path, err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json")
	if in != nil {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("registrytest: %s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("registrytest: %s %s: reading the answer: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("registrytest: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("registrytest: %s %s: %v in %s", method, path, err, b)
		}
	}
}
