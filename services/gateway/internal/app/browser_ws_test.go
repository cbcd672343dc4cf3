package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// wsPageEvent is an event as the dashboard in WebSocket mode saw it: a pageEvent with what the message adds,
// the record's key, partition and offset.
type wsPageEvent struct {
	pageEvent
	Key       *string
	Partition *int32
	Offset    *int64
}

// wsPageSeen is window.ssegate of a dashboard in WebSocket mode.
type wsPageSeen struct {
	Opens, Drops, Gaps, Dups, Unattributed  int
	Transport, State, LastEventID, Position string
	Events                                  []wsPageEvent
	Resumes                                 []struct{ Source, From string }
}

// wsSeen returns what the page saw, after checking that it read the stream over a WebSocket: window.ssegate
// says so, the connection panel shows it, and the URL line names /ws/{topic}.
func wsSeen(t *testing.T, page *pageDriver, topic string) wsPageSeen {
	t.Helper()
	var shown struct{ Transport, URL string }
	page.eval(t, `({transport: document.getElementById("transport").textContent, url: document.getElementById("url").textContent})`, &shown)
	var seen wsPageSeen
	page.eval(t, "window.ssegate", &seen)
	if seen.Transport != "ws" || shown.Transport != "WebSocket" || !strings.HasPrefix(shown.URL, "WebSocket /ws/"+topic+"?") {
		t.Errorf("the page reads the stream over %q (it shows %q, URL %q), want ws, WebSocket, /ws/%s", seen.Transport, shown.Transport, shown.URL, topic)
	}
	return seen
}

// checkWSPageEvents fails unless the page's events are exactly the topic's records, in order, with exact ids
// (checkEvents), each with the key, partition and offset of the record its id moved.
func checkWSPageEvents(t *testing.T, got []wsPageEvent, n int, records map[int32]map[int64]*kgo.Record) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("the page saw %d events, want %d", len(got), n)
	}
	evs := make([]sse.Event, len(got))
	for i, e := range got {
		evs[i] = sse.Event{Type: e.Type, ID: e.ID, Data: e.Data}
	}
	checkEvents(t, "v1:", evs, records) // the topic was empty when the gateway started
	for i, e := range got {
		if e.Partition == nil || e.Offset == nil || e.Key == nil {
			t.Fatalf("event %d (%s): no key, partition or offset from the message", i, e.ID)
		}
		id := position.MustParse(e.ID)
		rec := records[*e.Partition][*e.Offset]
		if o, ok := id.Offset(*e.Partition); !ok || o != *e.Offset || rec == nil || string(rec.Key) != *e.Key {
			t.Errorf("event %d: key %q at %d/%d; its id is %s", i, *e.Key, *e.Partition, *e.Offset, e.ID)
		}
	}
}

// TestDashboardWebSocket: the dashboard opened with ?transport=ws reads the topic through /ws/{topic} in
// Chromium and says so; it receives every record produced after it connected, in order, with exact ids and
// each with its key, partition and offset, and counts the first record for its partition too (it saw where
// the stream started, which an EventSource never shows). Its "drop connection" button closes the socket and
// resumes with last_event_id the last id it got: from the ring, with no gap and no duplicate.
func TestDashboardWebSocket(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	page := drivePage(t, g.url+"/?transport=ws")
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open"`})

	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	types := []string{"", "order.created", "order.paid", "order.shipped"}
	total := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := total; i < total+n; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "o-%d", i%7), Value: fmt.Appendf(nil, `{"seq":%d}`, i)}
			if ty := types[i%len(types)]; ty != "" {
				r.Headers = []kgo.RecordHeader{{Key: "event", Value: []byte(ty)}}
			}
			recs = append(recs, r)
		}
		kafkatest.Produce(t, cl, recs...)
		total += n
	}
	produce(60)
	page.do(t, map[string]any{"wait": "window.ssegate.events.length >= 60"})
	seen := wsSeen(t, page, topic)
	if seen.Opens != 1 {
		t.Errorf("the stream opened %d times, want 1", seen.Opens)
	}
	checkWSPageEvents(t, seen.Events, 60, byOffset(kafkatest.ReadAll(t, topic)))
	if seen.Gaps != 0 || seen.Dups != 0 || seen.Unattributed != 0 {
		t.Errorf("the page counted %d gaps, %d duplicates, %d unattributed events; want none", seen.Gaps, seen.Dups, seen.Unattributed)
	}
	if seen.Position != seen.LastEventID {
		t.Errorf("the page would resume from %q, its last event is %q", seen.Position, seen.LastEventID)
	}

	before := seen.LastEventID
	page.do(t, map[string]any{"fill": []string{"#f-away", "1"}})
	page.do(t, map[string]any{"click": "#drop"})
	page.do(t, map[string]any{"wait": `window.ssegate.state === "dropped"`})
	produce(10)
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open" && window.ssegate.resumes.length >= 1 && window.ssegate.events.length >= 70`})
	var resumedWith string
	page.eval(t, `new URL(document.getElementById("url").textContent.split(" ")[1], location.href).searchParams.get("last_event_id")`, &resumedWith)
	seen = wsSeen(t, page, topic)
	if resumedWith != before || len(seen.Resumes) != 1 || seen.Resumes[0].From != before || seen.Resumes[0].Source != "ring" {
		t.Errorf("after the drop the page resumed with last_event_id %q, the gateway says %+v; want %s, from the ring", resumedWith, seen.Resumes, before)
	}
	if seen.Opens != 2 || seen.Drops != 1 || seen.Gaps != 0 || seen.Dups != 0 {
		t.Errorf("%d opens, %d drops, %d gaps, %d duplicates; want 2, 1, 0, 0", seen.Opens, seen.Drops, seen.Gaps, seen.Dups)
	}
	checkWSPageEvents(t, seen.Events, 70, byOffset(kafkatest.ReadAll(t, topic)))
}

// TestDashboardWebSocketAcrossRestart: the gateway is restarted under a dashboard in WebSocket mode. The
// socket closes; the page reconnects by itself, after the gateway's retry, with last_event_id the last id it
// showed, over and over while no gateway runs, and once one runs again it ends up with every record exactly
// once, in order, including the ones produced while no gateway was running.
func TestDashboardWebSocketAcrossRestart(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	addr := proctest.FreeAddr(t)
	onPort := func(c *Config) { c.Listen, c.Retry, c.Drain = addr, 300*time.Millisecond, 0 }
	g1 := startGateway(t, []string{topic}, onPort)
	g1.waitReady(t)
	page := drivePage(t, g1.url+"/?transport=ws")
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open"`})

	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produce := func(from int) {
		for i := from; i < from+30; i++ {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "o-%d", i%5), Value: fmt.Appendf(nil, `{"seq":%d}`, i)})
		}
	}
	produce(0)
	page.do(t, map[string]any{"wait": "window.ssegate.events.length >= 30"})
	g1.stop()
	if err := <-g1.done; err != nil {
		t.Fatalf("first gateway: %v", err)
	}
	g1.done <- nil
	// While no gateway runs, the page retries from the last id it showed.
	page.do(t, map[string]any{"wait": `window.ssegate.state === "retrying" && document.getElementById("url").textContent.includes("last_event_id=")`})
	var down struct {
		LastEventID, Position, URL string
	}
	page.eval(t, `({lastEventID: window.ssegate.lastEventId, position: window.ssegate.position,
		url: new URL(document.getElementById("url").textContent.split(" ")[1], location.href).searchParams.get("last_event_id")})`, &down)
	if down.URL != down.LastEventID || down.Position != down.LastEventID || !strings.HasPrefix(down.LastEventID, "v1:") {
		t.Errorf("with no gateway the page retries with last_event_id %q (position %q), its last event is %q", down.URL, down.Position, down.LastEventID)
	}
	produce(30) // while no gateway runs
	g2 := startGateway(t, []string{topic}, onPort)
	g2.waitReady(t)
	produce(60)

	page.do(t, map[string]any{"wait": `window.ssegate.state === "open" && window.ssegate.events.length >= 90`})
	seen := wsSeen(t, page, topic)
	if seen.Opens != 2 {
		t.Errorf("the stream opened %d times, want 2", seen.Opens)
	}
	if len(seen.Resumes) != 1 || seen.Resumes[0].From != down.LastEventID {
		t.Errorf("the gateway says the page resumed %+v, want once, from %s", seen.Resumes, down.LastEventID)
	}
	if seen.Gaps != 0 || seen.Dups != 0 {
		t.Errorf("the page counted %d gaps and %d duplicates", seen.Gaps, seen.Dups)
	}
	checkWSPageEvents(t, seen.Events, 90, byOffset(kafkatest.ReadAll(t, topic)))
	if v := metricValue(t, g2, "ssegate_resumes_total", `topic="`+topic+`"`, `source="ring"`) +
		metricValue(t, g2, "ssegate_resumes_total", `topic="`+topic+`"`, `source="kafka"`); v != 1 {
		t.Errorf("the second gateway served %v resumes, want 1", v)
	}
	var note string
	page.eval(t, `document.getElementById("reconnects").textContent`, &note)
	if note != "1" {
		t.Errorf("the page shows %q reconnects, want 1", note)
	}
}
