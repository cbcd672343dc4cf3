package app

import (
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/ssegate/ssegate/services/gateway/internal/stream"
	"github.com/ssegate/ssegate/services/gateway/internal/valuefilter"
)

// TestChartMemory: the gateway container's memory limit and GOMEMLIMIT follow from the ring settings, the
// replay block cache, the unfinished writes, publishing's unacknowledged records (with a topic open), the
// connections a pod is sized for (at unpooledConnectionKiB each when the pods speak TLS or h2c, whose
// connections and streams the writer pool does not serve, and for the WebSocket share, with a compressor more
// each with compression) and the base, as values.yaml and
// docs/kubernetes.md say; the replay cache's value is the gateway's replay-cache-bytes too; a limit given in resources wins, and
// GOMEMLIMIT is then a share of it.
func TestChartMemory(t *testing.T) {
	const Ki, Mi, Gi = int64(1) << 10, int64(1) << 20, int64(1) << 30
	// derived is the arithmetic of the chart: GOMEMLIMIT (percent of the limit) covers rings + replay cache +
	// unfinished writes + connections x KiB + base; the limit is rounded up to a MiB.
	// bounded is what the gateway's own bounded holds take, as its code bounds them: the filter caches, the
	// snapshots built at once (the pod's default) and the conflated streams together.
	bounded := int64(valuefilter.CacheBytes + stream.SnapshotsMemory(0) + stream.ConflatedBytes)
	limitOf := func(need, pct int64) int64 {
		need += bounded
		limit := (need*100 + pct - 1) / pct
		return (limit + Mi - 1) / Mi * Mi
	}
	derived := func(rings, replayCache, pending, conns, connKiB, baseMiB, pct int64) int64 {
		return limitOf(rings+replayCache+pending+conns*connKiB*Ki+baseMiB*Mi, pct)
	}
	// derivedWith adds publishing's unacknowledged records (publish) and ws WebSocket streams among the
	// connections, at wsKiB each.
	derivedWith := func(rings, replayCache, pending, publish, conns, connKiB, ws, wsKiB, baseMiB, pct int64) int64 {
		return limitOf(rings+replayCache+pending+publish+((conns-ws)*connKiB+ws*wsKiB)*Ki+baseMiB*Mi, pct)
	}
	for _, tc := range []struct {
		name        string
		gateway     map[string]any
		wantLimit   int64
		wantRequest string
		wantConfig  []string
	}{
		{
			"defaults: one topic of 64MiB",
			map[string]any{"topics": []any{"t"}},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "542Mi",
			[]string{`ring-bytes: "64MiB"`, `replay-cache-bytes: "32MiB"`, `pending-write-bytes: "32MiB"`},
		},
		{
			"the replay cache's bytes: the setting and the limit",
			map[string]any{"topics": []any{"t"}, "replayCacheBytes": "256MiB"},
			derived(64*Mi, 256*Mi, 32*Mi, 10000, 4, 128, 90), "791Mi",
			[]string{`replay-cache-bytes: "256MiB"`},
		},
		{
			"the unfinished writes' bytes: the setting and the limit",
			map[string]any{"topics": []any{"t"}, "pendingWriteBytes": "256MiB"},
			derived(64*Mi, 32*Mi, 256*Mi, 10000, 4, 128, 90), "791Mi",
			[]string{`pending-write-bytes: "256MiB"`},
		},
		{
			"key indexes: their sizes are memory too",
			map[string]any{"topics": []any{"a", "b"}, "topicSnapshotIndex": map[string]any{"a": "64MiB", "b": "16MiB"}},
			derived(2*64*Mi+80*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "",
			[]string{"topic-snapshot-index:", `a: "64MiB"`, `b: "16MiB"`},
		},
		{
			"eight topics without a budget: 8 x ringBytes",
			map[string]any{"topics": []any{"a", "b", "c", "d", "e", "f", "g", "h"}},
			derived(8*64*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "", nil,
		},
		{
			"a topic's own ring size",
			map[string]any{"topics": []any{"a", "b"}, "ringBytes": "16MiB", "topicRingBytes": map[string]any{"b": "1GiB"}},
			derived(16*Mi+Gi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "",
			[]string{`ring-bytes: "16MiB"`, "topic-ring-bytes:", `b: "1GiB"`},
		},
		{
			"a budget: eight topics cost the budget",
			map[string]any{"topics": []any{"a", "b", "c", "d", "e", "f", "g", "h"}, "ringBudget": "512MiB"},
			derived(512*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "",
			[]string{`ring-budget: "512MiB"`, `ring-floor: "1MiB"`},
		},
		{
			"a budget of one topic is the same",
			map[string]any{"topics": []any{"a"}, "ringBudget": "512MiB"},
			derived(512*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "", nil,
		},
		{
			"a budget with an override and a floor",
			map[string]any{"topics": []any{"a", "b"}, "ringBudget": "1GiB", "ringFloor": "8MiB", "topicRingBytes": map[string]any{"a": "256MiB"}},
			derived(Gi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "",
			[]string{`ring-budget: "1GiB"`, `ring-floor: "8MiB"`, `a: "256MiB"`},
		},
		{
			"connections, base and percentage",
			map[string]any{
				"topics": []any{"a"}, "ringBudget": "2GiB",
				"memory": map[string]any{"connections": 100000, "connectionKiB": 3, "baseMiB": 256, "goMemLimitPercent": 80},
			},
			derived(2*Gi, 32*Mi, 32*Mi, 100000, 3, 256, 80), "", nil,
		},
		{
			"TLS: connections outside the writer pool",
			map[string]any{"topics": []any{"t"}, "tls": map[string]any{"secretName": "gateway-tls"}},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 36, 128, 90), "889Mi", nil,
		},
		{
			"h2c: HTTP/2 streams outside the writer pool",
			map[string]any{"topics": []any{"t"}, "h2c": true},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 36, 128, 90), "889Mi", nil,
		},
		{
			"TLS with a cost per connection of its own",
			map[string]any{
				"topics": []any{"t"}, "tls": map[string]any{"secretName": "gateway-tls"},
				"memory": map[string]any{"connections": 20000, "unpooledConnectionKiB": 50, "goMemLimitPercent": 90},
			},
			derived(64*Mi, 32*Mi, 32*Mi, 20000, 50, 128, 90), "", nil,
		},
		{
			"publishing: publish-pending-bytes' default of 16MiB",
			map[string]any{"topics": []any{"t"}, "publish": map[string]any{"topics": []any{"t"}}},
			derivedWith(64*Mi, 32*Mi, 32*Mi, 16*Mi, 10000, 4, 0, 0, 128, 90), "559Mi",
			[]string{`publish-topics: ["t"]`},
		},
		{
			"publishing: its pending bytes, the setting and the limit",
			map[string]any{"topics": []any{"t"}, "publish": map[string]any{"topics": []any{"t"}, "pendingBytes": "256MiB"}},
			derivedWith(64*Mi, 32*Mi, 32*Mi, 256*Mi, 10000, 4, 0, 0, 128, 90), "826Mi",
			[]string{`publish-pending-bytes: "256MiB"`},
		},
		{
			"publish pending bytes without a topic open: publishing is off, nothing counted",
			map[string]any{"topics": []any{"t"}, "publish": map[string]any{"pendingBytes": "256MiB"}},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "542Mi", nil,
		},
		{
			"WebSocket streams: their share at unpooledConnectionKiB",
			map[string]any{"topics": []any{"t"}, "memory": map[string]any{"websocketPercent": 25, "goMemLimitPercent": 90}},
			derivedWith(64*Mi, 32*Mi, 32*Mi, 0, 10000, 4, 2500, 36, 128, 90), "628Mi", nil,
		},
		{
			"WebSocket streams with compression: a compressor each",
			map[string]any{
				"topics": []any{"t"}, "websocket": map[string]any{"compression": true},
				"memory": map[string]any{"websocketPercent": 10, "goMemLimitPercent": 90},
			},
			derivedWith(64*Mi, 32*Mi, 32*Mi, 0, 10000, 4, 1000, 36+1210, 128, 90), "",
			[]string{"ws-compression: true"},
		},
		{
			"compression without a WebSocket share counts nothing",
			map[string]any{"topics": []any{"t"}, "websocket": map[string]any{"compression": true}},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "542Mi", nil,
		},
		{
			"WebSocket streams with TLS: every connection is unpooled already",
			map[string]any{
				"topics": []any{"t"}, "tls": map[string]any{"secretName": "gateway-tls"},
				"memory": map[string]any{"websocketPercent": 50, "goMemLimitPercent": 90},
			},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 36, 128, 90), "889Mi", nil,
		},
		{
			"publishing and WebSockets together, with their own costs",
			map[string]any{
				"topics": []any{"a", "b"}, "ringBudget": "1GiB",
				"publish":   map[string]any{"topics": []any{"b"}, "pendingBytes": "64MiB"},
				"websocket": map[string]any{"compression": true},
				"memory":    map[string]any{"connections": 20000, "websocketPercent": 5, "unpooledConnectionKiB": 40, "websocketCompressionKiB": 1300, "goMemLimitPercent": 80},
			},
			derivedWith(Gi, 32*Mi, 32*Mi, 64*Mi, 20000, 4, 1000, 40+1300, 128, 80), "", nil,
		},
		{
			"a limit given in resources wins",
			map[string]any{
				"topics": []any{"a"}, "ringBudget": "512MiB",
				"resources": map[string]any{"limits": map[string]any{"memory": "2Gi"}},
			},
			2 * Gi, "2Gi", nil,
		},
		{
			"a request given stays",
			map[string]any{
				"topics":    []any{"a"},
				"resources": map[string]any{"requests": map[string]any{"memory": "100Mi"}},
			},
			derived(64*Mi, 32*Mi, 32*Mi, 10000, 4, 128, 90), "100Mi", nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pct := int64(90)
			if m, ok := tc.gateway["memory"].(map[string]any); ok {
				pct = int64(m["goMemLimitPercent"].(int))
			}
			out, err := renderChart(t, map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": tc.gateway})
			if err != nil {
				t.Fatal(err)
			}
			typed, other, _ := objects(t, out)
			checkChartInvariants(t, map[string]any{"gateway": tc.gateway}, typed, other)
			c := find[*appsv1.StatefulSet](typed)[0].Spec.Template.Spec.Containers[0]
			if got := c.Resources.Limits.Memory().Value(); got != tc.wantLimit {
				t.Errorf("memory limit %d (%s), want %d (%d MiB)", got, c.Resources.Limits.Memory(), tc.wantLimit, tc.wantLimit/Mi)
			}
			if tc.wantRequest != "" && c.Resources.Requests.Memory().String() != tc.wantRequest {
				t.Errorf("memory request %s, want %s", c.Resources.Requests.Memory(), tc.wantRequest)
			}
			if c.Resources.Requests.Memory().IsZero() {
				t.Error("no memory request")
			}
			var goMem string
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					goMem = e.Value
				}
			}
			if want := strconv.FormatInt(tc.wantLimit*pct/100, 10); goMem != want {
				t.Errorf("GOMEMLIMIT %q, want %s (%d%% of %d)", goMem, want, pct, tc.wantLimit)
			}
			cm := out["ssegate/templates/gateway-configmap.yaml"]
			for _, w := range tc.wantConfig {
				if !strings.Contains(cm, w) {
					t.Errorf("gateway configuration lacks %q:\n%s", w, cm)
				}
			}
		})
	}
}

// TestChartMemoryValueSets: in every value set of the chart's tests, the gateway has a memory request and
// limit, and GOMEMLIMIT is below the limit.
func TestChartMemoryValueSets(t *testing.T) {
	for name, vals := range chartValueSets {
		out, err := renderChart(t, vals)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		typed, _, _ := objects(t, out)
		c := find[*appsv1.StatefulSet](typed)[0].Spec.Template.Spec.Containers[0]
		limit := c.Resources.Limits.Memory().Value()
		var goMem int64
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				goMem, _ = strconv.ParseInt(e.Value, 10, 64)
			}
		}
		if goMem <= 0 || goMem >= limit || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: GOMEMLIMIT %d, memory limit %d, request %s: want 0 < GOMEMLIMIT < limit and a request", name, goMem, limit, c.Resources.Requests.Memory())
		}
	}
}

// TestChartMemoryBadSize: a ring size or memory limit the chart cannot read is an error naming it.
func TestChartMemoryBadSize(t *testing.T) {
	for _, g := range []map[string]any{
		{"topics": []any{"a"}, "ringBudget": "lots"},
		{"topics": []any{"a"}, "ringBytes": "1.5GiB"},
		{"topics": []any{"a"}, "replayCacheBytes": "lots"},
		{"topics": []any{"a"}, "resources": map[string]any{"limits": map[string]any{"memory": "1.5Gi"}}},
		{"topics": []any{"a"}, "publish": map[string]any{"topics": []any{"a"}, "pendingBytes": "lots"}},
	} {
		_, err := renderChart(t, map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": g})
		if err == nil || !strings.Contains(err.Error(), "is not a byte size") {
			t.Errorf("%v: %v, want an error saying it is not a byte size", g, err)
		}
	}
}

// TestChartMemoryWebSocketPercent: a WebSocket share that is not a percentage is refused at render.
func TestChartMemoryWebSocketPercent(t *testing.T) {
	for _, pct := range []int{-1, 101} {
		g := map[string]any{"topics": []any{"a"}, "memory": map[string]any{"websocketPercent": pct}}
		_, err := renderChart(t, map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": g})
		if err == nil || !strings.Contains(err.Error(), "gateway.memory.websocketPercent must be from 0 to 100") {
			t.Errorf("websocketPercent %d: %v, want an error naming it", pct, err)
		}
	}
}

// TestChartIngestGoMemLimit: ingest's GOMEMLIMIT is 90% of its memory limit, as the gateway's, not all of it
// (the rest is headroom for what the Go heap does not count); without a limit there is none.
func TestChartIngestGoMemLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources map[string]any
		want      string
	}{
		{"the default limit of 256Mi", nil, "241591910"},
		{"a limit of 1Gi", map[string]any{"limits": map[string]any{"memory": "1Gi"}}, "966367641"},
		{"no limit", map[string]any{"limits": map[string]any{"memory": nil}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := cloneValues(chartValueSets["everything"])
			if tc.resources != nil {
				vals["ingest"].(map[string]any)["resources"] = tc.resources //nolint:forcetypeassert // the value set has it
			}
			out, err := renderChart(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			typed, _, _ := objects(t, out)
			got := ""
			for _, d := range find[*appsv1.Deployment](typed) {
				for _, e := range d.Spec.Template.Spec.Containers[0].Env {
					if d.Name == "sse-ssegate-ingest" && e.Name == "GOMEMLIMIT" {
						got = e.Value
					}
				}
			}
			if got != tc.want {
				t.Fatalf("ingest GOMEMLIMIT %q, want %q", got, tc.want)
			}
		})
	}
}

// cloneValues returns a deep copy of chart values (maps and lists of plain values).
func cloneValues(v map[string]any) map[string]any {
	out := map[string]any{}
	for k, x := range v {
		switch x := x.(type) {
		case map[string]any:
			out[k] = cloneValues(x)
		default:
			out[k] = x
		}
	}
	return out
}
