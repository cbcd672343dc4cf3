package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// browserTools returns node, the Chromium binary and the browser test folder, or skips the test (fails it
// under CI=true) when one is missing.
func browserTools(t *testing.T) (node, chromium, dir string) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: under CI the browser tests must run (make test installs their npm packages; .ci/run installs chromium)", what)
		}
		t.Skip(what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("no Chromium at " + chromium + " (Debian: apt-get install chromium)")
	}
	dir, _ = filepath.Abs(filepath.Join("..", "..", "..", "..", "tests", "browser"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		missing("playwright-core is not installed in " + dir + " (run npm ci there, or make test)")
	}
	return node, chromium, dir
}

// TestDashboardInBrowser opens the dashboard in headless Chromium; the page's EventSource must receive every
// record produced after it connected, in order, with exact ids.
func TestDashboardInBrowser(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)

	const n = 60
	page := openDashboard(t, g.url+"/", n, 60*time.Second)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	types := []string{"", "order.created", "order.paid", "order.shipped"}
	var recs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "o-%d", i%7), Value: fmt.Appendf(nil, `{"seq":%d}`, i)}
		if ty := types[i%len(types)]; ty != "" {
			r.Headers = []kgo.RecordHeader{{Key: "event", Value: []byte(ty)}}
		}
		recs = append(recs, r)
	}
	kafkatest.Produce(t, cl, recs...)
	records := byOffset(kafkatest.ReadAll(t, topic))

	opens, evs := page.report(t)
	if opens != 1 {
		t.Errorf("the EventSource opened %d times, want 1", opens)
	}
	if len(evs) != n {
		t.Fatalf("the page saw %d events, want %d", len(evs), n)
	}
	// The topic was empty when the gateway started, so the page started at the empty position.
	checkEvents(t, "v1:", evs, records)
}

// TestBrowserResumesAcrossRestart: the gateway is restarted under an open dashboard; the page's EventSource
// reconnects by itself with Last-Event-ID, and the page ends up with every record exactly once, in order,
// including the ones produced while no gateway was running.
func TestBrowserResumesAcrossRestart(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	onPort := func(c *Config) { c.Listen = addr; c.Retry = 300 * time.Millisecond; c.Drain = 0 }
	g1 := startGateway(t, []string{topic}, onPort)
	g1.waitReady(t)

	const n = 90
	page := openDashboard(t, g1.url+"/", n, 90*time.Second)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produce := func(from int) {
		for i := from; i < from+30; i++ {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "o-%d", i%5), Value: fmt.Appendf(nil, `{"seq":%d}`, i)})
		}
	}
	produce(0)
	kafkatest.WaitFor(t, 30*time.Second, "the page to get the first 30 events", func() bool {
		return metricValue(t, g1, "ssegate_frames_written_total", `topic="`+topic+`"`) >= 30
	})
	g1.stop()
	if err := <-g1.done; err != nil {
		t.Fatalf("first gateway: %v", err)
	}
	g1.done <- nil
	produce(30) // while no gateway runs
	g2 := startGateway(t, []string{topic}, onPort)
	g2.waitReady(t)
	produce(60)

	opens, evs := page.report(t)
	if opens < 2 {
		t.Errorf("the EventSource opened %d times, want a reconnect", opens)
	}
	if len(evs) != n {
		t.Fatalf("the page saw %d events, want %d", len(evs), n)
	}
	checkEvents(t, "v1:", evs, byOffset(kafkatest.ReadAll(t, topic)))
	if v := metricValue(t, g2, "ssegate_resumes_total", `topic="`+topic+`"`, `source="ring"`) +
		metricValue(t, g2, "ssegate_resumes_total", `topic="`+topic+`"`, `source="kafka"`); v < 1 {
		t.Errorf("the second gateway served no resume")
	}
}

// dashboardPage runs the page driver on the dashboard at url until the page has n events. It returns once the
// page's EventSource is open; report then waits for the page's account of what it received.
type dashboardPage struct {
	lines *bufio.Scanner
}

func openDashboard(t *testing.T, url string, n int, timeout time.Duration) *dashboardPage {
	t.Helper()
	node, chromium, dir := browserTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout+30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, node, "dashboard.mjs", url, fmt.Sprint(n), fmt.Sprint(timeout.Milliseconds()))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium, "SCREENSHOT="+filepath.Join(t.TempDir(), "dashboard.png"))
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 16<<20)
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("the page did not connect: %q %v", lines.Text(), lines.Err())
	}
	return &dashboardPage{lines: lines}
}

// report returns how often the page's EventSource opened and the events it received.
func (d *dashboardPage) report(t *testing.T) (opens int, evs []sse.Event) {
	t.Helper()
	if !d.lines.Scan() {
		t.Fatalf("no report from the page: %v", d.lines.Err())
	}
	var seen struct {
		Opens  int
		Events []struct{ Type, ID, Data string }
	}
	if err := json.Unmarshal(d.lines.Bytes(), &seen); err != nil {
		t.Fatalf("page report: %v", err)
	}
	evs = make([]sse.Event, len(seen.Events))
	for i, e := range seen.Events {
		evs[i] = sse.Event{Type: e.Type, ID: e.ID, Data: e.Data}
	}
	return seen.Opens, evs
}
