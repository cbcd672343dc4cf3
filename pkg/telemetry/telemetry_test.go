package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

func TestTracesURL(t *testing.T) {
	cases := []struct {
		name, endpoint, want string
		ok                   bool
	}{
		{"base URL", "http://collector:4318", "http://collector:4318/v1/traces", true},
		{"trailing slash", "https://collector:4318/", "https://collector:4318/v1/traces", true},
		{"a path prefix", "http://gw.example/otlp", "http://gw.example/otlp/v1/traces", true},
		{"no scheme", "collector:4318", "", false},
		{"another scheme", "grpc://collector:4317", "", false},
		{"no host", "http://", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TracesURL(tc.endpoint)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("TracesURL(%q) = %q, %v; want %q, ok %v", tc.endpoint, got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestTracingOff: without an endpoint there is no SDK: spans do not record and Shutdown does nothing.
func TestTracingOff(t *testing.T) {
	tr, err := NewTracing("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() {
		t.Error("tracing without an endpoint is enabled")
	}
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "s")
	if span.IsRecording() {
		t.Error("a span of the no-op provider records")
	}
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestResource: the service's name and version, the SDK's attributes, and OTEL_RESOURCE_ATTRIBUTES on top.
func TestResource(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "k8s.pod.name=gw-0")
	r, err := Resource(Gateway)
	if err != nil {
		t.Fatal(err)
	}
	if r.SchemaURL() != SchemaURL {
		t.Errorf("schema %q, want %q", r.SchemaURL(), SchemaURL)
	}
	want := map[attribute.Key]string{
		"service.name": Gateway, "service.version": Version(), "telemetry.sdk.language": "go", "k8s.pod.name": "gw-0",
	}
	got := map[attribute.Key]string{}
	for _, kv := range r.Attributes() {
		got[kv.Key] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (resource %v)", k, got[k], v, got)
		}
	}
	if Version() == "" {
		t.Error("empty version")
	}
}
