package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// pageDriver is a page in headless Chromium driven by pkg/browsertest/drive.mjs: each command is one JSON line,
// answered by one.
type pageDriver struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func drivePage(t *testing.T, url string) *pageDriver {
	t.Helper()
	in, out := startDriver(t, 3*time.Minute, nil, "drive.mjs", url)
	d := &pageDriver{in: in, out: out}
	d.answer(t, "load "+url)
	return d
}

func (d *pageDriver) answer(t *testing.T, what string) json.RawMessage {
	t.Helper()
	if !d.out.Scan() {
		t.Fatalf("%s: the page driver ended: %v", what, d.out.Err())
	}
	var a struct {
		OK    bool            `json:"ok"`
		Error string          `json:"error"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(d.out.Bytes(), &a); err != nil || !a.OK {
		t.Fatalf("%s: %s %v", what, d.out.Text(), err)
	}
	return a.Value
}

// do sends one command and waits for its answer; it returns an eval's value.
func (d *pageDriver) do(t *testing.T, cmd map[string]any) json.RawMessage {
	t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	return d.answer(t, string(b))
}

func (d *pageDriver) eval(t *testing.T, expr string, v any) {
	t.Helper()
	if err := json.Unmarshal(d.do(t, map[string]any{"eval": expr}), v); err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
}

// TestDashboardDropAndResume: the dashboard's "drop connection" button closes the stream and resumes it from
// the last id: from the ring after a short absence, from Kafka after one the ring cannot cover. The page shows
// where each resume came from (explain=1), its per-partition positions match the last id, it counts no gap
// and no duplicate, and it ends with every record exactly once.
func TestDashboardDropAndResume(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.RingBytes = 64 << 10; c.Prefill = 0 })
	g.waitReady(t)
	page := drivePage(t, g.url+"/")
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open"`})
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	total := 0
	produce := func(n, size int) {
		t.Helper()
		pad := strings.Repeat("x", size)
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{
				Key:   fmt.Appendf(nil, "o-%d", (total+i)%7),
				Value: fmt.Appendf(nil, `{"seq":%d,"sent_at":%q,"pad":%q}`, total+i, time.Now().UTC().Format(time.RFC3339Nano), pad),
			})
		}
		kafkatest.Produce(t, cl, recs...)
		total += n
	}
	waitEvents := func() {
		t.Helper()
		page.do(t, map[string]any{"wait": fmt.Sprintf("window.ssegate.events.length >= %d", total)})
	}
	produce(20, 10)
	waitEvents()

	for i, c := range []struct {
		away   string
		n, pad int
		source string
	}{
		{"2", 10, 10, "ring"},    // a few small records: the ring holds them
		{"3", 400, 400, "kafka"}, // about 160 KiB: more than the 64 KiB ring holds
	} {
		page.do(t, map[string]any{"fill": []string{"#f-away", c.away}})
		page.do(t, map[string]any{"click": "#drop"})
		page.do(t, map[string]any{"wait": `window.ssegate.state === "dropped"`})
		produce(c.n, c.pad)
		page.do(t, map[string]any{"wait": fmt.Sprintf("window.ssegate.resumes.length >= %d", i+1)})
		waitEvents()
		var resumes []struct{ Source, From string }
		page.eval(t, "window.ssegate.resumes", &resumes)
		if got := resumes[len(resumes)-1]; got.Source != c.source {
			t.Errorf("drop %d: the page says it resumed from %q (from %s), want %s", i, got.Source, got.From, c.source)
		}
		var shown string
		page.eval(t, `document.getElementById("resumes").textContent`, &shown)
		if !strings.Contains(shown, map[string]string{"ring": "ring", "kafka": "Kafka"}[c.source]) {
			t.Errorf("drop %d: the resumes panel shows %q", i, shown)
		}
	}

	var seen struct {
		Events      []pageEvent
		Gaps, Dups  int
		LastEventID string
		Drops       int
	}
	page.eval(t, "window.ssegate", &seen)
	if seen.Gaps != 0 || seen.Dups != 0 || seen.Drops != 2 {
		t.Errorf("the page counted %d gaps and %d duplicates over %d drops, want none over 2", seen.Gaps, seen.Dups, seen.Drops)
	}
	evs := make([]sse.Event, len(seen.Events))
	for i, e := range seen.Events {
		evs[i] = sse.Event{Type: e.Type, ID: e.ID, Data: e.Data}
	}
	checkEvents(t, "v1:", evs, byOffset(kafkatest.ReadAll(t, topic)))
	// The positions table is the last id, partition by partition.
	var rows [][]string
	page.eval(t, `Array.from(document.querySelectorAll("#partitions tr"), (tr) => Array.from(tr.cells, (td) => td.textContent))`, &rows)
	var fromTable []string
	for _, r := range rows {
		if r[0] != "?" {
			if r[0] != topic {
				t.Errorf("the positions table names topic %q, want %s", r[0], topic)
			}
			fromTable = append(fromTable, r[1]+"-"+r[2])
		}
	}
	if got := "v1:" + strings.Join(fromTable, "."); got != seen.LastEventID {
		t.Errorf("the positions table says %s, the last id is %s", got, seen.LastEventID)
	}
	var latency string
	page.eval(t, `document.getElementById("latency").textContent`, &latency)
	if !strings.HasSuffix(latency, " ms") {
		t.Errorf("latency shown: %q, want milliseconds from the values' sent_at", latency)
	}
	// The events column adds up to the events: each event counts once, for the partition its id moved (the
	// first one, whose id names every partition, as unattributed), and the table shows the same counts.
	var counts struct {
		PerPartition map[string]int
		Unattributed int
	}
	page.eval(t, "window.ssegate", &counts)
	sum := counts.Unattributed
	for _, n := range counts.PerPartition {
		sum += n
	}
	if sum != len(seen.Events) || counts.Unattributed > 1 {
		t.Errorf("per partition %v and %d unattributed for %d events: want them to add up, with only the first unattributed",
			counts.PerPartition, counts.Unattributed, len(seen.Events))
	}
	tableSum := 0
	for _, r := range rows {
		var n int
		_, _ = fmt.Sscan(r[3], &n)
		tableSum += n
	}
	if tableSum != len(seen.Events) {
		t.Errorf("the table's events column adds up to %d, want %d: %v", tableSum, len(seen.Events), rows)
	}
	// The plots have a sample a second.
	page.do(t, map[string]any{"wait": `window.ssegate.plots.rate.length >= 2 && document.querySelector("#plot-rate polyline").getAttribute("points") !== ""`})
	if shot := os.Getenv("DASHBOARD_SCREENSHOT"); shot != "" {
		abs, _ := filepath.Abs(shot)
		page.do(t, map[string]any{"screenshot": abs})
	}
}

// TestDashboardFiltersAndStopped: the form's filters build the stream URL (key and event type narrow what the
// page gets), and a stream the gateway refuses shows as stopped with the gateway's reason, not as retrying.
func TestDashboardFiltersAndStopped(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	page := drivePage(t, g.url+"/?key=o-1&event=order.paid")
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open"`})
	var url string
	page.eval(t, `document.getElementById("url").textContent`, &url)
	if !strings.Contains(url, "key=o-1") || !strings.Contains(url, "event=order.paid") || !strings.Contains(url, "explain=1") {
		t.Errorf("the stream URL %q does not carry the filters", url)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for i := range 12 {
		typ := []string{"order.created", "order.paid"}[i%2]
		kafkatest.Produce(t, cl, &kgo.Record{
			Key: fmt.Appendf(nil, "o-%d", i%3), Value: fmt.Appendf(nil, `{"seq":%d}`, i),
			Headers: []kgo.RecordHeader{{Key: "event", Value: []byte(typ)}},
		})
	}
	// o-1 and order.paid: seq 1, 7 (i%3 == 1 and i odd).
	page.do(t, map[string]any{"wait": "window.ssegate.events.length >= 2"})
	time.Sleep(500 * time.Millisecond)
	var evs []pageEvent
	page.eval(t, "window.ssegate.events", &evs)
	if len(evs) != 2 || evs[0].Data != `{"seq":1}` || evs[1].Data != `{"seq":7}` {
		t.Errorf("filtered page events: %+v, want seq 1 and 7", evs)
	}

	page.do(t, map[string]any{"select": []string{"#f-from", "time"}})
	page.do(t, map[string]any{"fill": []string{"#f-time", "yesterday"}})
	page.do(t, map[string]any{"click": "#open"})
	page.do(t, map[string]any{"wait": `window.ssegate.state === "stopped" && document.getElementById("state-note").textContent.startsWith("400")`})
	// The new stream starts afresh: nothing of the old one's counts, rows or events stays.
	var after struct {
		Count, Rows, Events, Positions int
	}
	page.eval(t, `({count: Number(document.getElementById("count").textContent), rows: document.querySelectorAll("#events tr").length,
		events: window.ssegate.events.length, positions: document.querySelectorAll("#partitions tr").length})`, &after)
	if after != (struct{ Count, Rows, Events, Positions int }{}) {
		t.Errorf("after opening a new stream the page still shows the old one's: %+v", after)
	}
	var note string
	page.eval(t, `document.getElementById("state-note").textContent`, &note)
	if !strings.Contains(note, "from") {
		t.Errorf("the stopped state says %q, want the gateway's reason naming from", note)
	}
}

// TestDashboardCompactIDs: against a gateway with compact (v2) ids, which the page cannot resolve, the
// dashboard counts no gap and no duplicate for them, says how many ids it left unchecked, and still receives
// every record.
func TestDashboardCompactIDs(t *testing.T) {
	topic := kafkatest.NewTopic(t, 8, nil)
	pt := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.IDFormat, c.PositionTopic = "v2", pt })
	g.waitReady(t)
	page := drivePage(t, g.url+"/")
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open"`})
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	const n = 60
	for i := range n {
		kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "c-%d", i), Value: fmt.Appendf(nil, `{"seq":%d}`, i)})
	}
	page.do(t, map[string]any{"wait": fmt.Sprintf("window.ssegate.events.length >= %d", n)})
	var seen struct {
		Events     []pageEvent
		Gaps, Dups int
		Unchecked  int
	}
	page.eval(t, "window.ssegate", &seen)
	compact := 0
	for _, e := range seen.Events {
		if strings.HasPrefix(e.ID, "v2:") {
			compact++
		}
	}
	if compact == 0 {
		t.Fatal("the gateway framed no compact id: the test tests nothing")
	}
	if seen.Gaps != 0 || seen.Dups != 0 || seen.Unchecked != compact {
		t.Errorf("the page counted %d gaps, %d duplicates and %d unchecked ids over %d compact ones, want 0, 0 and %d",
			seen.Gaps, seen.Dups, seen.Unchecked, compact, compact)
	}
	var note string
	page.eval(t, `document.getElementById("gaps-note").textContent`, &note)
	if !strings.Contains(note, "compact (v2) ids not checked") {
		t.Errorf("the gaps note says %q", note)
	}
	if len(seen.Events) != n {
		t.Errorf("the page received %d events, want %d", len(seen.Events), n)
	}
}
