package app

import (
	"strings"
	"testing"
)

// TestChartNotes: after an install the chart says how to reach a stream (a port-forward to the client
// Service and a curl of a served topic, and the in-cluster URL), and reminds a user still on the default
// image repository to push the images and set it; a user with a registry of their own is not told.
func TestChartNotes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vals     map[string]any
		want     []string
		dontWant []string
	}{
		{
			name: "defaults",
			vals: map[string]any{"gateway": map[string]any{"topics": []any{"orders"}}},
			want: []string{
				"kubectl -n events port-forward svc/sse-ssegate-gateway 8080:80",
				"curl -N http://127.0.0.1:8080/streams/orders",
				"http://sse-ssegate-gateway.events.svc:80/streams/<topic>",
				"set image.gateway.repository and image.ingest.repository",
			},
		},
		{
			name: "own registry",
			vals: map[string]any{
				"gateway": map[string]any{"topics": []any{"orders"}},
				"image":   map[string]any{"gateway": map[string]any{"repository": "registry.example.com/ssegate/gateway"}},
			},
			want:     []string{"registry.example.com/ssegate/gateway:"},
			dontWant: []string{"set image.gateway.repository"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.vals["kafka"] = map[string]any{"brokers": []any{"k:9092"}}
			out, err := renderChart(t, tc.vals)
			if err != nil {
				t.Fatal(err)
			}
			notes := out["ssegate/templates/NOTES.txt"]
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("the notes lack %q:\n%s", w, notes)
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(notes, w) {
					t.Errorf("the notes say %q:\n%s", w, notes)
				}
			}
		})
	}
}
