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
var clientPage = template.Must(template.New("client").Parse(`<!doctype html>
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
</script></body></html>`))

// clientReport is what the page saw, before and after its reload.
type clientReport struct {
	Opens, Stored int
	Closed        bool
	Events        []clientEvent
	Live          *struct {
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
		// Records of both partitions, 30 ms apart: live and replayed (by timestamp) alike, the page gets them
		// in the order produced.
		return &kgo.Record{Partition: int32(i % 2), Value: value(i)}
	}, cl)
	for i, ev := range events {
		want := value(i)
		got := ev.Bytes
		if ev.Text != nil {
			got = []byte(*ev.Text)
		}
		if ev.Type != "message" || ev.Topic != topic || string(got) != string(want) || (i%5 == 4) != (ev.Bytes != nil) {
			for j, e := range events {
				t.Logf("%d %s %v %q", j, e.ID, e.Bytes, derefText(e.Text))
			}
			t.Fatalf("record %d: %+v (text %v), want %q of %s", i, ev, ev.Text, want, topic)
		}
		if _, err := position.Parse(ev.ID); err != nil {
			t.Fatalf("record %d: id %q: %v", i, ev.ID, err)
		}
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
	var g *gateway
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		stream := g.url + path
		if strings.HasPrefix(path, "/ws/") {
			stream = "ws" + strings.TrimPrefix(stream, "http")
		}
		_ = clientPage.Execute(w, map[string]string{"Gateway": g.url, "Stream": stream})
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

// derefText is a record's text for a test's log ("<nil>" for bytes).
func derefText(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
