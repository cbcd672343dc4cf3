package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	corev1 "k8s.io/api/core/v1"
)

// The files beside the chart for users without Helm or without the Prometheus Operator. TestMonitoringFiles
// keeps them equal to what the chart renders (-update-chart rewrites them).
const (
	rulesFile     = "../../../../k8s/monitoring/prometheus/ssegate-rules.yaml"
	dashboardFile = "../../../../k8s/monitoring/grafana/ssegate.json"
	chartBoard    = "../../../../helm/ssegate/dashboards/ssegate.json"
	runbooksDir   = "../../../../docs/runbooks"
)

// monitoringValues turns on every monitoring object of the chart, and ingest, whose alerts are in the rule.
func monitoringValues(extra map[string]any) map[string]any {
	metrics := map[string]any{
		"serviceMonitor":   map[string]any{"enabled": true},
		"prometheusRule":   map[string]any{"enabled": true},
		"grafanaDashboard": map[string]any{"enabled": true},
	}
	for k, v := range extra {
		metrics[k] = v
	}
	return map[string]any{
		"kafka":   map[string]any{"brokers": []any{"kafka-0.kafka:9092"}},
		"gateway": map[string]any{"topics": []any{"orders"}},
		"ingest":  map[string]any{"enabled": true, "sources": []any{map[string]any{"name": "wiki", "url": "https://stream.example.com/sse", "topic": "wiki"}}},
		"metrics": metrics,
	}
}

// ruleSpec is the part of a PrometheusRule (and of a Prometheus rules file) the tests read.
type ruleSpec struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// renderMonitoring renders the chart and returns the PrometheusRule's spec, the dashboard ConfigMap and the
// kinds of the monitoring objects.
func renderMonitoring(t *testing.T, name, namespace string, vals map[string]any) (spec map[string]any, board *corev1.ConfigMap, kinds []string) {
	t.Helper()
	out, err := renderChartAs(t, name, namespace, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	typed, other, _ := objects(t, out)
	for _, m := range other {
		kind, _ := m["kind"].(string)
		kinds = append(kinds, kind)
		if kind == "PrometheusRule" {
			spec, _ = m["spec"].(map[string]any)
		}
	}
	for _, cm := range find[*corev1.ConfigMap](typed) {
		if strings.HasSuffix(cm.Name, "-dashboard") {
			board = cm
		}
	}
	return spec, board, kinds
}

func decodeRules(t *testing.T, spec any) ruleSpec {
	t.Helper()
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var rs ruleSpec
	if err := yaml.UnmarshalWithOptions(b, &rs, yaml.Strict()); err != nil {
		t.Fatalf("rule spec: %v\n%s", err, b)
	}
	return rs
}

// TestChartMonitoring: with the values on, the chart has a ServiceMonitor, a PodMonitor for ingest, a
// PrometheusRule whose every alert has a severity, a summary, a description and a runbook_url naming a page
// of docs/runbooks under metrics.prometheusRule.runbookBaseURL, and the dashboard ConfigMap for Grafana's
// sidecar holding exactly helm/ssegate/dashboards/ssegate.json. By default none of them is rendered.
func TestChartMonitoring(t *testing.T) {
	wantAlerts := []string{
		"SsegateConsumerLag", "SsegateDeliveryLag", "SsegateResyncs", "SsegateReplayFailures", "SsegateWriteFailures",
		"SsegateServerErrors", "SsegateNotReady", "SsegateNoGatewayReady", "SsegatePublishFailing", "SsegatePublishSlow",
		"SsegatePublishDuplicatesPossible", "SsegateAuthHookFailing", "SsegateTLSCertificateExpiring", "SsegateTLSCertificateReloadFailing",
		"SsegateIngestSourceNotStreaming", "SsegateIngestWriteFailures", "SsegateIngestCheckpointAge",
	}
	cases := []struct {
		name, base string
		extra      map[string]any
	}{
		{"default base", "https://github.com/ssegate/ssegate/blob/main/docs/runbooks/", nil},
		{"own base without a slash", "https://wiki.example.com/ssegate/", map[string]any{
			"prometheusRule":   map[string]any{"enabled": true, "runbookBaseURL": "https://wiki.example.com/ssegate", "labels": map[string]any{"release": "prom"}},
			"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "Streaming"}},
		}},
	}
	board, err := os.ReadFile(chartBoard)
	if err != nil {
		t.Fatal(err)
	}
	var parsed map[string]any
	if err := json.Unmarshal(board, &parsed); err != nil {
		t.Fatalf("%s: %v", chartBoard, err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, cm, kinds := renderMonitoring(t, "sse", "events", monitoringValues(tc.extra))
			slices.Sort(kinds)
			if !slices.Equal(kinds, []string{"PodMonitor", "PrometheusRule", "ServiceMonitor"}) {
				t.Errorf("monitoring objects %v", kinds)
			}
			var got []string
			for _, g := range decodeRules(t, spec).Groups {
				for _, r := range g.Rules {
					got = append(got, r.Alert)
					if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
						t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
					}
					if r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.For == "" {
						t.Errorf("%s: summary %q, description %q, for %q", r.Alert, r.Annotations["summary"], r.Annotations["description"], r.For)
					}
					page, ok := strings.CutPrefix(r.Annotations["runbook_url"], tc.base)
					if !ok || strings.Contains(page, "/") || !strings.HasSuffix(page, ".md") {
						t.Errorf("%s: runbook_url %q, want a page under %s", r.Alert, r.Annotations["runbook_url"], tc.base)
						continue
					}
					if _, err := os.Stat(filepath.Join(runbooksDir, page)); err != nil {
						t.Errorf("%s: runbook page: %v", r.Alert, err)
					}
				}
			}
			if !slices.Equal(got, wantAlerts) {
				t.Errorf("alerts %v, want %v", got, wantAlerts)
			}
			if cm == nil {
				t.Fatal("no dashboard ConfigMap")
			}
			if cm.Labels["grafana_dashboard"] != "1" || cm.Data["ssegate.json"] != strings.TrimRight(string(board), "\n") {
				t.Errorf("dashboard ConfigMap labels %v; its JSON is the chart's file: %v", cm.Labels, cm.Data["ssegate.json"] == string(board))
			}
			if tc.extra != nil && cm.Annotations["grafana_folder"] != "Streaming" {
				t.Errorf("dashboard ConfigMap annotations %v", cm.Annotations)
			}
		})
	}
	t.Run("off by default", func(t *testing.T) {
		vals := monitoringValues(nil)
		delete(vals, "metrics")
		spec, cm, kinds := renderMonitoring(t, "sse", "events", vals)
		if spec != nil || cm != nil || len(kinds) != 0 {
			t.Errorf("monitoring objects rendered by default: %v, dashboard %v", kinds, cm != nil)
		}
	})
}

// TestMonitoringFiles: k8s/monitoring/prometheus/ssegate-rules.yaml is the chart's PrometheusRule as a Prometheus
// rules file (release and namespace "ssegate", as k8s/base), and k8s/monitoring/grafana/ssegate.json is the chart's
// dashboard; -update-chart rewrites both.
func TestMonitoringFiles(t *testing.T) {
	spec, _, _ := renderMonitoring(t, "ssegate", "ssegate", monitoringValues(nil))
	decodeRules(t, spec) // strict: nothing but groups and rules
	rules, err := yaml.MarshalWithOptions(spec, yaml.Indent(2), yaml.IndentSequence(true), yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		t.Fatal(err)
	}
	rules = append([]byte("# Generated from helm/ssegate (metrics.prometheusRule, release and namespace \"ssegate\") by TestMonitoringFiles\n"+
		"# (go test -run TestMonitoringFiles ./services/gateway/internal/app -args -update-chart). Do not edit: change the\n"+
		"# chart. A Prometheus rules file: list it under rule_files. The runbooks are in docs/runbooks.\n"), rules...)
	board, err := os.ReadFile(chartBoard)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{rulesFile: rules, dashboardFile: board} {
		if *updateChart {
			if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not the chart's (%v): run with -update-chart", path, err)
		}
	}
}
