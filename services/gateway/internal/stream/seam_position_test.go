package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestSeamKeySnapshotPartitionsAdded: a key= from=snapshot stream whose topic gets partitions while its
// snapshot is built re-joins once, with its key's partitions for the new count, and reaches its live frame.
// Before, it re-joined by its own copy of the re-join, which kept the old generation, and asked to re-join
// again for ever: a core spinning, a snapshot slot held, never live.
func TestSeamKeySnapshotPartitionsAdded(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	key, old, moved := keyMoving(t, "t", 2)
	kc.Produce("t", &kgo.Record{Partition: old, Key: []byte(key), Value: []byte("v1")})
	kc.Produce("t", &kgo.Record{Partition: old, Key: []byte("other"), Value: []byte("x")})
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.MetadataInterval = 20 * time.Millisecond }})
	pd.waitReady(t)
	for range cap(pd.srv.snapshots) {
		pd.srv.snapshots <- struct{}{}
	}
	c := pd.open(t, "?from=snapshot&heartbeat=100&key="+key, "")
	waitUntil(t, "the stream to wait for its snapshot", func() bool { return c.keepAlives() >= 1 })
	gen := pd.f.Topic("t").Generation()
	kc.AddPartitions("t", 1)
	kc.Produce("t", &kgo.Record{Partition: moved, Key: []byte(key), Value: []byte("v2")})
	waitUntil(t, "the pod to see the new partition", func() bool { return pd.f.Topic("t").Generation() != gen })
	for range cap(pd.srv.snapshots) {
		<-pd.srv.snapshots
	}
	var got []string
	for {
		ev := c.next(t)
		if ev.Type == LiveEvent {
			break
		}
		got = append(got, ev.Data)
	}
	// v1 is in the old partition, v2 in the new one: a key's records across partitions are not conflated
	// together, so the snapshot may hold both; v2 comes in it or right after the cut.
	if len(got) == 0 || got[0] != "v1" {
		t.Fatalf("snapshot %v, want v1 first", got)
	}
	if len(got) == 1 {
		if ev := c.next(t); ev.Data != "v2" {
			t.Fatalf("after the cut: %+v, want v2", ev)
		}
	}
	waitUntil(t, "the snapshot slot to be given back", func() bool { return len(pd.srv.snapshots) == 0 })
}

// retainedTopic writes topic t of kc: 3 partitions of 20 records each ("p<partition>-<offset>"), then moves
// every partition's log start to 3, as retention does.
func retainedTopic(kc *memlog.Cluster) {
	kc.CreateTopic("t", 3)
	for q := range int32(3) {
		for o := range 20 {
			kc.Produce("t", &kgo.Record{Partition: q, Value: fmt.Appendf(nil, "p%d-%d", q, o)})
		}
		kc.DeleteRecords("t", q, 3)
	}
}

// records reads n records (with their own ids) from c, failing on any other event.
func (c *seamClient) records(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		ev := c.next(t)
		if ev.Type != "message" {
			t.Fatalf("after %d records: %+v, want records only", len(out), ev)
		}
		out = append(out, ev.Data)
	}
	return out
}

// TestSeamEarliestNamesLogStarts: a from=earliest (or from=snapshot) stream of a topic whose log starts above
// 0 says in its first id where every partition starts (its log start less one), and every id after it keeps
// the partitions it has not had a record of yet: a client that drops before it saw every partition resumes
// with every stored record, on this pod or another, and no resync. A leaving pod sends such a stream away
// with no id at all (it does not wait for Kafka's answer), and its reconnect, as its URL says, is the same
// start. Before, the first id was "v1:" and a resume from it was a retention resync that skipped every stored
// record of the partitions not seen yet.
func TestSeamEarliestNamesLogStarts(t *testing.T) {
	kc := memlog.New()
	retainedTopic(kc)
	a, b := startPod(t, kc, "t", podOpts{writers: 2}), startPod(t, kc, "t", podOpts{})
	a.waitReady(t)
	b.waitReady(t)
	for _, from := range []string{"earliest", "snapshot"} {
		c := a.open(t, "?from="+from, "")
		first := c.next(t)
		if first.Type != "message" {
			t.Fatalf("from=%s: first event %+v", from, first)
		}
		opening := raw(c)
		if !strings.Contains(opening, "id: v1:0-2.1-2.2-2\n\n") {
			t.Fatalf("from=%s: the stream opened %q, want the id v1:0-2.1-2.2-2 first", from, opening)
		}
		_ = c.body.Close()
		for _, pd := range []*pod{a, b} {
			if got := pd.open(t, "?from="+from, "v1:0-2.1-2.2-2").records(t, 51); len(got) != 51 {
				t.Fatalf("from=%s: a resume from the opening id: %v", from, got)
			}
		}
	}
	// Dropped after its first record, of partition 0: its id names partitions 1 and 2 at their starts.
	c := a.open(t, "?from=earliest", "")
	if ev := c.next(t); ev.Data != "p0-3" && ev.Data != "p1-3" && ev.Data != "p2-3" {
		t.Fatalf("first record %+v", ev)
	} else {
		v := position.MustParse(ev.ID)
		_ = c.body.Close()
		want := 51 - 1
		got := b.open(t, "?from=earliest", ev.ID).records(t, want)
		for q := range int32(3) {
			if o, _ := v.Offset(q); o < 2 {
				t.Fatalf("id %s of the first record does not name partition %d's start", ev.ID, q)
			}
		}
		if slices.Contains(got, ev.Data) {
			t.Fatalf("the resume repeats %s: %v", ev.Data, got)
		}
	}
	a.srv.Leave()
	for _, from := range []string{"earliest", "snapshot"} {
		body := a.open(t, "?from="+from, "").ended(t)
		if !strings.HasPrefix(body, "retry: ") || strings.Contains(body, "id:") {
			t.Fatalf("from=%s on a leaving pod: %q, want a retry line and no id", from, body)
		}
		// Its client reconnects as its URL says, with no id: every stored record.
		if got := b.open(t, "?from="+from, "").records(t, 51); len(got) != 51 {
			t.Fatalf("from=%s: the reconnect: %v", from, got)
		}
	}
}

// TestSeamEarliestWithoutWatermarks: when Kafka cannot say where the partitions start, a from=earliest stream
// ends after its retry line with no id (its client reconnects as its URL says), not with an id that names no
// partition, which a resume would read as offset 0 (and a retention resync). Before, it sent "v1:".
func TestSeamEarliestWithoutWatermarks(t *testing.T) {
	kc := memlog.New()
	retainedTopic(kc)
	pd := startPod(t, kc, "t", podOpts{})
	pd.waitReady(t)
	pd.topic.Watermarks = func(context.Context, time.Duration) (map[int32]feed.Watermarks, error) {
		return nil, errors.New("kafka down")
	}
	if body := pd.open(t, "?from=earliest", "").ended(t); body != "retry: 3000\n" {
		t.Fatalf("from=earliest without the watermarks: %q, want the retry line alone", body)
	}
}

// raw returns every byte c has had so far.
func raw(c *seamClient) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw.String()
}

// TestSeamTopicsNotCreatedHoldNoSlot: a stream of several topics whose id names a topic not created yet
// ("b~") serves its other topic at once, and waits for b holding none of the pod's catch-up and snapshot
// slots: a resume from Kafka and a snapshot of another client still get theirs. Before, b said nothing until
// it was created, and the other topic's catch-up waited for it inside its first write, holding its catch-up
// slot (and its snapshot's): a few such clients stalled every resume from Kafka and every snapshot on the pod.
func TestSeamTopicsNotCreatedHoldNoSlot(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for i := range 20 {
		kc.Produce("t", &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "r%d", i)})
	}
	// A ring that holds the last record only: resumes read from Kafka.
	pd := startPod(t, kc, "t", podOpts{more: []string{"b"}, feed: func(c *feed.Config) { c.Prefill = 1 }})
	pd.srv.live = newLiveFirst(1)
	waitUntil(t, "topic t to be served", func() bool { return pd.f.Topic("t").Exists() })
	var waiting []*seamClient
	for _, from := range []string{"", "?from=snapshot"} {
		for range cap(pd.srv.snapshots) {
			c := pd.open(t, "t,b"+from, "v1:t~0-0,b~")
			if ev := c.next(t); ev.Data != "r1" {
				t.Fatalf("%q: the stream of t and b (b not created): %+v, want t's record r1 at once", from, ev)
			}
			waiting = append(waiting, c)
		}
	}
	if got := pd.open(t, "", "v1:0-10").records(t, 9); got[0] != "r11" {
		t.Fatalf("a resume from Kafka while streams wait for b: %v", got)
	}
	snap := pd.open(t, "?from=snapshot", "")
	for ev := snap.next(t); ev.Type != LiveEvent; ev = snap.next(t) {
	}
	kc.CreateTopic("b", 1)
	kc.Produce("b", &kgo.Record{Value: []byte("b0")})
	for _, c := range waiting {
		for ev := c.next(t); ev.Data != "b0"; ev = c.next(t) {
		}
	}
}

// TestSeamTopicsLeavingEnds: on a leaving pod, a stream of several topics whose id names a topic not created
// yet ("b~") and gives the other a partition it does not have (a resync before its opening) says where it is
// and ends. Before, b ended without a word, and the other topic's resync waited for b's id for ever, after its
// client had left too.
func TestSeamTopicsLeavingEnds(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	pd := startPod(t, kc, "t", podOpts{more: []string{"b"}})
	waitUntil(t, "topic t to be served", func() bool { return pd.f.Topic("t").Exists() })
	pd.srv.Leave()
	body := pd.open(t, "t,b", "v1:t~5-0,b~").ended(t)
	if !strings.Contains(body, `"reason":"invalid-id"`) || !strings.Contains(body, "b~") {
		t.Fatalf("the stream of a leaving pod: %q, want the invalid-id resync with an id naming b", body)
	}
}

// TestMuxTopicEndsUnplaced: a topic whose stream ends without saying where it is (on a leaving pod, it did not
// wait for Kafka) ends the stream of several topics: another topic's resync, waiting for every topic's id,
// fails rather than wait for ever.
func TestMuxTopicEndsUnplaced(t *testing.T) {
	fa, fb := newFeeder(t, 1<<20), newFeeder(t, 1<<20)
	w := &memWriter{header: http.Header{}, failAfter: -1}
	m := newMux([]TopicStream{{Topic: &Topic{Name: "a", Ring: fa.rg}}, {Topic: &Topic{Name: "b", Ring: fb.rg}}}, &httpSink{w: w, rc: http.NewResponseController(w)})
	m.gone = make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		_, err := m.write(0, 0, [][]byte{[]byte("id: v1:\nevent: resync\ndata: {}\n\n")}, time.Second)
		wrote <- err
	}()
	if r := m.finish(1, ReasonShutdown, false); r != ReasonShutdown {
		t.Fatalf("finish: %v", r)
	}
	select {
	case err := <-wrote:
		if !errors.Is(err, errMuxEnded) {
			t.Fatalf("the waiting write: %v, want errMuxEnded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write waiting for a topic that ended without an id did not end")
	}
}
