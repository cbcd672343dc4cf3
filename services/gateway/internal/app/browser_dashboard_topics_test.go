package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
)

// TestDashboardTopicsSnapshotReload: the dashboard on a stream of two topics read from=snapshot shows each
// key's latest value, then live for each topic, with the positions of both topics; reloaded in the middle of
// the live records, it goes on from the position the client module kept: every record after it once, in
// order, each id moving one partition of its own topic by one offset, up to the end of both topics, and the
// page itself counts no gap and no duplicate.
func TestDashboardTopicsSnapshotReload(t *testing.T) {
	ta, tb := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t)
	// The state: ta's 5 keys written 3 times, tb's 4 keys twice; the snapshot holds the last of each.
	latest := map[string]bool{}
	for _, s := range []struct {
		topic          string
		keys, versions int
	}{{ta, 5, 3}, {tb, 4, 2}} {
		for v := range s.versions {
			for k := range s.keys {
				val := fmt.Sprintf("%s k%d=%d", s.topic, k, v)
				kafkatest.Produce(t, cl, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", k), Value: []byte(val)})
				if v == s.versions-1 {
					latest[val] = true
				}
			}
		}
	}
	g := startGateway(t, []string{ta, tb}, nil)
	g.waitReady(t)
	page := drivePage(t, g.url+"/?topics="+ta+","+tb+"&from=snapshot")
	page.do(t, map[string]any{"wait": "window.ssegate.live.length >= 2"})
	var state struct {
		Events   []struct{ Topic, Data string }
		Snapshot int
		Live     []struct{ Topic, ID string }
	}
	page.eval(t, "window.ssegate", &state)
	var got []string
	for _, ev := range state.Events {
		got = append(got, ev.Data)
		if !strings.HasPrefix(ev.Data, ev.Topic+" ") {
			t.Errorf("snapshot record %q named topic %q", ev.Data, ev.Topic)
		}
	}
	if state.Snapshot != len(latest) || len(got) != len(latest) || !slices.ContainsFunc(state.Live, func(l struct{ Topic, ID string }) bool { return l.Topic == tb }) {
		t.Fatalf("the snapshot: %d records %v (live %+v), want each key's latest, %d", state.Snapshot, got, state.Live, len(latest))
	}
	for _, v := range got {
		if !latest[v] {
			t.Errorf("snapshot record %q is not a key's latest value", v)
		}
	}
	var shown string
	page.eval(t, `document.getElementById("snapshot").textContent`, &shown)
	if !strings.HasPrefix(shown, fmt.Sprintf("%d records of state; live since", len(latest))) {
		t.Errorf("the snapshot panel shows %q", shown)
	}
	var rows [][]string
	page.eval(t, `Array.from(document.querySelectorAll("#partitions tr"), (tr) => Array.from(tr.cells, (td) => td.textContent))`, &rows)
	var named []string
	for _, r := range rows {
		named = append(named, r[0]+"/"+r[1])
	}
	want := []string{ta + "/0", ta + "/1", tb + "/0"}
	slices.Sort(want) // by topic name, then partition
	if !slices.Equal(named, want) && !slices.Equal(named, append(want, "?/?")) {
		t.Errorf("the positions table has rows %v, want %v", named, want)
	}

	// Live records, each of its own key (a resume's snapshot of what changed then leaves none out), while the
	// page is reloaded.
	const n = 40
	produced := make(chan error, 1)
	go func() {
		for i := range n {
			topic := []string{ta, tb}[i%2]
			rec := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "live-%d", i), Value: fmt.Appendf(nil, "%s live %d", topic, i)}
			if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
		produced <- nil
	}()
	page.do(t, map[string]any{"wait": fmt.Sprintf("window.ssegate.events.length >= %d", len(latest)+n/4)})
	page.do(t, map[string]any{"reload": true})
	page.do(t, map[string]any{"wait": "window.ssegate.resumedFrom !== null"})
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	var from string
	page.eval(t, "window.ssegate.resumedFrom", &from)
	tr := &topicTrack{pos: map[string]position.Vector{}, records: map[string]map[int32]map[int64]*kgo.Record{}, topics: 2}
	tps, err := position.ParseTopics(from)
	if err != nil {
		t.Fatalf("the page resumed from %q: %v", from, err)
	}
	// What is left after the position the page went on from: the records it must get after the reload.
	left := 0
	for _, tp := range tps {
		tr.pos[tp.Topic] = tp.Pos
		for p, recs := range kafkatest.ReadAll(t, tp.Topic) {
			o, ok := tp.Pos.Offset(p)
			for _, r := range recs {
				if !ok || r.Offset > o {
					left++
				}
			}
		}
	}
	if left == 0 || left >= n {
		t.Fatalf("the page resumed from %s with %d of the %d live records left: the reload was not in the middle", from, left, n)
	}
	page.do(t, map[string]any{"wait": fmt.Sprintf("window.ssegate.events.length >= %d && window.ssegate.live.length >= 2", left)})
	var after struct {
		Events     []struct{ ID, Topic, Data string }
		Gaps, Dups int
	}
	page.eval(t, "window.ssegate", &after)
	if len(after.Events) != left || after.Gaps != 0 || after.Dups != 0 {
		t.Fatalf("after the reload the page got %d records (want %d) and counted %d gaps, %d duplicates", len(after.Events), left, after.Gaps, after.Dups)
	}
	for _, ev := range after.Events {
		tr.check(t, rawEvent{id: ev.ID, topic: ev.Topic, data: ev.Data})
	}
}

// TestDashboardWebSocketTopics: the dashboard in WebSocket mode on a stream of two topics (/ws/a,b): each
// record shows its topic, the page follows both topics' positions from the ids with no gap and no duplicate,
// and "drop connection" resumes both exactly.
func TestDashboardWebSocketTopics(t *testing.T) {
	ta, tb := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{ta, tb}, nil)
	g.waitReady(t)
	page := drivePage(t, g.url+"/?transport=ws&topics="+ta+","+tb)
	page.do(t, map[string]any{"wait": `window.ssegate.state === "open"`})
	cl := kafkatest.Client(t)
	total := 0
	produce := func(n int) {
		t.Helper()
		for range n {
			topic := []string{ta, tb}[total%2]
			kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", total%5), Value: fmt.Appendf(nil, "%s %d", topic, total)})
			total++
		}
	}
	type seenPage struct {
		Events                 []struct{ Topic, Data string }
		Gaps, Dups, Drops      int
		Unattributed, Opens    int
		Transport, LastEventID string
	}
	check := func(want int) seenPage {
		t.Helper()
		page.do(t, map[string]any{"wait": fmt.Sprintf("window.ssegate.events.length >= %d", want)})
		var seen seenPage
		page.eval(t, "window.ssegate", &seen)
		if len(seen.Events) != want || seen.Gaps != 0 || seen.Dups != 0 || seen.Unattributed != 0 || seen.Transport != "ws" {
			t.Fatalf("%d events (want %d), %d gaps, %d duplicates, %d unattributed, transport %s", len(seen.Events), want, seen.Gaps, seen.Dups, seen.Unattributed, seen.Transport)
		}
		// Every record once, with its topic, in order per key (a key's records share a partition; partitions
		// and topics interleave as they come).
		last, got := map[string]int{}, map[int]bool{}
		for i, ev := range seen.Events {
			var topic string
			var n int
			if _, err := fmt.Sscanf(ev.Data, "%s %d", &topic, &n); err != nil || topic != ev.Topic || topic != []string{ta, tb}[n%2] || got[n] {
				t.Fatalf("event %d: %+v (%v)", i, ev, err)
			}
			k := fmt.Sprint(topic, n%5)
			if l, ok := last[k]; ok && n < l {
				t.Fatalf("event %d: record %d after %d of its key", i, n, l)
			}
			got[n], last[k] = true, n
		}
		return seen
	}
	produce(20)
	before := check(20)
	if !position.IsTopics(before.LastEventID) {
		t.Fatalf("last id %q: want a several-topic id", before.LastEventID)
	}
	page.do(t, map[string]any{"fill": []string{"#f-away", "1"}})
	page.do(t, map[string]any{"click": "#drop"})
	page.do(t, map[string]any{"wait": `window.ssegate.state === "dropped"`})
	produce(10)
	if after := check(30); after.Drops != 1 || after.Opens != 2 {
		t.Fatalf("%d drops, %d opens: want 1 and 2", after.Drops, after.Opens)
	}
}

// TestDashboardNamesPublicTopics: the dashboard, which anyone may load, offers the demo topic and the topics
// anyone may read, and does not name a topic that needs a token. Kafka is not needed: the page is static.
func TestDashboardNamesPublicTopics(t *testing.T) {
	g := startGatewayOn(t, []string{"127.0.0.1:1"}, []string{"demo", "public", "private"}, withAuth(t, func(c *Config) {
		c.Auth.TopicModes = map[string]string{"demo": "required", "public": "optional", "private": "required"}
	}))
	status, body := get(t, g.url+"/")
	if status != 200 || !strings.Contains(body, "demo") || !strings.Contains(body, "public") || strings.Contains(body, "private") {
		t.Fatalf("GET / = %d, want a page naming demo and public, not private:\n%s", status, body)
	}
}
