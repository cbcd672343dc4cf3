package main

import (
	"context"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// TestMeasureRSS8Topics is a measurement for docs/benchmarks.md, not a regular test: it fills 8 one-partition
// topics with 16000 records of 4 KiB of random base64 text each (64 MB a topic), builds the gateway binary and
// runs it on them with rings per topic (ring-bytes) and with one ring-budget for the 8, with and without the
// GOMEMLIMIT the chart derives, each time reading them all through its prefill (20000), and logs the process's
// VmRSS and VmHWM once it is ready, and what /metrics says the rings hold. It runs only with SSEGATE_MEASURE_RSS=1 (and KAFKA_BROKERS):
//
//	SSEGATE_MEASURE_RSS=1 pkg/kafkatest/with-services.sh --no-redis go test -count=1 -v -run MeasureRSS ./services/gateway/
func TestMeasureRSS8Topics(t *testing.T) {
	if os.Getenv("SSEGATE_MEASURE_RSS") != "1" {
		t.Skip("a measurement: set SSEGATE_MEASURE_RSS=1 to run it")
	}
	const topics, records, size = 8, 16000, 4 << 10
	brokers := kafkatest.Brokers(t)
	cl := kafkatest.Client(t, kgo.ProducerBatchMaxBytes(1<<20))
	var names []string
	// Random text, so that the producer's compression does not shrink it much: a fetch of highly compressible
	// records decompresses to many times its size (see docs/benchmarks.md).
	rnd := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // test data
	raw := make([]byte, size*3/4)
	for range topics {
		name := kafkatest.NewTopic(t, 1, nil)
		names = append(names, name)
		recs := make([]*kgo.Record, records)
		for i := range recs {
			for j := range raw {
				raw[j] = byte(rnd.Uint32())
			}
			recs[i] = &kgo.Record{Topic: name, Key: []byte(strconv.Itoa(i)), Value: []byte(base64.StdEncoding.EncodeToString(raw))}
		}
		kafkatest.Produce(t, cl, recs...)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// GOMEMLIMIT as the chart sets it with its defaults: 90% of (rings + 10000 x 4KiB + 128MiB) / 0.9, rounded
	// up to a MiB: for 64MiB of rings a limit of 257Mi, for 512MiB one of 755Mi.
	const chart64, chart512 = "GOMEMLIMIT=242535628", "GOMEMLIMIT=712507392"
	for _, run := range []struct{ name, env, goMem string }{
		{"ring-bytes 64MiB per topic (the default)", "SSEGATE_RING_BYTES=64MiB", ""},
		{"ring-bytes 64MiB per topic, GOMEMLIMIT of the chart for 512MiB", "SSEGATE_RING_BYTES=64MiB", chart512},
		{"ring-budget 512MiB, GOMEMLIMIT of the chart", "SSEGATE_RING_BUDGET=512MiB", chart512},
		{"ring-bytes 8MiB per topic", "SSEGATE_RING_BYTES=8MiB", ""},
		{"ring-budget 64MiB", "SSEGATE_RING_BUDGET=64MiB", ""},
		{"ring-budget 64MiB, GOMEMLIMIT of the chart", "SSEGATE_RING_BUDGET=64MiB", chart64},
	} {
		admin := proctest.FreeAddr(t)
		cmd := exec.CommandContext(context.Background(), bin, "--listen", proctest.FreeAddr(t), "--admin-listen", admin, "--log-level", "warn")
		cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+strings.Join(brokers, ","), "SSEGATE_TOPICS="+strings.Join(names, ","), "SSEGATE_PREFILL=20000", run.env)
		if run.goMem != "" {
			cmd.Env = append(cmd.Env, run.goMem)
		}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		kafkatest.WaitFor(t, 2*time.Minute, "the gateway to be ready", func() bool { return strings.Contains(get(admin, "/readyz"), `"ready":true`) })
		ready := time.Since(began)
		time.Sleep(3 * time.Second) // a measurement settling, not a synchronization
		metrics := get(admin, "/metrics")
		rss, hwm := proctest.Status(t, cmd.Process.Pid, "VmRSS"), proctest.Status(t, cmd.Process.Pid, "VmHWM")
		t.Logf("%s: ready in %v; VmRSS %s, VmHWM %s; rings: memory %.1f MiB, frame bytes %.1f MiB, frames %.0f, capacity %.1f MiB",
			run.name, ready.Round(100*time.Millisecond), rss, hwm, sum(metrics, "ssegate_ring_memory_bytes")/(1<<20),
			sum(metrics, "ssegate_ring_bytes")/(1<<20), sum(metrics, "ssegate_ring_frames"), sum(metrics, "ssegate_ring_capacity_bytes")/(1<<20))
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// get returns the body of an admin path, or "" when it cannot be read.
func get(addr, path string) string {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// sum adds up every series of a metric in a Prometheus text exposition.
func sum(body, metric string) float64 {
	var total float64
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, metric+"{"); ok {
			if i := strings.LastIndexByte(rest, ' '); i >= 0 {
				v, _ := strconv.ParseFloat(strings.TrimSpace(rest[i+1:]), 64)
				total += v
			}
		}
	}
	return total
}
