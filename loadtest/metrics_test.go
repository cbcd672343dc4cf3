package main

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	const text = `# HELP ssegate_resumes_total Resumes
# TYPE ssegate_resumes_total counter
ssegate_resumes_total{source="kafka",topic="loadtest"} 7
ssegate_resumes_total{source="ring",topic="loadtest"} 93
ssegate_resumes_total{source="ring",topic="other"} 1000
ssegate_replay_reads_total 3
ssegate_connections_closed_total{reason="write_failed",topic="loadtest"} 2 1700000000000
ssegate_connections_open{topic="loadtest"} 100
go_gc_duration_seconds{quantile="0.5"} 1.5e-05
go_memstats_heap_inuse_bytes 4.194304e+06
go_memstats_stack_inuse_bytes 655360
go_goroutines 42
ssegate_checkpoint_writes_total{result="acked",topic="loadtest"} 10
ssegate_checkpoint_writes_total{result="failed",topic="loadtest"} 1
ssegate_checkpoint_ack_seconds_total{topic="loadtest"} 0.05
broken line
`
	ss, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := countersOf(ss, "loadtest")
	want := gatewayCounters{
		ReplayReads: 3, ResumesRing: 93, ResumesKafka: 7, ClosedWrite: 2, ConnectionsNow: 100,
		HeapInuse: 4 << 20, StackInuse: 640 << 10, Goroutines: 42, CheckpointsAcked: 10, CheckpointAckSeconds: 0.05,
	}
	if got != want {
		t.Fatalf("counters = %+v, want %+v", got, want)
	}
	// Two gateways' counters add up field by field; a difference keeps the gauge of open connections as now.
	two := got
	two.add(got)
	if two.ResumesRing != 186 || two.CheckpointsAcked != 20 || two.ConnectionsNow != 200 {
		t.Fatalf("added = %+v", two)
	}
	if d := two.sub(got); d != (gatewayCounters{
		ReplayReads: 3, ResumesRing: 93, ResumesKafka: 7, ClosedWrite: 2, ConnectionsNow: 200,
		HeapInuse: 4 << 20, StackInuse: 640 << 10, Goroutines: 42, CheckpointsAcked: 10, CheckpointAckSeconds: 0.05,
	}) {
		t.Fatalf("difference = %+v", d)
	}
	if v := sumMetric(ss, "go_gc_duration_seconds", nil); v != 1.5e-05 {
		t.Fatalf("float value = %v", v)
	}
}
