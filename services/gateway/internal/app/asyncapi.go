package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	tel "github.com/ssegate/ssegate/pkg/telemetry"
	"github.com/ssegate/ssegate/services/gateway/internal/asyncapi"
	"github.com/ssegate/ssegate/services/gateway/internal/auth"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// asyncAPIDocs makes the AsyncAPI documents of /asyncapi.json and `gateway asyncapi`: the served topics with
// their payload schemas, looked up in the registry (the latest version of the subject {topic}-value) at most
// once per asyncAPISchemaTTL per topic. Safe for concurrent use.
type asyncAPIDocs struct {
	cfg     Config
	modes   map[string]auth.Mode
	src     schema.Source // nil when no topic has a schema format
	timeout time.Duration

	mu    sync.Mutex
	cache map[string]topicSchema // by topic: at most one entry per served topic
}

// topicSchema is a topic's described schema, or why there is none, and when it was looked up.
type topicSchema struct {
	desc *schema.Description
	note string
	at   time.Time
}

// asyncAPISchemaTTL is how long a topic's described schema (or the failure to find it) is kept: a new schema
// version shows in the document within it, and requests never ask the registry more often.
const asyncAPISchemaTTL = time.Minute

func newAsyncAPIDocs(cfg Config) (*asyncAPIDocs, error) {
	modes, err := cfg.authModes()
	if err != nil {
		return nil, err
	}
	d := &asyncAPIDocs{
		cfg: cfg, modes: modes, timeout: cfg.Values.Registry.Timeout, cache: map[string]topicSchema{},
	}
	for _, t := range cfg.Topics {
		if value, _, _ := cfg.Values.topicFormats(t); value.Schema() != 0 {
			if d.src, err = cfg.Values.schemaSource(); err != nil {
				return nil, err
			}
			break
		}
	}
	return d, nil
}

// document is the AsyncAPI document of topics, for clients that reach the gateway at host.
func (d *asyncAPIDocs) document(ctx context.Context, topics []string, host string, tls bool) map[string]any {
	spec := asyncapi.Spec{
		Title: "ssegate gateway", AppVersion: tel.Version(), Host: host, TLS: tls,
		Cookie: d.cfg.Auth.Cookie, QueryToken: d.cfg.Auth.QueryToken,
	}
	for _, name := range topics {
		value, _, _ := d.cfg.Values.topicFormats(name)
		t := asyncapi.Topic{Name: name, Auth: d.modes[name].String(), ValueFormat: d.cfg.Values.formatName(name)}
		if value.Schema() != 0 {
			s := d.schemaOf(ctx, name)
			t.Schema, t.SchemaNote = s.desc, s.note
		}
		spec.Topics = append(spec.Topics, t)
	}
	return spec.Document()
}

// schemaOf describes topic's value schema: from the cache, or from the registry within the lookup timeout.
func (d *asyncAPIDocs) schemaOf(ctx context.Context, topic string) topicSchema {
	d.mu.Lock()
	s, ok := d.cache[topic]
	d.mu.Unlock()
	if ok && time.Since(s.at) < asyncAPISchemaTTL {
		return s
	}
	subject := topic + "-value"
	s = topicSchema{at: time.Now()}
	if d.src == nil {
		s.note = "no schema registry"
	} else {
		ctx, cancel := context.WithTimeout(ctx, d.timeout)
		desc, err := schema.Describe(ctx, d.src, subject, asyncapi.Namer(topic))
		cancel()
		switch {
		case err == nil:
			s.desc = desc
		case errors.Is(err, context.Canceled):
			return topicSchema{note: "the request ended"} // not kept: says nothing of the registry
		default:
			s.note = "the latest schema of subject " + subject + " could not be read (" + err.Error() + ")"
		}
	}
	d.mu.Lock()
	d.cache[topic] = s
	d.mu.Unlock()
	return s
}

// handleAsyncAPI serves GET /asyncapi.json: the document of the topics the request may read. Public topics
// are always in it; a topic that needs a token only when the request's token allows it. A token that fails
// verification is refused as a stream would refuse it (401), so that a client learns its token needs renewing.
func (a *App) handleAsyncAPI(c *gin.Context) {
	cr := &credential{r: c.Request}
	var topics []string
	for _, t := range a.cfg.Topics {
		_, err := a.gate.admit(cr, t)
		if reason, ok := auth.ReasonOf(err); ok && reason != auth.ReasonMissing && reason != auth.ReasonInsufficientScope {
			abort(c, err)
			return
		}
		if err == nil {
			topics = append(topics, t)
		}
	}
	host := a.cfg.AsyncAPIHost
	if host == "" {
		host = c.Request.Host
	}
	tls := c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https")
	c.Header("Cache-Control", "no-cache")
	c.JSON(http.StatusOK, a.asyncAPI.document(c.Request.Context(), topics, host, tls))
}

// AsyncAPI returns the AsyncAPI document of every served topic (the command line's `gateway asyncapi`, for CI
// and for publishing the document), for clients at asyncapi-host, or localhost and the listen port.
func AsyncAPI(ctx context.Context, cfg Config) (map[string]any, error) {
	d, err := newAsyncAPIDocs(cfg)
	if err != nil {
		return nil, err
	}
	host := cfg.AsyncAPIHost
	if host == "" {
		_, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil || port == "" {
			port = "8080"
		}
		host = net.JoinHostPort("localhost", port)
	}
	return d.document(ctx, cfg.Topics, host, cfg.TLS.enabled()), nil
}
