// Package telemetry sets up what both ssegate services report through OpenTelemetry: the resource that names
// the service (service.name, service.version from the build), the tracer provider with its OTLP/HTTP exporter
// when an endpoint is configured, and the W3C trace-context propagator.
//
// Every semantic-conventions name the services use comes from the one version this package pins (Semconv),
// so that spans, metrics and the resource agree on it.
//
// With no endpoint, Tracing returns a no-op tracer provider: no exporter, no span processor, and starting a
// span costs a context lookup. A Tracing is safe for concurrent use; Shutdown flushes what is still queued.
package telemetry
