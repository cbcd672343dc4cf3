package app

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	corev1 "k8s.io/api/core/v1"
)

// chartAllowedHosts renders the chart as release sse in namespace events and returns the gateway's
// allowed-hosts setting (nil when the configuration has none) and the host policy the gateway makes of it.
func chartAllowedHosts(t *testing.T, vals map[string]any) ([]string, *hostPolicy) {
	t.Helper()
	out, err := renderChart(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	typed, _, _ := objects(t, out)
	for _, cm := range find[*corev1.ConfigMap](typed) {
		if !strings.HasSuffix(cm.Name, "-gateway") {
			continue
		}
		var file struct {
			AllowedHosts []string `yaml:"allowed-hosts"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["gateway.yaml"]), &file); err != nil {
			t.Fatal(err)
		}
		p, err := newHostPolicy(file.AllowedHosts)
		if err != nil {
			t.Fatalf("the gateway refuses the chart's allowed-hosts: %v", err)
		}
		return file.AllowedHosts, p
	}
	t.Fatal("no gateway ConfigMap")
	return nil, nil
}

// TestChartAllowedHosts: the chart turns the Host check on by default, allowing what its own objects and the
// cluster need (the Services' names, the pods' names under the headless Service, IP addresses for kube-proxy
// clients, port-forwards and the helm test pod, which connects to the Service's cluster IP), the Ingress hosts
// and HTTPRoute hostnames when those are on, and the extra hosts; not a rebound name. The values can turn IP
// addresses off, change the cluster domain, or turn the check off.
func TestChartAllowedHosts(t *testing.T) {
	base := func(gateway map[string]any) map[string]any {
		g := map[string]any{"topics": []any{"orders"}}
		for k, v := range gateway {
			g[k] = v
		}
		return map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": g}
	}
	inCluster := []string{
		"sse-ssegate-gateway", "sse-ssegate-gateway:80", "sse-ssegate-gateway.events", "sse-ssegate-gateway.events.svc:80",
		"sse-ssegate-gateway.events.svc.cluster.local", "sse-ssegate-gateway.events.svc.cluster.local.:80",
		"sse-ssegate-gateway-headless.events.svc:8080",
		"sse-ssegate-gateway-0.sse-ssegate-gateway-headless.events.svc.cluster.local:8080",
		"sse-ssegate-gateway-1.sse-ssegate-gateway-headless.events:8080",
		"localhost:8080",
	}
	ips := []string{"10.96.0.12:80", "10.244.1.5:8080", "127.0.0.1:8080", "[fd00:10:96::c]:80", "[::1]:8080"}
	rebound := []string{
		"evil.example", "evil.example:80", "sse-ssegate-gateway.evil.example", "sse-ssegate-gateway.other.svc.cluster.local",
		"x.sse-ssegate-gateway.events.svc.cluster.local", "",
	}
	for _, tc := range []struct {
		name    string
		vals    map[string]any
		allowed []string
		refused []string
	}{
		{"default", base(nil), append(inCluster, ips...), append(rebound, "events.example.com")},
		{
			"ingress, route and extra hosts", base(map[string]any{
				"ingress":   map[string]any{"enabled": true, "hosts": []any{"events.example.com", "*.streams.example.com"}},
				"httpRoute": map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public"}}, "hostnames": []any{"route.example.com"}},
				"hostCheck": map[string]any{"extraHosts": []any{"lb.example.net:8080"}},
			}),
			append(inCluster, "events.example.com", "a.streams.example.com", "route.example.com:443", "lb.example.net:8080", "10.0.0.1"),
			append(rebound, "streams.example.com", "lb.example.net"),
		},
		{
			"no IP addresses, another cluster domain", base(map[string]any{"hostCheck": map[string]any{"allowIPs": false, "clusterDomain": "k8s.internal"}}),
			[]string{"sse-ssegate-gateway.events.svc.k8s.internal:80", "sse-ssegate-gateway-0.sse-ssegate-gateway-headless.events.svc.k8s.internal"},
			append(append(rebound, ips...), "sse-ssegate-gateway.events.svc.cluster.local"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, p := chartAllowedHosts(t, tc.vals)
			if p == nil {
				t.Fatal("the chart's configuration has no allowed-hosts: the check is off")
			}
			for _, h := range tc.allowed {
				if !p.allows(h) {
					t.Errorf("Host %q refused, want it answered (allowed-hosts %v)", h, entries)
				}
			}
			for _, h := range tc.refused {
				if p.allows(h) {
					t.Errorf("Host %q answered, want it refused (allowed-hosts %v)", h, entries)
				}
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		if entries, p := chartAllowedHosts(t, base(map[string]any{"hostCheck": map[string]any{"enabled": false}})); entries != nil || p != nil {
			t.Errorf("hostCheck.enabled false: allowed-hosts %v, want none", entries)
		}
	})
}
