package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// snapshotState is what a client of a from=snapshot stream holds: each key's latest value, and whether it
// has seen "live".
type snapshotState struct {
	values map[string]int
	live   string // the live frame's id
	frames int
}

// readSnapshot reads a stream until "live" (and then n more frames), or until stop frames were read, applying
// each to st; it returns the last id read.
func readSnapshot(t *testing.T, ctx context.Context, u string, st *snapshotState, stop, n int) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	p := sse.NewParser(resp.Body)
	last, read, after := "", 0, 0
	for {
		ev, err := p.Next()
		if err != nil {
			t.Fatalf("after %d frames: %v", read, err)
		}
		last = ev.ID
		switch ev.Type {
		case "live":
			st.live = ev.ID
		case "delete":
			delete(st.values, ev.Data) // a resumed snapshot's tombstones: keys deleted since the id
		case "message":
			var r keyed
			if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
				t.Fatalf("%q: %v", ev.Data, err)
			}
			if st.live == "" {
				if _, dup := st.values[r.K]; dup {
					t.Errorf("snapshot: key %s twice (%d after %d)", r.K, r.V, st.values[r.K])
				}
			}
			st.values[r.K] = r.V
			st.frames++
		default:
			t.Fatalf("unexpected %+v", ev)
		}
		read++
		if st.live != "" && ev.Type != "live" {
			after++
		}
		if (st.live != "" && after >= n) || read == stop {
			return last
		}
	}
}

// TestSnapshot: from=snapshot sends the latest value of each key (keys whose latest record is a tombstone
// left out), then "event: live" at the cut, then every record; a client that drops during the snapshot and
// resumes on another gateway with its id ends with the same state and gets "live" there. A gateway with a key
// index (topic-snapshot-index) gives the same snapshot from it, reading the topic from its start at startup
// whatever its prefill.
func TestSnapshot(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	const keys, versions = 60, 5
	want := map[string]int{}
	var recs []*kgo.Record
	for v := range versions {
		for k := range keys {
			key := fmt.Sprintf("k%02d", k)
			b, _ := json.Marshal(keyed{K: key, V: v})
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: b})
			want[key] = v
		}
	}
	for k := range 6 { // six keys deleted
		key := fmt.Sprintf("k%02d", k*7)
		recs = append(recs, &kgo.Record{Key: []byte(key)})
		delete(want, key)
	}
	kafkatest.Produce(t, cl, recs...)
	small := func(c *Config) { c.RingBytes = 64 << 10; c.Prefill = 0 }
	g1, g2 := startGateway(t, []string{topic}, small), startGateway(t, []string{topic}, nil)
	g3 := startGateway(t, []string{topic}, func(c *Config) {
		small(c)
		c.TopicSnapshotIndex = map[string]string{topic: "1MiB"}
	})
	g1.waitReady(t)
	g2.waitReady(t)
	g3.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// Whole, from Kafka (g1 has no prefill), from the ring (g2 read the topic at start) and from the key index
	// (g3).
	for _, g := range []*gateway{g1, g2, g3} {
		st := &snapshotState{values: map[string]int{}}
		readSnapshot(t, ctx, g.url+"/streams/"+topic+"?from=snapshot&heartbeat=0", st, -1, 0)
		if fmt.Sprint(st.values) != fmt.Sprint(want) || st.frames != len(want) {
			t.Fatalf("snapshot: %d frames %v\nwant %d: %v", st.frames, st.values, len(want), want)
		}
		cut, err := position.Parse(st.live)
		if err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		for i := range cut.Len() {
			total += cut.At(i).Offset + 1
		}
		if total != int64(len(recs)) {
			t.Errorf("the live frame's id %s covers %d records, want %d", st.live, total, len(recs))
		}
	}
	sel := `topic="` + topic + `"`
	if n, read := metricValue(t, g3, "ssegate_snapshots_total", `source="index"`), metricValue(t, g3, "ssegate_snapshots_total", `source="read"`); n != 1 || read != 0 {
		t.Errorf("the indexed gateway built %v snapshots from its index and read %v, want 1 and 0", n, read)
	}
	if keys := metricValue(t, g3, "ssegate_snapshot_index_keys", sel); keys != float64(len(want)+6) {
		t.Errorf("the key index holds %v keys, want %d (the deleted ones as tombstones)", keys, len(want)+6)
	}
	if n := metricValue(t, g1, "ssegate_snapshots_total", `source="index"`); n != 0 {
		t.Errorf("a gateway without an index built %v snapshots from one", n)
	}

	// Dropped after 20 frames, resumed on the other gateway; then a live record.
	st := &snapshotState{values: map[string]int{}}
	id := readSnapshot(t, ctx, g1.url+"/streams/"+topic+"?from=snapshot&heartbeat=0", st, 20, 0)
	if st.live != "" {
		t.Fatal("live after 20 frames: the snapshot is too small for the test")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		readSnapshot(t, ctx, g2.url+"/streams/"+topic+"?from=snapshot&heartbeat=0&last_event_id="+url.QueryEscape(id), st, -1, 1)
	}()
	time.Sleep(500 * time.Millisecond)
	b, _ := json.Marshal(keyed{K: "k01", V: 99})
	kafkatest.Produce(t, cl, &kgo.Record{Key: []byte("k01"), Value: b})
	<-done
	want["k01"] = 99
	if fmt.Sprint(st.values) != fmt.Sprint(want) || st.live == "" {
		t.Fatalf("resumed snapshot, then live: %v (live %q)\nwant %v", st.values, st.live, want)
	}
}

// TestSnapshotResumeRandomized: a client of a from=snapshot stream that drops at random moments and resumes
// each time on another of three gateways (one serving snapshots from its key index, one from its ring, one with
// a small ring whose resumes read Kafka), while keys keep changing and one is deleted and written again, gets
// each key's values in the order written, never one twice, a live event after each (re)snapshot, and in the
// end the topic's state.
func TestSnapshotResumeRandomized(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	gws := readyGateways(t, topic,
		func(c *Config) { c.TopicSnapshotIndex = map[string]string{topic: "1MiB"} }, nil, func(c *Config) { c.RingBytes = 64 << 10 })
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const keys, perKey = 20, 40
	final := map[string]int{}
	for k := range keys {
		final[fmt.Sprintf("k%02d", k)] = perKey - 1
	}
	produced := make(chan error, 1)
	go func() {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for v := range perKey {
			for k := range keys {
				key := fmt.Sprintf("k%02d", k)
				b, _ := json.Marshal(keyed{key, v, ""})
				rec := &kgo.Record{Key: []byte(key), Value: b}
				if k == 0 && v == perKey/2 {
					rec.Value = nil // k00 deleted half way, then written again
				}
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					produced <- err
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		produced <- nil
	}()
	got := map[string]int{}
	highest := map[string]int{} // the highest value each key ever had here, deletions aside
	lives := 0
	sessions := randomSessions(t, ctx, gws, "/streams/"+topic+"?from=snapshot&heartbeat=0", func(session int, from string, ev sse.Event) {
		switch ev.Type {
		case "live":
			lives++
		case "delete":
			delete(got, ev.Data)
		case "message":
			var r keyed
			if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
				t.Fatalf("session %d: %q: %v", session, ev.Data, err)
			}
			if h, ok := highest[r.K]; ok && r.V <= h {
				t.Fatalf("session %d on gateway %d: key %s value %d after %d (from id %q)", session, session%3, r.K, r.V, h, from)
			}
			got[r.K], highest[r.K] = r.V, r.V
		default:
			t.Fatalf("session %d: %+v", session, ev)
		}
	}, afterProducing(t, produced, func() bool { return fmt.Sprint(got) == fmt.Sprint(final) }))
	if lives == 0 || metricValue(t, gws[0], "ssegate_snapshots_total", `source="index"`) == 0 {
		t.Errorf("%d live events, %v snapshots from the index: the test did not test them", lives, metricValue(t, gws[0], "ssegate_snapshots_total", `source="index"`))
	}
	t.Logf("%d sessions, %d live events", sessions, lives)
}
