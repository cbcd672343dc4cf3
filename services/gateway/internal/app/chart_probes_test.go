package app

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// probeValues returns gateway.probes of values.yaml with vals' own over them.
func probeValues(t *testing.T, vals map[string]any) map[string]int {
	t.Helper()
	src, err := os.ReadFile("../../../../helm/ssegate/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var defaults struct {
		Gateway struct {
			Probes map[string]int `yaml:"probes"`
		} `yaml:"gateway"`
	}
	if err := yaml.Unmarshal(src, &defaults); err != nil {
		t.Fatal(err)
	}
	p := maps.Clone(defaults.Gateway.Probes)
	if p == nil {
		p = map[string]int{}
	}
	g, _ := vals["gateway"].(map[string]any)
	given, _ := g["probes"].(map[string]any)
	for k, v := range given {
		p[k] = v.(int)
	}
	for _, k := range []string{"startupSeconds", "startupPeriodSeconds", "readinessPeriodSeconds", "readinessFailureThreshold", "livenessPeriodSeconds", "livenessFailureThreshold", "timeoutSeconds"} {
		if p[k] == 0 {
			t.Errorf("values.yaml has no gateway.probes.%s", k)
			p[k] = 1
		}
	}
	return p
}

// checkProbes checks the gateway container's probes against the values: startup and liveness on /healthz,
// so that a pod that is alive but unready (waiting for Kafka, a topic or its prefill) is never restarted;
// readiness on /readyz, failing more than once before the pod leaves the Service; the startup budget covers
// probes.startupSeconds; every number from a value.
func checkProbes(t *testing.T, vals map[string]any, c corev1.Container) {
	t.Helper()
	p := probeValues(t, vals)
	for _, tc := range []struct {
		what              string
		probe             *corev1.Probe
		path              string
		period, threshold int
	}{
		{"startup", c.StartupProbe, "/healthz", p["startupPeriodSeconds"], (p["startupSeconds"] + p["startupPeriodSeconds"] - 1) / p["startupPeriodSeconds"]},
		{"readiness", c.ReadinessProbe, "/readyz", p["readinessPeriodSeconds"], p["readinessFailureThreshold"]},
		{"liveness", c.LivenessProbe, "/healthz", p["livenessPeriodSeconds"], p["livenessFailureThreshold"]},
	} {
		pr := tc.probe
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != tc.path || pr.HTTPGet.Port.StrVal != "admin" {
			t.Errorf("%s probe %+v, want GET %s on the admin port", tc.what, pr, tc.path)
			continue
		}
		if int(pr.PeriodSeconds) != tc.period || int(pr.FailureThreshold) != tc.threshold || int(pr.TimeoutSeconds) != p["timeoutSeconds"] {
			t.Errorf("%s probe: period %d s, failureThreshold %d, timeout %d s; want %d, %d and %d from the values %v",
				tc.what, pr.PeriodSeconds, pr.FailureThreshold, pr.TimeoutSeconds, tc.period, tc.threshold, p["timeoutSeconds"], p)
		}
	}
	if s := c.StartupProbe; s != nil && int(s.PeriodSeconds*s.FailureThreshold) < p["startupSeconds"] {
		t.Errorf("startup probe gives %d x %d s, less than probes.startupSeconds %d", s.FailureThreshold, s.PeriodSeconds, p["startupSeconds"])
	}
	if r := c.ReadinessProbe; r != nil && r.FailureThreshold < 2 {
		t.Errorf("readiness failureThreshold %d: one slow answer would take the pod out of the Service", r.FailureThreshold)
	}
}

// TestChartProbes: the gateway's probes come from gateway.probes, with the defaults values.yaml documents:
// the startup budget is a value (failureThreshold derived from it, rounded up), not a fixed 300 s on
// /readyz that restarted pods waiting for a topic, Kafka or a long prefill; readiness fails 3 times before a
// pod leaves the Service, and the schema refuses fewer than 2.
func TestChartProbes(t *testing.T) {
	base := func(probes map[string]any) map[string]any {
		g := map[string]any{"topics": []any{"t"}}
		if probes != nil {
			g["probes"] = probes
		}
		return map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": g}
	}
	for _, tc := range []struct {
		name   string
		probes map[string]any
		// want: startup period and failureThreshold, readiness period and failureThreshold, liveness period
		// and failureThreshold, timeout; nil for a schema error.
		want []int32
	}{
		{"defaults", nil, []int32{2, 30, 5, 3, 10, 6, 2}},
		{"a longer start, rounded up", map[string]any{"startupSeconds": 301, "startupPeriodSeconds": 3}, []int32{3, 101, 5, 3, 10, 6, 2}},
		{"a start shorter than a period", map[string]any{"startupSeconds": 1, "startupPeriodSeconds": 5}, []int32{5, 1, 5, 3, 10, 6, 2}},
		{"tuned", map[string]any{
			"readinessPeriodSeconds": 2, "readinessFailureThreshold": 10, "livenessPeriodSeconds": 20,
			"livenessFailureThreshold": 3, "timeoutSeconds": 1,
		}, []int32{2, 30, 2, 10, 20, 3, 1}},
		{"readiness failing at once", map[string]any{"readinessFailureThreshold": 1}, nil},
		{"no startup budget", map[string]any{"startupSeconds": 0}, nil},
		{"an unknown probe value", map[string]any{"startupTimeout": 300}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := base(tc.probes)
			out, err := renderChart(t, vals)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), "schema") {
					t.Fatalf("render: %v, want a schema error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			typed, _, _ := objects(t, out)
			c := find[*appsv1.StatefulSet](typed)[0].Spec.Template.Spec.Containers[0]
			s, r, l := c.StartupProbe, c.ReadinessProbe, c.LivenessProbe
			got := []int32{s.PeriodSeconds, s.FailureThreshold, r.PeriodSeconds, r.FailureThreshold, l.PeriodSeconds, l.FailureThreshold, s.TimeoutSeconds}
			if !slices.Equal(got, tc.want) {
				t.Errorf("probes (startup period, threshold, readiness period, threshold, liveness period, threshold, timeout) = %v, want %v", got, tc.want)
			}
			checkProbes(t, vals, c)
		})
	}
}
