// Package runbooks runs the commands of the runbooks (docs/runbook.md and docs/runbooks/*.md) against a real
// Kafka, gateway and ingest, and checks that every metric the alerts, the Grafana dashboard and the runbooks'
// queries name is exported (by those, or by a second gateway with publishing and TLS on). Without KAFKA_BROKERS
// it is skipped (and fails under CI=true), like every Kafka test. The conventions of the pages are in
// docs/runbook.md, "How the pages are tested".
package runbooks

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/services/demo/orders"
)

const root = "../.."

// external are metrics the alerts read from other exporters.
var external = map[string]string{"kube_pod_status_ready": "kube-state-metrics"}

// TestRunbooks starts a gateway and an ingest on a fresh topic and runs every page: each ```sh block with bash,
// its output checked against the ```text expect block after it. Then it checks the metrics of the alerts, the
// dashboard and the pages' ```promql blocks against what the services export.
func TestRunbooks(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "kcat", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the runbooks need %s: %v", tool, err)
			}
			t.Skipf("the runbooks need %s: %v", tool, err)
		}
	}
	env := startStack(t)
	exporters := []string{env["ADMIN"] + "/metrics", env["INGEST"] + "/metrics", startPublishTLSGateway(t, env) + "/metrics"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "runbooks", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "docs", "runbook.md")}, pages...)
	var queries []query
	for _, page := range pages {
		blocks := readBlocks(t, page)
		for _, b := range blocks {
			if b.lang == "promql" {
				for i, line := range strings.Split(b.body, "\n") {
					if e := strings.TrimSpace(stripComment(line)); e != "" {
						queries = append(queries, query{fmt.Sprintf("%s:%d", rel(page), b.line+1+i), e})
					}
				}
			}
		}
		t.Run(strings.TrimSuffix(filepath.Base(page), ".md"), func(t *testing.T) { runPage(t, env, page, blocks) })
	}
	t.Run("metrics", func(t *testing.T) { checkMetrics(t, exporters, queries) })
}

// stack is what the pages' variables point at.
type stack map[string]string

func (s stack) environ(bin string) []string {
	out := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "LC_ALL=C"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); slices.Contains([]string{"HOME", "TMPDIR"}, k) {
			out = append(out, kv)
		}
	}
	for k, v := range s {
		out = append(out, k+"="+v)
	}
	return out
}

// startStack creates a 3-partition topic of keyed order events (partition 0 trimmed below offset 5, as
// retention would), starts the gateway on it, and an ingest whose source follows the gateway's own stream
// into a second topic, and returns the pages' variables.
func startStack(t *testing.T) stack {
	t.Helper()
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	bin := buildBinaries(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	sourceTopic := kafkatest.NewTopic(t, 1, nil)
	cpTopic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), cpTopic) })

	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	// The demo's order events (what `make run` shows), deterministic: 20 orders, each created, paid and
	// shipped, in that order.
	var recs []*kgo.Record
	sent := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for i := range 60 {
		recs = append(recs, orders.Order{
			ID: orders.Key(i%20 + 1), Status: orders.Statuses[i/20], Customer: orders.Customers[i%len(orders.Customers)],
			Amount: float64(1000+i) / 100, Seq: i + 1, SentAt: sent.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
		}.Record())
	}
	kafkatest.Produce(t, cl, recs...)
	// Trim partition 0 as retention would: a resume from its first offsets gets a retention resync.
	var trim kadm.Offsets
	trim.AddOffset(topic, 0, 5, -1)
	if res, err := kafkatest.Admin(t).DeleteRecords(kafkatest.Context(t), trim); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}

	gw, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "gateway", filepath.Join(bin, "gateway"), brokers,
		"--topics", topic+","+sourceTopic, "--listen", gw, "--admin-listen", admin, "--heartbeat", "1s")
	waitReady(t, "gateway", "http://"+admin+"/readyz")

	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	source := fmt.Sprintf("orders-copy-%x", rnd)
	cfg := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `commit-interval: 50ms
sources:
  - name: %s
    url: http://%s/streams/%s?from=earliest
    topic: %s
`, source, gw, topic, sourceTopic), 0o600); err != nil {
		t.Fatal(err)
	}
	ingest := proctest.FreeAddr(t)
	startProcess(t, "ingest", filepath.Join(bin, "ingest"), brokers,
		"--config", cfg, "--listen", ingest, "--checkpoint-topic", cpTopic)
	waitReady(t, "ingest", "http://"+ingest+"/readyz")
	end := openingID(t, "http://"+gw+"/streams/"+topic) // the gateway's position: the end of every partition
	var last []byte
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last /sources: %s", last)
		}
	})
	kafkatest.WaitFor(t, 60*time.Second, "ingest to copy the topic", func() bool {
		var st struct {
			Sources []struct {
				State  string
				LastID string `json:"last_id"`
			} `json:"sources"`
		}
		resp, err := http.Get("http://" + ingest + "/sources")
		if err != nil {
			return false
		}
		last, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || json.Unmarshal(last, &st) != nil || len(st.Sources) != 1 {
			return false
		}
		return st.Sources[0].State == "streaming" && st.Sources[0].LastID == end
	})
	return stack{
		"GATEWAY": "http://" + gw, "ADMIN": "http://" + admin, "INGEST": "http://" + ingest, "BROKERS": brokers,
		"TOPIC": topic, "SOURCE": source, "SOURCE_TOPIC": sourceTopic,
		"UPSTREAM": "http://" + gw + "/streams/" + topic + "?from=earliest", "CHECKPOINT_TOPIC": cpTopic, "BIN": bin,
	}
}

// openingID returns the id of a new stream's opening block: where the gateway is now in every partition.
func openingID(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			return id
		}
	}
	t.Fatalf("%s: no opening id (%v)", url, sc.Err())
	return ""
}

// block is a fenced block of a page.
type block struct {
	lang, info string
	body       string
	line       int // of the opening fence, 1-based
}

var fence = regexp.MustCompile("^ *```([a-z]*) ?(.*)$")

// readBlocks returns the fenced blocks of a page, in order (indented ones, in lists, too).
func readBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []block
	var cur *block
	var indent string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur == nil {
			if m := fence.FindStringSubmatch(line); m != nil {
				cur = &block{lang: m[1], info: strings.TrimSpace(m[2]), line: n}
				indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur.body += strings.TrimPrefix(line, indent) + "\n"
	}
	if cur != nil {
		t.Fatalf("%s:%d: block not closed", path, cur.line)
	}
	return out
}

// runPage runs the page's sh blocks in order in one working folder (files one block writes, later ones read),
// each in a new bash. A block must end with status 0 unless its expect block says `status N`; every line of
// its expect block is a regular expression that a line of the output (stdout and stderr) must match, each
// after the line the previous one matched.
func runPage(t *testing.T, env stack, page string, blocks []block) {
	dir := t.TempDir()
	ran := 0
	for i, b := range blocks {
		if b.lang != "sh" || b.info == "no-test" {
			if b.lang == "text" && b.info == "expect" && (i == 0 || blocks[i-1].lang != "sh" || blocks[i-1].info == "no-test") {
				t.Errorf("%s:%d: an expect block must follow a sh block", rel(page), b.line)
			}
			continue
		}
		ran++
		var expect []string
		status := 0
		if i+1 < len(blocks) && blocks[i+1].lang == "text" && blocks[i+1].info == "expect" {
			for _, l := range strings.Split(strings.TrimRight(blocks[i+1].body, "\n"), "\n") {
				if _, err := fmt.Sscanf(l, "status %d", &status); err == nil {
					continue
				}
				expect = append(expect, l)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", b.body)
		cmd.Dir, cmd.Env = dir, env.environ(env["BIN"])
		// Its own process group, killed after the block: nothing a block starts outlives it, and a background
		// process that keeps the output open cannot hold the test.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cancel()
		got := 0
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errorsAs(err, &exit):
			got = exit.ExitCode()
		default:
			t.Errorf("%s:%d: %v", rel(page), b.line, err)
			continue
		}
		lines := strings.Split(string(out), "\n")
		at := 0
		for _, e := range expect {
			re, err := regexp.Compile(e)
			if err != nil {
				t.Errorf("%s:%d: expect %q: %v", rel(page), b.line, e, err)
				break
			}
			for at < len(lines) && !re.MatchString(lines[at]) {
				at++
			}
			if at == len(lines) {
				t.Errorf("%s:%d: no line (after the ones matched before) matches %q; the block:\n%s\noutput:\n%s", rel(page), b.line, e, b.body, out)
				break
			}
			at++
		}
		if got != status {
			t.Errorf("%s:%d: status %d, want %d; the block:\n%s\noutput:\n%s", rel(page), b.line, got, status, b.body, out)
		}
	}
	t.Logf("%s: %d blocks run", rel(page), ran)
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError) //nolint:errorlint // exec returns it unwrapped
	if ok {
		*target = e
	}
	return ok
}

type query struct{ where, expr string }

// checkMetrics checks that each query (the pages' promql lines, every alert of k8s/monitoring/prometheus and every
// query of k8s/monitoring/grafana) lexes as PromQL and names only metrics one of the exporters' /metrics (the
// gateway, ingest, the publishing TLS gateway) has now (or a known other exporter's).
func checkMetrics(t *testing.T, exporters []string, queries []query) {
	exported := map[string]bool{}
	for _, url := range exporters {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			exported[promqlIdent.FindString(line)] = true
		}
	}

	rulesPath := filepath.Join(root, "k8s", "monitoring", "prometheus", "ssegate-rules.yaml")
	src, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string } `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(src, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			queries = append(queries, query{rel(rulesPath) + " " + r.Alert, r.Expr})
		}
	}
	boardPath := filepath.Join(root, "k8s", "monitoring", "grafana", "ssegate.json")
	src, err = os.ReadFile(boardPath)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(src, &board); err != nil {
		t.Fatal(err)
	}
	panels := 0
	for _, p := range board.Panels {
		for _, tg := range p.Targets {
			panels++
			queries = append(queries, query{rel(boardPath) + " panel " + p.Title, tg.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), *[a-z_]+\)$`)
	for _, v := range board.Templating.List {
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		if m := labelValues.FindStringSubmatch(s); m != nil {
			queries = append(queries, query{rel(boardPath) + " variable " + v.Name, m[1]})
		}
	}
	if len(rules.Groups) == 0 || panels == 0 {
		t.Fatalf("no alerts (%d groups) or no panel queries (%d)", len(rules.Groups), panels)
	}
	used := map[string]bool{}
	for _, q := range queries {
		names, err := promqlMetrics(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(names) == 0 && !strings.Contains(q.expr, "time()") {
			t.Errorf("%s: %s names no metric", q.where, q.expr)
		}
		for _, n := range names {
			used[n] = true
			if !exported[n] && external[n] == "" {
				t.Errorf("%s: %s is not exported by the gateway or ingest", q.where, n)
			}
		}
	}
	t.Logf("%d queries checked, naming %d metrics", len(queries), len(used))
}

// stripComment drops a PromQL comment (# to the end of the line, outside strings).
func stripComment(line string) string {
	in := byte(0)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case in != 0 && c == in:
			in = 0
		case in == 0 && (c == '"' || c == '\''):
			in = c
		case in == 0 && c == '#':
			return line[:i]
		}
	}
	return line
}

func rel(path string) string { return strings.TrimPrefix(filepath.ToSlash(path), root+"/") }

func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./services/gateway", "./services/ingest")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// startProcess runs path with args, KAFKA_BROKERS and no other ssegate setting from the environment; it is
// killed when the test ends, and its log printed if the test failed.
func startProcess(t *testing.T, name, path, brokers string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), path, args...)
	cmd.Env = []string{"KAFKA_BROKERS=" + brokers, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
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
