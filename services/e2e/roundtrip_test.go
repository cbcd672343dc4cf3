// Package e2e holds end-to-end tests that run the ssegate binaries as subprocesses against a real Kafka.
// Without KAFKA_BROKERS they are skipped (and fail under CI=true), like every Kafka test.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// value is what the test writes to topic A: its key and its sequence number within the key, so that
// order per key can be checked on the far side, where the gateway's frames no longer carry the key.
type value struct {
	K string `json:"k"`
	N int    `json:"n"`
}

// TestRoundTripThroughGatewayAndIngest: topic A -> gateway SSE stream -> ingest -> topic B. Every value
// of A must land in B exactly once, in A's order per key, although ingest is killed (SIGKILL, its
// transaction left open) mid-way and restarted, resuming from the gateway position id it checkpointed.
func TestRoundTripThroughGatewayAndIngest(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	const (
		keys  = 8
		total = 800
	)
	bin := buildBinaries(t)
	topicA := kafkatest.NewTopic(t, 3, nil)
	topicB := kafkatest.NewTopic(t, 3, nil)
	cpTopic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), cpTopic) })

	gwAddr, gwAdmin := proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "gateway", filepath.Join(bin, "gateway"), brokers,
		"--topics", topicA, "--listen", gwAddr, "--admin-listen", gwAdmin, "--retry", "200ms", "--prefill", "0")
	waitReady(t, "gateway", "http://"+gwAdmin+"/readyz")

	// Unique source name: the transactional id ssegate-ingest-<name> must not collide on a shared broker.
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	cfg := filepath.Join(t.TempDir(), "sources.yaml")
	writeFile(t, cfg, fmt.Sprintf(`commit-interval: 50ms
sources:
  - name: roundtrip-%x
    url: http://%s/streams/%s?from=earliest
    topic: %s
    format: raw
    key: json:k
`, rnd, gwAddr, topicA, topicB))
	ingestArgs := func(listen string) []string {
		return []string{"--config", cfg, "--listen", listen, "--checkpoint-topic", cpTopic, "--backoff-min", "100ms"}
	}

	// Produce A in the background at a steady pace, in order per key (idempotent producer: per-partition
	// order is kept across retries).
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topicA))
	produced := make(chan struct{})
	var produceErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); wg.Wait() })
	var sent [keys]int
	var producedN atomic.Int64
	wg.Go(func() {
		defer close(produced)
		for i := range total {
			k := i % keys
			sent[k]++
			v, _ := json.Marshal(value{K: "k" + strconv.Itoa(k), N: sent[k]})
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k" + strconv.Itoa(k)), Value: v}).FirstErr(); err != nil {
				produceErr = err
				return
			}
			producedN.Add(1)
			if i%20 == 19 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(30 * time.Millisecond):
				}
			}
		}
	})

	ingest := startProcess(t, "ingest", filepath.Join(bin, "ingest"), brokers, ingestArgs(proctest.FreeAddr(t))...)
	// Kill ingest once some events went through, while A is still being written.
	poll(t, 60*time.Second, "ingest to commit some records to B", func() bool { return countAll(t, topicB) >= 150 })
	ingest.kill(t)
	t.Logf("ingest killed with %d records in B, %d of %d written to A", countAll(t, topicB), producedN.Load(), total)
	restartAddr := proctest.FreeAddr(t)
	startProcess(t, "ingest (restarted)", filepath.Join(bin, "ingest"), brokers, ingestArgs(restartAddr)...)

	select {
	case <-produced:
	case <-time.After(90 * time.Second):
		t.Fatal("producing A did not finish")
	}
	if produceErr != nil {
		t.Fatalf("produce to A: %v", produceErr)
	}
	poll(t, 90*time.Second, "every record in B", func() bool { return countAll(t, topicB) >= total })

	// The restarted ingest resumed from a gateway position id (v1:...) it had checkpointed.
	resp, err := http.Get("http://" + restartAddr + "/sources")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Sources []struct {
			State  string
			LastID string `json:"last_id"`
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	_ = resp.Body.Close()
	if err != nil || len(st.Sources) != 1 || !strings.HasPrefix(st.Sources[0].LastID, "v1:") {
		t.Errorf("/sources of the restarted ingest: %+v (%v), want a v1: last id", st, err)
	}

	// Check B: every value of A once, and per key in A's order (B is keyed by json:k, so a key's records
	// share a partition, read in offset order).
	got := map[string][]int{}
	seen := map[string]bool{}
	n := 0
	for p, recs := range kafkatest.ReadAll(t, topicB) {
		for _, r := range recs {
			n++
			var v value
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("B partition %d offset %d: value %q: %v", p, r.Offset, r.Value, err)
			}
			if string(r.Key) != v.K {
				t.Errorf("B partition %d offset %d: key %q, value of key %q", p, r.Offset, r.Key, v.K)
			}
			if seen[string(r.Value)] {
				t.Errorf("B holds %s twice", r.Value)
			}
			seen[string(r.Value)] = true
			got[v.K] = append(got[v.K], v.N)
		}
	}
	if n != total {
		t.Errorf("B holds %d records, want %d", n, total)
	}
	for k := range keys {
		key := "k" + strconv.Itoa(k)
		ns := got[key]
		if len(ns) != sent[k] {
			t.Errorf("key %s: %d values in B, want %d", key, len(ns), sent[k])
		}
		for i, v := range ns {
			if v != i+1 {
				t.Fatalf("key %s: value %d is n=%d, want n=%d (order per key broken, or a gap)", key, i, v, i+1)
			}
		}
	}
}

// poll checks cond every 250ms (each check reads a topic through new Kafka clients) until it holds, and
// fails t after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// countAll returns how many committed records topic holds.
func countAll(t *testing.T, topic string) int {
	t.Helper()
	n := 0
	for _, recs := range kafkatest.ReadAll(t, topic) {
		n += len(recs)
	}
	return n
}

// buildBinaries builds the gateway and ingest commands into a temporary directory (the build cache makes
// later runs cheap) and returns it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binaries: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", dir+string(filepath.Separator), "./services/gateway", "./services/ingest")
	cmd.Dir = filepath.Join("..", "..") // the module root, from services/e2e
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// process is a running subprocess, killed when the test ends.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// startProcess runs path with args and a clean environment holding only KAFKA_BROKERS of the
// ssegate settings; its stderr goes to a file that is printed when the test fails.
func startProcess(t *testing.T, name, path, brokers string, args ...string) *process {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), path, args...)
	cmd.Env = append(cleanEnv(), "KAFKA_BROKERS="+brokers)
	return startCmd(t, name, cmd)
}

// startCmd starts cmd, whose stdout and stderr go to a file that is printed when the test fails, and kills it
// when the test ends.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- %s log (tail) ---\n%s", name, b)
		}
	})
	return p
}

// kill sends SIGKILL (a crash: nothing is committed, aborted or closed) and waits for the exit.
func (p *process) kill(t *testing.T) {
	t.Helper()
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not exit after SIGKILL", p.name)
		}
	})
}

// cleanEnv is the test's environment without the settings of the services (SSEGATE_*, KAFKA_*,
// REDIS_ADDR), so that only the flags given here apply.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SSEGATE_") || strings.HasPrefix(kv, "KAFKA_") || strings.HasPrefix(kv, "REDIS_ADDR=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func waitReady(t *testing.T, name, url string) {
	t.Helper()
	kafkatest.WaitFor(t, 60*time.Second, name+" to be ready", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
