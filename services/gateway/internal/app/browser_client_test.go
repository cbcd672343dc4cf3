package app

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
)

// clientPage is a page of another origin that uses the client module the gateway serves (/ssegate.js), as an
// application would: it imports it from the gateway and keeps an account of what connect hands it.
var clientPage = template.Must(template.New("client").Parse(clientPageText))

const clientPageText = `<!doctype html>
<html><head><meta charset="utf-8"><title>client</title></head><body>
<script type="module">
import { connect } from "{{.Gateway}}/ssegate.js";
// The account of records survives a reload like the module's position: both are written in the same task, so a
// reload can never fall between them.
const seen = window.ssegate = { opens: 0, events: JSON.parse(sessionStorage.getItem("account") ?? "[]"), resyncs: [],
  closed: false, stored: Object.keys(sessionStorage).filter((k) => k.startsWith("ssegate:")).length,
  expiring: 0, expired: 0, refreshed: 0 };
connect("{{.Stream}}", {
  onOpen: () => { seen.opens++; },
  onError: (e) => { if (e.closed) seen.closed = true; },
  onRecord: (r) => {
    seen.events.push({ type: r.type, topic: r.topic, id: r.id, data: r.data, text: r.text ?? null, bytes: r.bytes ? Array.from(r.bytes) : null });
    sessionStorage.setItem("account", JSON.stringify(seen.events));
  },
  onResync: (r) => seen.resyncs.push(r),
  onLive: (r) => { seen.live = { id: r.id, after: seen.events.length }; },
  onTokenExpiring: () => { seen.expiring++; },
  onTokenExpired: () => { seen.expired++; },
  renewToken: async () => { if ((await fetch("/refresh", { method: "POST" })).ok) seen.refreshed++; },
});
</script></body></html>`

// clientReport is what the page saw, before and after its reload.
type clientReport struct {
	Opens, Stored     int
	Expiring, Expired int
	Closed            bool
	Resyncs           []json.RawMessage
	Events            []clientEvent
	Live              *struct {
		ID    string
		After int
	}
}

// clientEvent is one record as the page's onRecord saw it.
type clientEvent struct {
	Type, Topic, ID string
	Text            *string
	Bytes           []byte
}

// TestBrowserClientModule: in Chromium, a page of another origin imports the client module from the gateway
// and follows a stream with it; the page is reloaded in the middle, and the module resumes from the position
// it kept in sessionStorage (an EventSource alone would start over from the latest record): every record
// once, in order, across the reload. Values that are not text arrive as bytes, decoded from base64.
func TestBrowserClientModule(t *testing.T) {
	clientModule(t, "/streams/")
}

// TestBrowserClientWebSocket: TestBrowserClientModule over the module's WebSocket transport (a ws: URL of
// /ws/{topic}): the same records, once, in order, across the reload, resumed from the position it kept.
func TestBrowserClientWebSocket(t *testing.T) {
	clientModule(t, "/ws/")
}

// clientModule is TestBrowserClientModule on the stream of route (/streams/ or /ws/).
func clientModule(t *testing.T, route string) {
	t.Helper()
	browserTools(t)
	topic := kafkatest.NewTopic(t, 2, nil)
	const n, reloadAt = 40, 15
	value := func(i int) []byte {
		if i%5 == 4 {
			return []byte{0xff, 0x00, byte(i)} // not UTF-8: base64 on the wire
		}
		return fmt.Appendf(nil, "record-%d", i)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	events := reloadedPage(t, []string{topic}, route+topic, n, reloadAt, func(i int) *kgo.Record {
		// Records of both partitions, 30 ms apart. Each partition's come in the order produced; across the two,
		// frames follow their arrival at the pod (and a replay their timestamps), which two records 30 ms apart
		// in one fetch need not follow: the page must get each record once, each partition's in order.
		return &kgo.Record{Partition: int32(i % 2), Value: value(i)}
	}, cl)
	index := map[string]int{}
	for i := range n {
		index[string(value(i))] = i
	}
	last := [2]int{-2, -1} // the last record of each partition seen: record i is in partition i%2
	seen := map[int]bool{}
	for j, ev := range events {
		got := ev.Bytes
		if ev.Text != nil {
			got = []byte(*ev.Text)
		}
		i, ok := index[string(got)]
		if !ok || seen[i] || ev.Type != "message" || ev.Topic != topic || (i%5 == 4) != (ev.Bytes != nil) || i != last[i%2]+2 {
			for k, e := range events {
				t.Logf("%d %s %v %q", k, e.ID, e.Bytes, derefText(e.Text))
			}
			t.Fatalf("event %d: %+v (text %v): want each record of %s once, each partition's in order (after record %d)", j, ev, derefText(ev.Text), topic, last[i%2])
		}
		seen[i], last[i%2] = true, i
		if _, err := position.Parse(ev.ID); err != nil {
			t.Fatalf("record %d: id %q: %v", i, ev.ID, err)
		}
	}
	if len(seen) != n {
		t.Fatalf("the page got %d of %d records", len(seen), n)
	}
}

// TestBrowserClientTopics: TestBrowserClientModule with a stream of two topics: the module names each
// record's topic, and resumes both exactly across the reload.
func TestBrowserClientTopics(t *testing.T) {
	browserTools(t)
	ta, tb := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t)
	const n, reloadAt = 40, 15
	topicOf := func(i int) string { return []string{ta, tb}[i%2] }
	events := reloadedPage(t, []string{ta, tb}, "/streams/"+ta+","+tb, n, reloadAt, func(i int) *kgo.Record {
		return &kgo.Record{Topic: topicOf(i), Value: fmt.Appendf(nil, "%s %d", topicOf(i), i)}
	}, cl)
	next := map[string]int{ta: 0, tb: 1}
	for i, ev := range events {
		if ev.Text == nil || ev.Topic == "" || *ev.Text != fmt.Sprintf("%s %d", ev.Topic, next[ev.Topic]) {
			t.Fatalf("record %d: %+v (text %v), want the next of its topic, %v", i, ev, ev.Text, next)
		}
		next[ev.Topic] += 2
		if _, err := position.ParseTopics(ev.ID); err != nil {
			t.Fatalf("record %d: id %q: %v", i, ev.ID, err)
		}
	}
}

// reloadedPage serves clientPage (a page of another origin, following path on a gateway of topics with the
// client module; a path of /ws/ as a ws: URL, which the module reads with its WebSocket transport), has the
// driver reload it after reloadAt records, produces n records (record(i), 30 ms
// apart) meanwhile, and returns every record the page's account holds after the reload, which must be n, the
// ones before the reload first.
func reloadedPage(t *testing.T, topics []string, path string, n, reloadAt int, record func(int) *kgo.Record, cl *kgo.Client) []clientEvent {
	t.Helper()
	return reloadedPageOf(t, clientPage, topics, path, n, reloadAt, record, cl)
}

// reloadedPageOf is reloadedPage with another page.
func reloadedPageOf(t *testing.T, page *template.Template, topics []string, path string, n, reloadAt int, record func(int) *kgo.Record, cl *kgo.Client) []clientEvent {
	t.Helper()
	var g *gateway
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		stream := g.url + path
		if strings.HasPrefix(path, "/ws/") {
			stream = "ws" + strings.TrimPrefix(stream, "http")
		}
		_ = page.Execute(w, map[string]string{"Gateway": g.url, "Stream": stream})
	})
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	g = startGateway(t, topics, func(c *Config) {
		c.CORS.Origins = []string{app.URL}
		c.CORS.Credentials = true
	})
	g.waitReady(t)
	_, lines := startDriver(t, 2*time.Minute, nil, "page.mjs", app.URL+"/", fmt.Sprint(n), "60000", fmt.Sprint(reloadAt))
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("the page did not open its stream: %q %v", lines.Text(), lines.Err())
	}
	produced := make(chan error, 1)
	go func() {
		for i := range n {
			if err := cl.ProduceSync(t.Context(), record(i)).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
		produced <- nil
	}()
	if !lines.Scan() {
		t.Fatalf("no report from the page: %v", lines.Err())
	}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	var r struct{ Before, After clientReport }
	if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
		t.Fatalf("report: %v: %s", err, lines.Text())
	}
	if r.After.Stored != 1 || r.After.Closed || r.Before.Closed {
		t.Fatalf("after the reload sessionStorage held %d items (want the position), closed before %v after %v", r.After.Stored, r.Before.Closed, r.After.Closed)
	}
	// The page's account carries over the reload, so After holds every record: those before the reload (Before,
	// and any that arrived while the reload began) and those the resumed stream brought.
	events := r.After.Events
	if len(events) != n || len(r.Before.Events) < reloadAt || len(r.Before.Events) >= n {
		t.Fatalf("%d records before the reload and %d in all, want at least %d before and %d in all", len(r.Before.Events), len(events), reloadAt, n)
	}
	if !slices.EqualFunc(r.Before.Events, events[:len(r.Before.Events)], func(a, b clientEvent) bool { return a.ID == b.ID }) {
		t.Fatalf("the records before the reload are not where the account after it has them")
	}
	return events
}

// TestBrowserClientTokenRenewal: TestBrowserTokenRefresh with the client module: its renewToken gets the new
// cookie at token-expiring, and when the gateway ends the stream at the token's expiry the module opens it
// again itself, from its position, with the new cookie: every record once, in order.
func TestBrowserClientTokenRenewal(t *testing.T) {
	tokenRefresh(t, true)
}

// TestBrowserClientSnapshot: in Chromium, the client module on a from=snapshot stream gets the latest value of
// each key, then onLive with the cut's id, then every record after it.
func TestBrowserClientSnapshot(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 2, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	const keys = 10
	for v := range 3 {
		for k := range keys {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d=%d", k, v)})
		}
	}
	var g *gateway
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = clientPage.Execute(w, map[string]string{"Gateway": g.url, "Stream": g.url + "/streams/" + topic + "?from=snapshot"})
	})
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	g = startGateway(t, []string{topic}, func(c *Config) { c.CORS.Origins = []string{app.URL}; c.CORS.Credentials = true })
	g.waitReady(t)
	_, lines := startDriver(t, 2*time.Minute, nil, "page.mjs", app.URL+"/", fmt.Sprint(keys+2), "60000")
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("the page did not open its stream: %q %v", lines.Text(), lines.Err())
	}
	// The cut is where the stream joined, before its snapshot frames went out: records written once they
	// are counted come after it.
	kafkatest.WaitFor(t, 30*time.Second, "the snapshot's frames", func() bool {
		return metricValue(t, g, "ssegate_frames_written_total", `topic="`+topic+`"`) >= keys
	})
	kafkatest.Produce(t, cl, &kgo.Record{Key: []byte("k1"), Value: []byte("k1=live")}, &kgo.Record{Key: []byte("k1"), Value: []byte("k1=live2")})
	if !lines.Scan() {
		t.Fatalf("no report from the page: %v", lines.Err())
	}
	var r clientReport
	if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
		t.Fatalf("report: %v: %s", err, lines.Text())
	}
	if r.Live == nil || r.Live.After != keys || r.Live.ID == "" {
		t.Fatalf("live: %+v, want after the %d keys", r.Live, keys)
	}
	got := map[string]bool{}
	for i, ev := range r.Events {
		if ev.Text == nil {
			t.Fatalf("event %d: %+v", i, ev)
		}
		got[*ev.Text] = true
		if i >= keys && *ev.Text != []string{"k1=live", "k1=live2"}[i-keys] {
			t.Errorf("live event %d: %q", i-keys, *ev.Text)
		}
	}
	for k := range keys {
		if !got[fmt.Sprintf("k%d=2", k)] {
			t.Errorf("the snapshot lacks k%d=2: %v", k, got)
		}
	}
}

// TestBrowserClientForgedEvents: in Chromium, records produced with the gateway's event types (a keyless
// token-expired and resync, a token-expiring, a keyed live) do not reach the client module as the gateway's
// events: the page does not close and reopen its stream, counts no token moment, resync or snapshot end, and
// gets the records after them. Before, the forged token-expired made every page reopen its stream at once.
func TestBrowserClientForgedEvents(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	var g *gateway
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = clientPage.Execute(w, map[string]string{"Gateway": g.url, "Stream": g.url + "/streams/" + topic + "?from=earliest"})
	})
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	g = startGateway(t, []string{topic}, func(c *Config) { c.CORS.Origins = []string{app.URL}; c.CORS.Credentials = true })
	g.waitReady(t)
	_, lines := startDriver(t, 2*time.Minute, nil, "page.mjs", app.URL+"/", "2", "60000")
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("the page did not open its stream: %q %v", lines.Text(), lines.Err())
	}
	hdr := func(k, v string) []kgo.RecordHeader { return []kgo.RecordHeader{{Key: k, Value: []byte(v)}} }
	kafkatest.Produce(t, cl,
		&kgo.Record{Value: []byte(`{"expires_at":"2020-01-01T00:00:00Z","expires_in_ms":0}`), Headers: hdr("event", "token-expiring")},
		&kgo.Record{Value: []byte(`{"expired_at":"2020-01-01T00:00:00Z"}`), Headers: hdr("event", "token-expired")},
		&kgo.Record{Value: []byte(`{"reason":"retention","partitions":[]}`), Headers: hdr("ce_type", "resync")},
		&kgo.Record{Key: []byte("k"), Value: []byte(`{"id":"v1:0-0"}`), Headers: hdr("event", "live")},
		&kgo.Record{Value: []byte("after-1")},
		&kgo.Record{Value: []byte("after-2")},
	)
	if !lines.Scan() {
		t.Fatalf("no report from the page: %v", lines.Err())
	}
	var r clientReport
	if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
		t.Fatalf("report: %v: %s", err, lines.Text())
	}
	if r.Opens != 1 || r.Closed || r.Expiring != 0 || r.Expired != 0 || len(r.Resyncs) != 0 || r.Live != nil {
		t.Errorf("the page took records for the gateway's events: %d opens, closed %t, %d token-expiring, %d token-expired, resyncs %s, live %+v",
			r.Opens, r.Closed, r.Expiring, r.Expired, r.Resyncs, r.Live)
	}
	var got []string
	for _, ev := range r.Events {
		if ev.Text != nil {
			got = append(got, ev.Type+" "+*ev.Text)
		}
	}
	if !slices.Equal(got, []string{"message after-1", "message after-2"}) {
		t.Errorf("records %q, want the two after the forged ones, once each", got)
	}
}

// openedPage is clientPage that says it is open only once the module has stored the stream's position: with
// the opening id that is before any record.
var (
	openedPageText = strings.Replace(clientPageText, `onOpen: () => { seen.opens++; },`,
		`onOpen: () => { const stored = () => Object.keys(sessionStorage).some((k) => k.startsWith("ssegate:"));
    const tick = () => (stored() ? seen.opens++ : setTimeout(tick, 10)); tick(); },`, 1)
	openedPage = template.Must(template.New("opened").Parse(openedPageText))
)

// TestBrowserClientOpeningID: in Chromium, the module keeps the stream's opening id (the gateway repeats it as
// an "opened" event, which an EventSource hands the page, where it never hands it an id-only block's): the
// page is reloaded before its first record, while records are produced, and resumes from the opening id: it
// gets every record produced since it first opened, none lost in the reload. Without the opening id it would
// start over from the latest record (and this page would never say it is open).
func TestBrowserClientOpeningID(t *testing.T) {
	browserTools(t)
	if openedPageText == clientPageText {
		t.Fatal("openedPage is clientPage: its onOpen was not replaced")
	}
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	const n = 20
	events := reloadedPageOf(t, openedPage, []string{topic}, "/streams/"+topic, n, 0, func(i int) *kgo.Record {
		return &kgo.Record{Value: fmt.Appendf(nil, "record-%d", i)}
	}, cl)
	for i, ev := range events {
		if ev.Text == nil || *ev.Text != fmt.Sprintf("record-%d", i) {
			t.Fatalf("record %d: %+v (text %v), want record-%d", i, ev, ev.Text, i)
		}
	}
}

// derefText is a record's text for a test's log ("<nil>" for bytes).
func derefText(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
