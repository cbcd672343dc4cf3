package schema

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/ssegate/ssegate/pkg/registrytest"
)

// protoOrder builds an Order of orderProto with the descriptors compiled from its text, as a producer with
// generated code would write it, and returns its bytes.
func protoOrder(t *testing.T) []byte { return protoOrderBytes(t) }

func protoOrderBytes(t testing.TB) []byte {
	t.Helper()
	s, err := compileProto(context.Background(), orderProto, map[string]string{"shop/money.proto": moneyProto})
	if err != nil {
		t.Fatal(err)
	}
	md := s.file.Messages().ByName("Order")
	m := dynamicpb.NewMessage(md)
	f := md.Fields()
	m.Set(f.ByName("id"), protoreflect.ValueOfInt64(9007199254740993)) // 2^53+1: exact as a string
	total := m.Mutable(f.ByName("total")).Message()
	total.Set(total.Descriptor().Fields().ByName("currency"), protoreflect.ValueOfString("EUR"))
	total.Set(total.Descriptor().Fields().ByName("units"), protoreflect.ValueOfInt64(150))
	at := m.Mutable(f.ByName("at")).Message()
	at.Set(at.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(1796405400))
	at.Set(at.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(123000000))
	lines := m.Mutable(f.ByName("lines")).List()
	line := lines.NewElement().Message()
	line.Set(line.Descriptor().Fields().ByName("sku"), protoreflect.ValueOfString("BK-1"))
	line.Set(line.Descriptor().Fields().ByName("qty"), protoreflect.ValueOfUint32(2))
	lines.Append(protoreflect.ValueOfMessage(line))
	m.Set(f.ByName("status"), protoreflect.ValueOfEnum(1))
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const protoOrderJSON = `{"id":"9007199254740993","total":{"currency":"EUR","units":"150"},"at":"2026-12-04T17:30:00.123Z","lines":[{"sku":"BK-1","qty":2}],"status":"PAID"}`

// TestRegistry: against a real schema registry, values of each format decode through their registered
// schemas, a Protobuf schema's import through its reference, a nested message through its indexes; an id
// the registry does not know is unknown-schema.
func TestRegistry(t *testing.T) {
	url := registrytest.URL(t)
	var order avroCase
	for _, c := range avroCases(t) {
		if c.name == "order-event-1" {
			order = c
		}
	}
	avroID := registrytest.Register(t, registrytest.Subject(t, "order-avro"), "AVRO", order.schema)
	money := registrytest.Subject(t, "money")
	registrytest.Register(t, money, "PROTOBUF", moneyProto)
	protoID := registrytest.Register(t, registrytest.Subject(t, "order-proto"), "PROTOBUF", orderProto,
		registrytest.Reference{Name: "shop/money.proto", Subject: money, Version: 1})
	jsonID := registrytest.Register(t, registrytest.Subject(t, "order-json"), "JSON", orderJSON)

	reg, err := NewRegistry(RegistryConfig{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoders(reg, Options{ValidateJSON: true})
	line := lineBytes(t, "sku", "BK-9")
	cases := []struct {
		name string
		kind Kind
		v    []byte
		want string
	}{
		{"avro", Avro, framed(avroID, nil, order.bin), string(order.json_)},
		{"protobuf", Protobuf, framed(protoID, []int{0}, protoOrder(t)), protoOrderJSON},
		{"protobuf nested message", Protobuf, framed(protoID, []int{0, 0}, line), `{"sku":"BK-9"}`},
		{"json-schema", JSONSchema, framed(jsonID, nil, []byte(`{"id": 1}`)), `{"id":1}`},
	}
	for _, tc := range cases {
		if got, err := d.AppendJSON(nil, tc.kind, tc.v); err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.name, got, err, tc.want)
		}
	}
	if _, err := d.AppendJSON(nil, JSONSchema, framed(jsonID, nil, []byte(`{"id":"x"}`))); !isReason(err, Invalid) {
		t.Errorf("json-schema value of the wrong type: %v", err)
	}
	if _, err := d.AppendJSON(nil, Avro, framed(1<<30, nil, []byte{0})); !isReason(err, UnknownSchema) {
		t.Errorf("an id the registry does not know: %v", err)
	}
}

// lineBytes encodes one string field of Order.Line by its name.
func lineBytes(t *testing.T, field, v string) []byte {
	t.Helper()
	s, err := compileProto(context.Background(), orderProto, map[string]string{"shop/money.proto": moneyProto})
	if err != nil {
		t.Fatal(err)
	}
	md := s.file.Messages().ByName("Order").Messages().ByName("Line")
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName(protoreflect.Name(field)), protoreflect.ValueOfString(v))
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRegistryDown: a registry that does not answer makes the first lookup fail within the timeout, and the
// next ones at once.
func TestRegistryDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	reg, err := NewRegistry(RegistryConfig{URLs: []string{"http://" + addr}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoders(reg, Options{Timeout: time.Second})
	for i := range 3 {
		start := time.Now()
		_, err := d.AppendJSON(nil, Avro, framed(10+i, nil, []byte{0}))
		if !isReason(err, Unavailable) || time.Since(start) > 2*time.Second {
			t.Fatalf("lookup %d: %v after %v", i, err, time.Since(start))
		}
	}
}

// TestRegistryAuth: basic authentication from the password file and a bearer token from the token file, each
// file read again when it changes, so a rotated password or token is the one sent next.
func TestRegistryAuth(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_, _ = w.Write([]byte(`{"schema":"\"long\""}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	basic, err := NewRegistry(RegistryConfig{URLs: []string{srv.URL}, Username: "key", PasswordFile: write("pass", "secret\n")})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := write("token", "tok-1\n")
	bearer, err := NewRegistry(RegistryConfig{URLs: []string{srv.URL}, TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = basic.SchemaByID(ctx, 1)
	_, _ = bearer.SchemaByID(ctx, 1)
	write("token", "tok-2")
	_, _ = bearer.SchemaByID(ctx, 1)
	write("pass", "rotated\n")
	_, _ = basic.SchemaByID(ctx, 1)
	want := []string{"Basic a2V5OnNlY3JldA==", "Bearer tok-1", "Bearer tok-2", "Basic a2V5OnJvdGF0ZWQ="}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers %q, want %q", got, want)
	}
	for _, c := range []RegistryConfig{
		{URLs: []string{"registry:8081"}},
		{URLs: []string{"http://r"}, Username: "u"},
		{URLs: []string{"https://r", "http://registry.kafka:8081"}, Username: "u", PasswordFile: "p"}, // basic auth in clear
		{URLs: []string{"http://r"}, Username: "u", PasswordFile: "p", TokenFile: "t"},
		{URLs: []string{"http://r"}, TLS: kafkaTLSCertOnly},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestRegistryBasicAuthLoopback: basic authentication over http is refused except to a loopback address (a
// sidecar next to the gateway); over https it is fine.
func TestRegistryBasicAuthLoopback(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8081", "http://localhost:8081", "http://[::1]:8081", "https://registry.kafka"} {
		if err := (RegistryConfig{URLs: []string{u}, Username: "u", PasswordFile: "p"}).Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	err := (RegistryConfig{URLs: []string{"http://registry.kafka:8081"}, Username: "u", PasswordFile: "p"}).Validate()
	if err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("basic authentication over http: %v, want an error that says https", err)
	}
}

// standIn is a registry stand-in that answers every lookup with body.
func standIn(t *testing.T, body func(w http.ResponseWriter)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		body(w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRegistryFailover: a first URL that hangs leaves the second its whole timeout: the lookup succeeds there.
func TestRegistryFailover(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	good := standIn(t, func(w http.ResponseWriter) { _, _ = w.Write([]byte(`{"schema":"\"long\""}`)) })
	cfg := RegistryConfig{URLs: []string{hang.URL, good}, Timeout: 300 * time.Millisecond}
	reg, err := NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoders(reg, Options{Timeout: cfg.LookupTimeout()})
	if out, err := d.AppendJSON(nil, Avro, framed(5, nil, []byte{0x54})); err != nil || string(out) != "42" {
		t.Fatalf("first URL hanging: %s, %v; want the second URL's schema", out, err)
	}
}

// TestRegistryAnswerBounded: an answer longer than maxAnswer is not read to its end: the lookup fails,
// bad-schema.
func TestRegistryAnswerBounded(t *testing.T) {
	url := standIn(t, func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(`{"schema":"\"long\"","padding":"`))
		_, _ = w.Write([]byte(strings.Repeat("x", maxAnswer)))
		_, _ = w.Write([]byte(`"}`))
	})
	reg, err := NewRegistry(RegistryConfig{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoders(reg, Options{})
	if _, err := d.AppendJSON(nil, Avro, framed(5, nil, []byte{0x54})); !isReason(err, BadSchema) || !errors.Is(err, errAnswerTooLong) {
		t.Fatalf("an answer of 8 MiB and more: %v, want bad-schema, too long", err)
	}
}

var kafkaTLSCertOnly = func() (c RegistryConfig) { c.TLS.CertFile = "c.pem"; return c }().TLS
