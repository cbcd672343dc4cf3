package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// SchemaURL is the schema of the pinned semantic conventions (go.opentelemetry.io/otel/semconv/v1.43.0, the
// version the OpenTelemetry SDK in use speaks too, so the resources merge).
const SchemaURL = semconv.SchemaURL

// Service names, the service.name of each service's resource.
const (
	Gateway = "ssegate-gateway"
	Ingest  = "ssegate-ingest"
)

// Version returns the version of the running build: the main module's version (a tag, or a pseudo-version),
// else the VCS revision the binary was built from, else "devel".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			return s.Value
		}
	}
	return "devel"
}

// Resource returns the resource of service: service.name, service.version, and what the SDK adds by
// default (telemetry.sdk.*). OTEL_RESOURCE_ATTRIBUTES adds to it (and OTEL_SERVICE_NAME overrides the
// name), as the OpenTelemetry specification says.
func Resource(service string) (*resource.Resource, error) {
	own := resource.NewWithAttributes(SchemaURL, semconv.ServiceName(service), semconv.ServiceVersion(Version()))
	r, err := resource.Merge(resource.Default(), own)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	env, err := resource.New(context.Background(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource from the environment: %w", err)
	}
	if r, err = resource.Merge(r, env); err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return r, nil
}

// Propagator is how trace context travels in HTTP headers: W3C traceparent and tracestate.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Tracing is a service's tracer provider and what it takes to stop it.
type Tracing struct {
	// Provider makes the service's tracers. A no-op provider when no endpoint is configured.
	Provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil for the no-op provider
}

// Enabled says spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// NewTracing returns the tracer provider of the service that res describes. endpoint is the OTLP/HTTP
// collector's base URL (http://collector:4318; traces go to its /v1/traces); empty means tracing is off:
// a no-op provider, nothing exported. The sampler is the parent's decision for a request that carries a
// traceparent, else every trace (OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG change that), and the
// exporter reads the other OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression).
func NewTracing(endpoint string, res *resource.Resource) (*Tracing, error) {
	if endpoint == "" {
		return &Tracing{Provider: noop.NewTracerProvider()}, nil
	}
	u, err := TracesURL(endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u))
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)),
	)
	return &Tracing{Provider: tp, sdk: tp}, nil
}

// TracesURL returns the URL traces are posted to for an OTLP/HTTP endpoint: its /v1/traces, as
// OTEL_EXPORTER_OTLP_ENDPOINT means. An endpoint that is not an http or https URL is an error.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("telemetry: otlp endpoint %q is not an http:// or https:// URL", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

// Shutdown exports what is still queued and stops the exporter. It does nothing for the no-op provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("telemetry: tracer shutdown: %w", err)
	}
	return nil
}

// maxIDAttr bounds the ids put in span attributes: an id of thousands of partitions, or a long event id, is
// cut, not exported whole.
const maxIDAttr = 1024

// CutID returns id as a span attribute takes it: cut after maxIDAttr bytes, with "..." to say so.
func CutID(id string) string {
	if len(id) > maxIDAttr {
		return id[:maxIDAttr] + "..."
	}
	return id
}
