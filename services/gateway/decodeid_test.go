package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
)

func TestDecodeID(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		out, errText string
		status       int
	}{
		{"one id", []string{"v1:0-41.2-17"}, "partition 0 offset 41\npartition 2 offset 17\n", "", 0},
		{"empty id", []string{"v1:"}, "no partition: the client has seen nothing yet\n", "", 0},
		{"two ids", []string{"v1:0-1", "v1:1-2"}, "v1:0-1\npartition 0 offset 1\nv1:1-2\npartition 1 offset 2\n", "", 0},
		{"malformed", []string{"hello"}, "", `invalid id "hello": position: malformed id`, 1},
		{"no id", nil, "", "usage:", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			status := decodeID(tc.args, &out, &errOut)
			if status != tc.status || out.String() != tc.out || !strings.Contains(errOut.String(), tc.errText) {
				t.Errorf("decodeID(%q) = %d, out %q, err %q", tc.args, status, out.String(), errOut.String())
			}
		})
	}
}

// TestDecodeCompactID: a v2 id is resolved through its checkpoint in Kafka and printed like its v1 equivalent.
func TestDecodeCompactID(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	pt := kafkatest.NewTopic(t, 1, nil)
	w, err := checkpoint.NewWriter(pt, "pod-0", nil, kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	base := position.MustParse("v1:0-10.3-7")
	type acked struct {
		ref position.Ref
		err error
	}
	done := make(chan acked, 1)
	w.Write("orders", [16]byte{1}, base, func(ref position.Ref, err error) { done <- acked{ref, err} })
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	id, ok := position.AppendCompact(nil, a.ref, base, position.MustParse("v1:0-10.2-4.3-9"), 64)
	if !ok {
		t.Fatal("AppendCompact refused")
	}
	var out, errOut bytes.Buffer
	status := decodeID([]string{"--kafka-brokers=" + strings.Join(brokers, ","), "--position-topic=" + pt, string(id)}, &out, &errOut)
	want := "partition 0 offset 10\npartition 2 offset 4\npartition 3 offset 9\n"
	if status != 0 || out.String() != want || !strings.Contains(errOut.String(), "= v1:0-10.2-4.3-9 (checkpoint") {
		t.Fatalf("decodeID = %d, out %q, err %q; want %q", status, out.String(), errOut.String(), want)
	}
	// A garbled one names no record.
	out.Reset()
	errOut.Reset()
	status = decodeID([]string{"--kafka-brokers=" + strings.Join(brokers, ","), "--position-topic=" + pt, "v2:AGQ"}, &out, &errOut)
	if status != 1 || !strings.Contains(errOut.String(), "invalid compact id") {
		t.Fatalf("garbled: decodeID = %d, out %q, err %q", status, out.String(), errOut.String())
	}
}
