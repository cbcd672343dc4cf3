package app

import (
	"fmt"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ssegate/ssegate/pkg/settings"
	tel "github.com/ssegate/ssegate/pkg/telemetry"
)

// instrumentation is the scope name of the gateway's tracer and meter.
const instrumentation = "github.com/ssegate/ssegate/services/gateway"

// otlpSetting is the otlp-endpoint setting (see settings.OTLPEndpoint).
func otlpSetting(p *string) settings.Setting { return settings.OTLPEndpoint(p, "SSEGATE_") }

func validateOTLP(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if _, err := tel.TracesURL(endpoint); err != nil {
		return fmt.Errorf("invalid setting otlp-endpoint (SSEGATE_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT): %w", err)
	}
	return nil
}

// newTracing returns the gateway's resource and tracer provider (a no-op one without an endpoint).
func newTracing(endpoint string) (*sdkresource.Resource, *tel.Tracing, error) {
	res, err := tel.Resource(tel.Gateway)
	if err != nil {
		return nil, nil, err
	}
	tr, err := tel.NewTracing(endpoint, res)
	if err != nil {
		return nil, nil, err
	}
	return res, tr, nil
}

// Ports, the port attribute of ssegate.http.responses.
const (
	portClients = "clients"
	portAdmin   = "admin"
)

// httpMetrics counts the answers of one port, by route and status.
type httpMetrics struct {
	responses metric.Int64Counter
	port      attribute.KeyValue
}

// observe is the middleware of every route of a port: it takes the request's W3C trace context (traceparent,
// tracestate) into its context when tracing is on, so the stream's spans are its children, and counts the
// response by route and status once the handler returns (a stream's when it ends, or when the writer pool
// takes it over: a 200 either way). Requests for no route count under route "unmatched".
func (h *httpMetrics) observe(tracing bool) gin.HandlerFunc {
	prop := tel.Propagator
	return func(c *gin.Context) {
		if tracing {
			ctx := prop.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
			if trace.SpanContextFromContext(ctx).IsValid() {
				c.Request = c.Request.WithContext(ctx)
			}
		}
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		h.responses.Add(c.Request.Context(), 1, metric.WithAttributes(h.port,
			semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(c.Writer.Status())))
	}
}
