package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
)

func noEnv(string) string { return "" }

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
		{
			"several topics",
			[]string{"v1:payments~0-18,orders~0-5813.1-5790,refunds~"},
			"topic payments partition 0 offset 18\ntopic orders partition 0 offset 5813\ntopic orders partition 1 offset 5790\n" +
				"topic refunds no partition: the client has seen nothing yet\n", "", 0,
		},
		{"several topics, malformed", []string{"v1:b~0-1,b~0-2"}, "", "malformed topic list", 1},
		{"no id", nil, "", "usage:", 2},
		{"unknown flag", []string{"--kafka-nope=1", "v1:0-1"}, "", "usage:", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			status := decodeID(tc.args, noEnv, &out, &errOut)
			if status != tc.status || out.String() != tc.out || !strings.Contains(errOut.String(), tc.errText) {
				t.Errorf("decodeID(%q) = %d, out %q, err %q", tc.args, status, out.String(), errOut.String())
			}
		})
	}
}

// compactID writes a checkpoint of v1:0-10.3-7 into a new position topic and returns the topic and a v2 id
// on it that stands for v1:0-10.2-4.3-9.
func compactID(t *testing.T) (topic, id string) {
	t.Helper()
	pt := kafkatest.NewTopic(t, 1, nil)
	w, err := checkpoint.NewWriter(pt, "pod-0", nil, kgo.SeedBrokers(kafkatest.Brokers(t)...))
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
	b, ok := position.AppendCompact(nil, a.ref, base, position.MustParse("v1:0-10.2-4.3-9"), 64)
	if !ok {
		t.Fatal("AppendCompact refused")
	}
	return pt, string(b)
}

// TestDecodeCompactID: a v2 id is resolved through its checkpoint in Kafka and printed like its v1 equivalent.
func TestDecodeCompactID(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	pt, id := compactID(t)
	var out, errOut bytes.Buffer
	status := decodeID([]string{"--kafka-brokers=" + strings.Join(brokers, ","), "--position-topic=" + pt, id}, noEnv, &out, &errOut)
	want := "partition 0 offset 10\npartition 2 offset 4\npartition 3 offset 9\n"
	if status != 0 || out.String() != want || !strings.Contains(errOut.String(), "= v1:0-10.2-4.3-9 (checkpoint") {
		t.Fatalf("decodeID = %d, out %q, err %q; want %q", status, out.String(), errOut.String(), want)
	}
	// A stream of several topics: its compact part resolved the same way, the other part as it is.
	out.Reset()
	errOut.Reset()
	multi := "v2:orders~:" + strings.TrimPrefix(id, position.PrefixCompact) + ",payments~0-3"
	status = decodeID([]string{"--kafka-brokers=" + strings.Join(brokers, ","), "--position-topic=" + pt, multi}, noEnv, &out, &errOut)
	want = "topic orders partition 0 offset 10\ntopic orders partition 2 offset 4\ntopic orders partition 3 offset 9\ntopic payments partition 0 offset 3\n"
	if status != 0 || out.String() != want {
		t.Fatalf("several topics: decodeID = %d, out %q, err %q; want %q", status, out.String(), errOut.String(), want)
	}
	// A garbled one names no record.
	out.Reset()
	errOut.Reset()
	status = decodeID([]string{"--kafka-brokers=" + strings.Join(brokers, ","), "--position-topic=" + pt, "v2:AGQ"}, noEnv, &out, &errOut)
	if status != 1 || !strings.Contains(errOut.String(), "invalid compact id") {
		t.Fatalf("garbled: decodeID = %d, out %q, err %q", status, out.String(), errOut.String())
	}
}

// TestDecodeIDGatewayConfig: decode-id connects as the gateway does, from the gateway's own config file (its
// other settings ignored) and environment: here through SASL OAUTHBEARER, with the client secret from the
// environment. Without the secret it says what is missing and exits 2.
func TestDecodeIDGatewayConfig(t *testing.T) {
	pt, id := compactID(t)
	ts := kafkatest.NewTokenServer(t, time.Minute, false)
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := fmt.Sprintf("topics: [orders]\nring-bytes: 1MiB\nid-format: v2\nposition-topic: %s\nkafka-brokers: %s\n"+
		"kafka-sasl-mechanism: OAUTHBEARER\nkafka-sasl-allow-plaintext: true\nkafka-sasl-oauth-token-url: %s\nkafka-sasl-oauth-client-id: %s\n",
		pt, strings.Join(kafkatest.SASLBrokers(t), ","), ts.URL, ts.ClientID)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "SSEGATE_KAFKA_SASL_OAUTH_CLIENT_SECRET" {
			return ts.ClientSecret
		}
		return ""
	}
	var out, errOut bytes.Buffer
	status := decodeID([]string{"--config=" + cfg, id}, env, &out, &errOut)
	if want := "partition 0 offset 10\npartition 2 offset 4\npartition 3 offset 9\n"; status != 0 || out.String() != want {
		t.Fatalf("decodeID = %d, out %q, err %q; want %q", status, out.String(), errOut.String(), want)
	}
	if ts.Issued.Load() == 0 {
		t.Error("no token was asked for: the checkpoint was not read through OAUTHBEARER")
	}
	out.Reset()
	errOut.Reset()
	status = decodeID([]string{"--config=" + cfg, id}, noEnv, &out, &errOut)
	if status != 2 || !strings.Contains(errOut.String(), "kafka-sasl-oauth-client-secret") {
		t.Fatalf("without the secret: decodeID = %d, out %q, err %q", status, out.String(), errOut.String())
	}
}
