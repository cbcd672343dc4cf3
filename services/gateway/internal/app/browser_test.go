package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	dir, _ = filepath.Abs(filepath.Join("..", "..", "..", "..", "pkg", "browsertest"))
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

// TestDashboardDecodesValues: binary values, values with a CR and text that looks like the marker reach
// the dashboard base64-marked and decode in the page to the exact bytes Kafka holds; text values arrive as
// they are. The page's table shows the decoded values.
func TestDashboardDecodesValues(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, nil) // value-format auto, the default
	g.waitReady(t)

	binary := make([]byte, 300)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range binary {
		binary[i] = byte(rng.UintN(256))
	}
	binary[0], binary[1], binary[2] = 0, 0xff, '\r' // a NUL and bytes that are never UTF-8, whatever the seed
	recs := []struct {
		rec     *kgo.Record
		encoded bool
		shown   string // a substring of the table cell; empty means not checked
	}{
		{&kgo.Record{Key: []byte("k1"), Value: []byte(`{"seq":1}`)}, false, `{"seq":1}`},
		{&kgo.Record{Key: []byte("k2"), Value: []byte("one\rtwo")}, true, `one\rtwo`},
		{&kgo.Record{Key: []byte("k3"), Value: binary}, true, "00 ff 0d "},
		{&kgo.Record{Key: []byte("k4"), Value: []byte("base64:aGk=")}, true, "base64:aGk="},
		{&kgo.Record{Key: []byte("k5"), Value: []byte("caf\xe9 \x00")}, true, "63 61 66 e9 20 00"},
		{&kgo.Record{Key: []byte("k6"), Value: []byte("first\nsecond\n")}, false, "first\nsecond\n"},
		{&kgo.Record{Key: []byte("k7"), Value: []byte{}}, false, ""},
		{&kgo.Record{Key: []byte("\x00\xffk8"), Value: nil}, true, "00 ff 6b"},
		{&kgo.Record{Key: []byte("k9"), Value: []byte("a\r\nb"), Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("order.paid")}}}, true, `a\r`},
	}
	page := openDashboard(t, g.url+"/", len(recs), 60*time.Second)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for _, r := range recs {
		kafkatest.Produce(t, cl, r.rec)
	}

	rep := page.fullReport(t)
	if len(rep.Events) != len(recs) || len(rep.Shown) != len(recs) {
		t.Fatalf("the page saw %d events and shows %d, want %d", len(rep.Events), len(rep.Shown), len(recs))
	}
	for i, r := range recs {
		ev, want := rep.Events[i], r.rec.Value
		if r.rec.Value == nil {
			want = r.rec.Key
		}
		got, err := hex.DecodeString(ev.Value)
		if err != nil {
			t.Fatalf("event %d: value %q: %v", i, ev.Value, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("event %d (type %s, data %.60q): the page decoded %q, Kafka holds %q", i, ev.Type, ev.Data, got, want)
		}
		if ev.Encoded != r.encoded || strings.HasPrefix(ev.Data, "base64:") != r.encoded {
			t.Errorf("event %d: data %.60q, decoded as base64 %t; want base64 %t", i, ev.Data, ev.Encoded, r.encoded)
		}
		if cell := rep.Shown[len(recs)-1-i]; !strings.Contains(cell, r.shown) {
			t.Errorf("event %d: the table shows %q, want it to contain %q", i, cell, r.shown)
		}
	}
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
	_, lines := startDriver(t, timeout+30*time.Second, []string{"SCREENSHOT=" + filepath.Join(t.TempDir(), "dashboard.png")},
		"dashboard.mjs", url, fmt.Sprint(n), fmt.Sprint(timeout.Milliseconds()))
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("the page did not connect: %q %v", lines.Text(), lines.Err())
	}
	return &dashboardPage{lines: lines}
}

// pageEvent is an event as the dashboard saw it: Value is the record value (a tombstone's key) the page
// decoded from the data, in hex, and Encoded says the data was base64-marked.
type pageEvent struct {
	Type, ID, Data, Value string
	Encoded               bool
}

// pageReport is what the page driver reports: how often the EventSource opened, the events, and the text of
// the event table's data cells, newest first.
type pageReport struct {
	Opens  int
	Events []pageEvent
	Shown  []string
}

// report returns how often the page's EventSource opened and the events it received.
func (d *dashboardPage) report(t *testing.T) (opens int, evs []sse.Event) {
	t.Helper()
	r := d.fullReport(t)
	evs = make([]sse.Event, len(r.Events))
	for i, e := range r.Events {
		evs[i] = sse.Event{Type: e.Type, ID: e.ID, Data: e.Data}
	}
	return r.Opens, evs
}

// fullReport waits for the page's report.
func (d *dashboardPage) fullReport(t *testing.T) pageReport {
	t.Helper()
	if !d.lines.Scan() {
		t.Fatalf("no report from the page: %v", d.lines.Err())
	}
	var r pageReport
	if err := json.Unmarshal(d.lines.Bytes(), &r); err != nil {
		t.Fatalf("page report: %v", err)
	}
	return r
}

// startDriver runs a page driver of pkg/browsertest (script, with args) under node for at most timeout, with
// Debian's Chromium and env added to the environment; its stderr goes to the test's output. It returns the
// driver's stdin and its stdout, line by line; the driver is waited for when the test ends (close stdin first
// for one that reads it).
func startDriver(t *testing.T, timeout time.Duration, env []string, script string, args ...string) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	node, chromium, dir := browserTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CHROMIUM="+chromium), env...)
	cmd.Stderr = t.Output()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 16<<20)
	return in, lines
}
