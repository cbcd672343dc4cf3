package main

import (
	"strings"
	"testing"
)

// TestRender: the chart renders with --set values and a namespace, without its test pod and notes; a value
// the schema refuses is an error.
func TestRender(t *testing.T) {
	var out strings.Builder
	err := run([]string{"-chart", "../ssegate", "-namespace", "events", "-set", "kafka.brokers={k:9092}", "-set", "gateway.topics={orders}"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"kind: StatefulSet", "ssegate-gateway.events.svc", `topics: "orders"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendering lacks %q", want)
		}
	}
	for _, dont := range []string{"NOTES.txt", "/templates/tests/"} {
		if strings.Contains(text, dont) {
			t.Errorf("the rendering has %q", dont)
		}
	}
	if err := run([]string{"-chart", "../ssegate", "-set", "kafka.brokers={k:9092}", "-set", "gateway.topics={orders}", "-set", "gateway.replicas=lots"}, &out); err == nil {
		t.Error("a value the schema refuses rendered")
	}
}
