package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// TestMeasureRSS100Sources is a measurement for docs/benchmarks.md, not a regular test: it builds the
// ingest binary, runs it with a sources file of 100 sources against 100 slow SSE endpoints (one event a
// second each) of one loopback test server, waits until /sources shows all 100 streaming and a few
// commit rounds have passed, and logs the process's VmRSS and VmHWM. It runs only with
// SSEGATE_MEASURE_RSS=1 (and KAFKA_BROKERS):
//
//	SSEGATE_MEASURE_RSS=1 pkg/kafkatest/with-services.sh --no-redis go test -count=1 -v -run MeasureRSS ./services/ingest/
func TestMeasureRSS100Sources(t *testing.T) {
	if os.Getenv("SSEGATE_MEASURE_RSS") != "1" {
		t.Skip("a measurement: set SSEGATE_MEASURE_RSS=1 to run it")
	}
	const n = 100
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.NewTopic(t, 1, nil)
	srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Every: time.Second}))

	dir := t.TempDir()
	bin := filepath.Join(dir, "ingest")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var cfg strings.Builder
	cfg.WriteString("checkpoint-topic: " + kafkatest.NewTopic(t, 1, map[string]*string{"cleanup.policy": ptr("compact")}) + "\nsources:\n")
	prefix := fmt.Sprintf("rss-%d-", time.Now().UnixNano())
	for i := range n {
		fmt.Fprintf(&cfg, "  - {name: %s%d, url: %s/s/%d, topic: %s, format: raw}\n", prefix, i, srv.URL, i, topic)
	}
	cfgPath := filepath.Join(dir, "sources.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := proctest.FreeAddr(t)
	logPath := filepath.Join(dir, "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.CommandContext(context.Background(), bin, "--config", cfgPath, "--listen", addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+strings.Join(brokers, ","))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("ingest log:\n%.8000s", b)
		}
	})

	began := time.Now()
	kafkatest.WaitFor(t, 45*time.Second, "all sources streaming", func() bool { return streaming(addr) == n })
	t.Logf("%d sources streaming %v after start", n, time.Since(began).Round(time.Millisecond))
	time.Sleep(5 * time.Second) // a measurement settling, not a synchronization: let ~50 commit rounds pass
	if got := streaming(addr); got != n {
		t.Fatalf("%d sources streaming after settling, want %d", got, n)
	}
	rss, hwm := proctest.Status(t, cmd.Process.Pid, "VmRSS"), proctest.Status(t, cmd.Process.Pid, "VmHWM")
	t.Logf("ingest with %d streaming sources: VmRSS %s, VmHWM %s", n, rss, hwm)
}

func ptr(s string) *string { return &s }

// streaming returns how many sources /sources at addr shows streaming, or -1 when it cannot be read.
func streaming(addr string) int {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+"/sources", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Sources []struct {
			State string `json:"state"`
		} `json:"sources"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return -1
	}
	n := 0
	for _, s := range body.Sources {
		if s.State == "streaming" {
			n++
		}
	}
	return n
}
