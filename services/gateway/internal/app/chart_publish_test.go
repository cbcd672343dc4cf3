package app

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ssegate/ssegate/pkg/settings"
)

// chartBytes parses a byte-size value as the gateway does.
func chartBytes(t *testing.T, v any) int64 {
	t.Helper()
	var n int64
	if err := settings.Bytes(&n).Set(fmt.Sprint(v)); err != nil {
		t.Fatalf("byte size %v: %v", v, err)
	}
	return n
}

// chartMap returns vals[keys[0]][keys[1]]... as a map (nil when absent).
func chartMap(vals map[string]any, keys ...string) map[string]any {
	m := vals
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

// checkChartPublish checks what gateway.publish, gateway.websocket and redis make of the gateway's settings, as
// it loaded them: publishing only with publish.topics, each value set as the gateway's setting and each value
// left empty the gateway's default; the release's Redis given to the gateway for the limits per address and
// subject, and for publishing's idempotency keys whenever a Redis is configured (and never else); the Ingress
// letting through the largest publish body the gateway takes, unless the values' annotations say otherwise.
func checkChartPublish(t *testing.T, vals map[string]any, cfg Config, typed []runtime.Object) {
	t.Helper()
	def := defaults()
	p := chartMap(vals, "gateway", "publish")
	topics, _ := p["topics"].([]any)
	on := len(topics) > 0
	want := def.Publish
	if on {
		want.Topics = nil
		for _, tp := range topics {
			want.Topics = append(want.Topics, tp.(string)) //nolint:forcetypeassert // topics are strings
		}
		want.Anonymous, _ = p["anonymous"].(bool)
		for key, dst := range map[string]*int64{"maxKeyBytes": &want.MaxKeyBytes, "maxValueBytes": &want.MaxValueBytes, "maxHeaderBytes": &want.MaxHeaderBytes, "pendingBytes": &want.PendingBytes, "maxBodyBytes": &want.MaxBodyBytes} {
			if v, ok := p[key].(string); ok && v != "" {
				*dst = chartBytes(t, v)
			}
		}
		for key, dst := range map[string]*int{"maxRecords": &want.MaxRecords, "rate": &want.Rate, "burst": &want.Burst, "maxBodyReads": &want.MaxBodyReads} {
			if v, ok := p[key].(int); ok && v != 0 {
				*dst = v
			}
		}
		for key, dst := range map[string]*time.Duration{"timeout": &want.Timeout, "idempotencyWindow": &want.IdempotencyWindow, "bodyTimeout": &want.BodyTimeout} {
			if v, ok := p[key].(string); ok && v != "" {
				*dst = parseDur(t, v)
			}
		}
	}
	if fmt.Sprintf("%+v", cfg.Publish) != fmt.Sprintf("%+v", want) {
		t.Errorf("the gateway's publish settings\n %+v\nwant the values' (the gateway's defaults for those left empty)\n %+v", cfg.Publish, want)
	}
	ws := chartMap(vals, "gateway", "websocket")
	wantMsg := def.WSMaxMessageBytes
	if v, ok := ws["maxMessageBytes"].(string); ok && v != "" {
		wantMsg = chartBytes(t, v)
	}
	wantCompression, _ := ws["compression"].(bool)
	if cfg.WSMaxMessageBytes != wantMsg || cfg.WSCompression != wantCompression {
		t.Errorf("the gateway's ws-max-message-bytes %d, ws-compression %v; want %d and %v", cfg.WSMaxMessageBytes, cfg.WSCompression, wantMsg, wantCompression)
	}
	// The release's Redis: the limits per address and subject need it; publishing takes it when there is one.
	l := chartMap(vals, "gateway", "limits")
	perIP, _ := l["maxStreamsPerIP"].(int)
	perSubject, _ := l["maxStreamsPerSubject"].(int)
	shared := perIP > 0 || perSubject > 0
	r := chartMap(vals, "redis")
	bundled, _ := r["bundled"].(bool)
	addr, _ := r["addr"].(string)
	wantAddr := ""
	if shared || (on && (bundled || addr != "")) {
		wantAddr = addr
		if bundled {
			wantAddr = "sse-ssegate-redis:6379"
		}
	}
	if cfg.Limits.Redis.Addr != wantAddr {
		t.Errorf("the gateway's redis-addr %q, want %q (limits shared %v, publishing %v, redis %v)", cfg.Limits.Redis.Addr, wantAddr, shared, on, r)
	}
	// ingress-nginx lets through the largest body the gateway takes (its own default is 1m), unless the
	// values' annotations set it.
	own := chartMap(vals, "gateway", "ingress", "annotations")
	for _, ing := range find[*networkingv1.Ingress](typed) {
		got, set := ing.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"]
		wantSize, wantSet := own["nginx.ingress.kubernetes.io/proxy-body-size"].(string)
		if on && !wantSet {
			wantSize, wantSet = strconv.FormatInt(cfg.Publish.maxBody(), 10), true
		}
		if got != wantSize || set != wantSet {
			t.Errorf("Ingress proxy-body-size %q (set %v), want %q (set %v)", got, set, wantSize, wantSet)
		}
	}
}

// TestChartPublish: gateway.publish and gateway.websocket reach the gateway's configuration as the settings the
// gateway loads (checkChartPublish, through the invariants), and only those set; publishing takes the release's
// Redis for its idempotency keys when there is one, without any limit needing it, with its password's Secret
// mounted; the notes say where keys are kept; a publish topic that is not served, or a negative bound, is
// refused at render.
func TestChartPublish(t *testing.T) {
	ingress := map[string]any{"enabled": true, "hosts": []any{"events.example.com"}}
	for _, tc := range []struct {
		name    string
		gateway map[string]any
		redis   map[string]any
		wantErr string
		// config lines the gateway's configuration has and has not
		config, notConfig []string
		// notes lines the notes have
		notes []string
		// the Ingress's proxy-body-size, besides checkChartPublish's check against the gateway's bound
		ingressBodySize string
	}{
		{
			name: "publishing with every value, through the Ingress, with your Redis",
			gateway: map[string]any{
				"publish": map[string]any{
					"topics": []any{"orders"}, "anonymous": true, "rate": 50, "burst": 100,
					"maxValueBytes": "2MiB", "maxKeyBytes": "1KiB", "maxHeaderBytes": "8KiB", "maxRecords": 100,
					"pendingBytes": "64MiB", "timeout": "30s", "idempotencyWindow": "1h",
				},
				"ingress": ingress,
			},
			redis: map[string]any{"addr": "redis.example:6379", "passwordSecret": map[string]any{"name": "redis-pw"}},
			config: []string{
				`publish-topics: ["orders"]`, "publish-anonymous: true", `publish-max-value-bytes: "2MiB"`,
				`publish-max-key-bytes: "1KiB"`, `publish-max-header-bytes: "8KiB"`, "publish-max-records: 100",
				`publish-pending-bytes: "64MiB"`, `publish-timeout: "30s"`, `publish-idempotency-window: "1h"`,
				"publish-rate: 50", "publish-burst: 100",
				`redis-addr: "redis.example:6379"`, "redis-password-file: /etc/ssegate/redis/password",
			},
			notConfig: []string{"quota-failure", "max-streams-per-ip"},
			notes: []string{
				"Publishing is open for orders: POST http://sse-ssegate-gateway.events.svc:80/topics/<topic>/records (anonymous requests too",
				"Idempotency keys are kept in Redis (redis.example:6379)",
			},
		},
		{
			name:      "publishing with the gateway's defaults and the bundled Redis",
			gateway:   map[string]any{"publish": map[string]any{"topics": []any{"orders", "payments"}}, "ingress": ingress},
			redis:     map[string]any{"bundled": true},
			config:    []string{`publish-topics: ["orders","payments"]`, `redis-addr: "sse-ssegate-redis:6379"`},
			notConfig: []string{"publish-anonymous", "publish-max-", "publish-pending-bytes", "publish-timeout", "publish-idempotency", "publish-rate", "publish-burst", "quota-failure"},
			notes:     []string{"with a token whose scope's publish names the topic", "(the bundled Redis keeps nothing across its own restarts)"},
		},
		{
			name:      "publishing without a Redis: each pod's own keys",
			gateway:   map[string]any{"publish": map[string]any{"topics": []any{"orders"}}},
			config:    []string{`publish-topics: ["orders"]`},
			notConfig: []string{"redis-addr"},
			notes:     []string{"No Redis is set (redis.addr): each pod remembers its own idempotency keys"},
		},
		{
			name:    "a body bound under the gateway's cap of 64MiB, through the Ingress",
			gateway: map[string]any{"publish": map[string]any{"topics": []any{"orders"}, "maxValueBytes": "16KiB", "maxRecords": 10}, "ingress": ingress},
			// (4KiB + 16KiB + 16KiB) x 4/3 + 1KiB, for 10 records
			config:          []string{`publish-max-value-bytes: "16KiB"`, "publish-max-records: 10"},
			ingressBodySize: "501760",
		},
		{
			name: "the Ingress's own body size wins",
			gateway: map[string]any{
				"publish": map[string]any{"topics": []any{"orders"}},
				"ingress": map[string]any{"enabled": true, "hosts": []any{"events.example.com"}, "annotations": map[string]any{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}},
			},
		},
		{
			name:      "a Redis without publishing or shared limits is not the gateway's",
			gateway:   map[string]any{"ingress": ingress},
			redis:     map[string]any{"addr": "redis.example:6379"},
			notConfig: []string{"redis-addr", "publish-"},
		},
		{
			name: "publish values without a topic write nothing",
			gateway: map[string]any{"publish": map[string]any{
				"anonymous": true, "rate": 50, "maxValueBytes": "2MiB", "pendingBytes": "64MiB", "timeout": "30s",
			}},
			redis:     map[string]any{"addr": "redis.example:6379"},
			notConfig: []string{"publish-", "redis-addr"},
		},
		{
			name:      "WebSocket values",
			gateway:   map[string]any{"websocket": map[string]any{"maxMessageBytes": "1MiB", "compression": true}},
			config:    []string{`ws-max-message-bytes: "1MiB"`, "ws-compression: true"},
			notConfig: []string{"publish-"},
		},
		{
			name:      "WebSocket defaults",
			gateway:   map[string]any{},
			notConfig: []string{"ws-max-message-bytes", "ws-compression"},
		},
		{
			name:    "a publish topic that is not served",
			gateway: map[string]any{"publish": map[string]any{"topics": []any{"orders", "refunds"}}},
			wantErr: `gateway.publish.topics names "refunds", which is not one of gateway.topics (orders, payments)`,
		},
		{
			name:    "a negative publish rate",
			gateway: map[string]any{"publish": map[string]any{"topics": []any{"orders"}, "rate": -1}},
			wantErr: "gateway.publish.rate must be zero",
		},
		{
			name:    "an unknown publish value",
			gateway: map[string]any{"publish": map[string]any{"topic": []any{"orders"}}},
			wantErr: "schema",
		},
		{
			name:    "an unknown WebSocket value",
			gateway: map[string]any{"websocket": map[string]any{"compress": true}},
			wantErr: "schema",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.gateway["topics"] = []any{"orders", "payments"}
			vals := map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": tc.gateway}
			if tc.redis != nil {
				vals["redis"] = tc.redis
			}
			out, typed, ok := renderCase(t, vals, tc.wantErr, tc.config, tc.notConfig, tc.notes) // with checkChartPublish
			if !ok {
				return
			}
			if tc.ingressBodySize != "" {
				for _, ing := range find[*networkingv1.Ingress](typed) {
					if got := ing.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"]; got != tc.ingressBodySize {
						t.Errorf("Ingress proxy-body-size %q, want %s", got, tc.ingressBodySize)
					}
				}
			}
			notes := out["ssegate/templates/NOTES.txt"]
			if chartMap(vals, "gateway", "publish")["topics"] == nil && strings.Contains(notes, "Publishing is open") {
				t.Errorf("the notes speak of publishing, which is off:\n%s", notes)
			}
		})
	}
}

// TestChartPublishDefaults: the gateway's defaults the chart stands in for empty publish values (in the
// Ingress's body size and the memory limit) are the gateway's.
func TestChartPublishDefaults(t *testing.T) {
	d := publishDefaults()
	if d.MaxKeyBytes != 4<<10 || d.MaxValueBytes != 1<<20 || d.MaxHeaderBytes != 16<<10 || d.MaxRecords != 500 || d.PendingBytes != 16<<20 {
		t.Errorf("the gateway's publish defaults %+v differ from the chart's (4KiB, 1MiB, 16KiB, 500, 16MiB in _helpers.tpl and _memory.tpl)", d)
	}
}
