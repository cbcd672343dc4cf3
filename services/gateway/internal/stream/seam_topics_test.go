package stream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// topicOfEvent is the topic of a frame of a stream of several topics: the first of its id.
func topicOfEvent(t *testing.T, id string) (string, position.Vector) {
	t.Helper()
	tps, err := position.ParseTopics(id)
	if err != nil {
		t.Fatalf("id %q: %v", id, err)
	}
	return tps[0].Topic, tps[0].Pos
}

// TestSeamTopicsRetentionOneOfThree: retention that passed one topic of three is that topic's resync alone;
// the other two resume exactly from the id, and the third goes on from its tail.
func TestSeamTopicsRetentionOneOfThree(t *testing.T) {
	kc := memlog.New()
	for _, name := range []string{"a", "b", "c"} {
		kc.CreateTopic(name, 1)
		for i := range 20 {
			produce(kc, name, 0, fmt.Sprintf("%s%d", name, i))
		}
	}
	kc.DeleteRecords("b", 0, 10)
	pd := startPod(t, kc, "a", podOpts{more: []string{"b", "c"}})
	pd.waitReady(t)
	c := pd.open(t, "a,b,c", "v1:a~0-4,b~0-4,c~0-4")
	next := map[string]int{"a": 5, "c": 5}
	resyncs := 0
	for next["a"] < 20 || next["c"] < 20 || resyncs == 0 {
		ev := c.next(t)
		topic, _ := topicOfEvent(t, ev.ID)
		if ev.Type == "resync" {
			d := resyncData(t, ev)
			if topic != "b" || d.Topic != "b" || d.Reason != ResyncRetention || d.Partitions[0].Requested != 5 || d.Partitions[0].LowWatermark != 10 {
				t.Fatalf("resync %+v in %s, want b's retention from 5 past 10", d, ev.ID)
			}
			resyncs++
			continue
		}
		if want := fmt.Sprintf("%s%d", topic, next[topic]); ev.Data != want {
			t.Fatalf("event %+v, want %s", ev, want)
		}
		next[topic]++
	}
	produce(kc, "b", 0, "b20")
	if ev := c.next(t); ev.Data != "b20" || !strings.HasPrefix(ev.ID, "v1:b~0-20,a~0-19,c~0-19") || resyncs != 1 {
		t.Fatalf("after the others: %+v with %d resyncs, want b20 after one resync", ev, resyncs)
	}
}

// TestSeamTopicsRecreated: a topic deleted and created again inside a stream of two is that topic's "ahead"
// resync; the other topic goes on untouched.
func TestSeamTopicsRecreated(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("a", 1)
	kc.CreateTopic("b", 1)
	pd := startPod(t, kc, "a", podOpts{writers: 2, more: []string{"b"}})
	pd.waitReady(t)
	c := pd.open(t, "a,b", "")
	for i := range 5 {
		produce(kc, "a", 0, fmt.Sprint("a", i))
		produce(kc, "b", 0, fmt.Sprint("b", i))
	}
	for range 10 {
		c.next(t)
	}
	kc.DeleteTopic("b")
	kc.CreateTopic("b", 1)
	produce(kc, "b", 0, "new-b0")
	ev := c.next(t)
	if topic, _ := topicOfEvent(t, ev.ID); topic != "b" || resyncData(t, ev).Reason != ResyncAhead {
		t.Fatalf("%+v, want b's ahead resync", ev)
	}
	produce(kc, "a", 0, "a5")
	produce(kc, "b", 0, "new-b1")
	got := map[string]string{}
	for len(got) < 2 || got["b"] == "new-b0" {
		ev := c.next(t)
		topic, pos := topicOfEvent(t, ev.ID)
		got[topic] = ev.Data
		if off, _ := pos.Offset(0); topic == "a" && (ev.Data != "a5" || off != 5) {
			t.Fatalf("a after b's recreation: %+v", ev)
		}
	}
	if got["b"] != "new-b1" {
		t.Fatalf("b after its recreation: %v", got)
	}
}

// TestSeamSnapshotTombstoneAtCut: a key whose latest record at the cut is a tombstone is not in the snapshot;
// its next value after the cut comes live.
func TestSeamSnapshotTombstoneAtCut(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	kc.Produce("t", &kgo.Record{Key: []byte("k1"), Value: []byte("k1=1")})
	kc.Produce("t", &kgo.Record{Key: []byte("k2"), Value: []byte("k2=1")})
	kc.Produce("t", &kgo.Record{Key: []byte("k1")}) // the tombstone, the last record before the cut
	pd := startPod(t, kc, "t", podOpts{})
	pd.waitReady(t)
	c := pd.open(t, "?from=snapshot", "")
	if ev := c.next(t); ev.Data != "k2=1" {
		t.Fatalf("snapshot: %+v, want only k2", ev)
	}
	if ev := c.next(t); ev.Type != LiveEvent || ev.ID != "v1:0-2" {
		t.Fatalf("%+v, want live at the tombstone's offset", ev)
	}
	kc.Produce("t", &kgo.Record{Key: []byte("k1"), Value: []byte("k1=2")})
	if ev := c.next(t); ev.Data != "k1=2" || ev.ID != "v1:0-3" {
		t.Fatalf("after the cut: %+v", ev)
	}
}

// TestSeamSnapshotsWaitTheirTurn: snapshots are built a few at a time (Config.Snapshots): one that comes while
// every slot is taken gets its opening and keep-alives, and its snapshot once a slot is free.
func TestSeamSnapshotsWaitTheirTurn(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	kc.Produce("t", &kgo.Record{Key: []byte("k"), Value: []byte("k=1")})
	pd := startPod(t, kc, "t", podOpts{})
	pd.waitReady(t)
	for range cap(pd.srv.snapshots) {
		pd.srv.snapshots <- struct{}{}
	}
	c := pd.open(t, "?from=snapshot&heartbeat=100", "")
	waitUntil(t, "keep-alives while the snapshot waits", func() bool { return c.keepAlives() >= 2 })
	select {
	case ev := <-c.evs:
		t.Fatalf("%+v before a snapshot slot was free", ev)
	default:
	}
	<-pd.srv.snapshots
	if ev := c.next(t); ev.Data != "k=1" {
		t.Fatalf("%+v, want the snapshot", ev)
	}
	if ev := c.next(t); ev.Type != LiveEvent {
		t.Fatalf("%+v, want live", ev)
	}
	for range cap(pd.srv.snapshots) - 1 {
		<-pd.srv.snapshots
	}
}

// TestSeamSnapshotPartitionsAdded: partitions added while a snapshot waits to be built: the cut (the live
// frame's id) says per partition what the snapshot holds, the new partition included when its records were
// read into it, and nothing is missed or repeated across it.
func TestSeamSnapshotPartitionsAdded(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	for k := range 6 {
		kc.Produce("t", &kgo.Record{Partition: int32(k % 2), Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d=1", k)})
	}
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.MetadataInterval = 20 * time.Millisecond }})
	pd.waitReady(t)
	for range cap(pd.srv.snapshots) {
		pd.srv.snapshots <- struct{}{}
	}
	c := pd.open(t, "?from=snapshot&heartbeat=100", "")
	waitUntil(t, "the stream to wait for its snapshot", func() bool { return c.keepAlives() >= 1 })
	kc.AddPartitions("t", 3)
	kc.Produce("t", &kgo.Record{Partition: 2, Key: []byte("new"), Value: []byte("new=1")})
	waitUntil(t, "the new partition in the ring", func() bool { _, ok := pd.topic.Position().Offset(2); return ok })
	for range cap(pd.srv.snapshots) {
		<-pd.srv.snapshots
	}
	seen := map[string]bool{}
	var cut position.Vector
	for cut.Len() == 0 {
		ev := c.next(t)
		if ev.Type == LiveEvent {
			cut = position.MustParse(ev.ID)
			break
		}
		if seen[ev.Data] {
			t.Fatalf("snapshot: %+v twice", ev)
		}
		seen[ev.Data] = true
	}
	if cut.String() != "v1:0-2.1-2" && cut.String() != "v1:0-2.1-2.2-0" {
		t.Fatalf("cut %s, want partitions 0 and 1 at 2 (and 2 at 0 if the snapshot read it)", cut)
	}
	if _, inCut := cut.Offset(2); inCut != seen["new=1"] || len(seen) != 6+map[bool]int{true: 1}[inCut] {
		t.Fatalf("cut %s with snapshot %v: the new partition's record must be in the snapshot exactly when the cut covers it", cut, seen)
	}
	kc.Produce("t", &kgo.Record{Partition: 2, Key: []byte("new"), Value: []byte("new=2")})
	want := []string{"new=2"}
	if !seen["new=1"] {
		want = []string{"new=1", "new=2"}
	}
	for _, w := range want {
		if ev := c.next(t); ev.Data != w {
			t.Fatalf("after the cut: %+v, want %s", ev, w)
		}
	}
}
