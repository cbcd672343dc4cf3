package stream

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// snapshotOf opens a from=snapshot stream (query: more parameters) and returns its snapshot per partition (the
// data of its frames, in the order they came) and the cut (the live frame's id).
func snapshotOf(t *testing.T, pd *pod, query string) (map[int32][]string, string) {
	t.Helper()
	c := pd.open(t, "?from=snapshot"+query, "")
	got := map[int32][]string{}
	var prev position.Vector
	for {
		ev := c.next(t)
		if prev.Len() == 0 {
			// The opening block (an id alone, which the parser does not dispatch) names where each partition
			// starts: the first frame's partition is the one that moved from there.
			opening, _, _ := strings.Cut(strings.TrimPrefix(raw(c), "retry: 3000\nid: "), "\n")
			prev = position.MustParse(opening)
		}
		if ev.Type == LiveEvent {
			_ = c.body.Close()
			return got, ev.ID
		}
		v := position.MustParse(ev.ID)
		moved := int32(-1)
		for i := range v.Len() {
			if o, ok := prev.Offset(v.At(i).Partition); !ok || o != v.At(i).Offset {
				moved = v.At(i).Partition
			}
		}
		got[moved] = append(got[moved], ev.Data)
		prev = v
	}
}

// keyedState writes the test's state into topic t of kc: 3 partitions, 30 keys written 3 times (each key in
// one partition), a tombstone of k7, and records below the log start that retention removed (k0's only
// value among them: k0 is not in the state).
func keyedState(kc *memlog.Cluster) {
	kc.CreateTopic("t", 3)
	kc.Produce("t", &kgo.Record{Partition: 0, Key: []byte("k0"), Value: []byte("k0=old")})
	for v := range 3 {
		for k := 1; k < 30; k++ {
			kc.Produce("t", &kgo.Record{Partition: int32(k % 3), Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d=%d", k, v)})
		}
	}
	kc.Produce("t", &kgo.Record{Partition: 1, Key: []byte("k7")})
	kc.DeleteRecords("t", 0, 1)
}

// TestSeamSnapshotFromIndex: a pod with a key index answers a snapshot from it, and answers the same as a pod
// that reads the topic: each partition's frames, the cut, with a key filter too; its prefill reads the topic
// from its start whatever the prefill setting, so the index is complete.
func TestSeamSnapshotFromIndex(t *testing.T) {
	kc := memlog.New()
	keyedState(kc)
	read := startPod(t, kc, "t", podOpts{})
	indexed := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) {
		c.KeyIndex = map[string]int64{"t": 1 << 20}
		c.Prefill = 2 // the index reads from the start anyway
	}})
	read.waitReady(t)
	indexed.waitReady(t)
	for _, q := range []string{"", "&key=k4&key=k7&key=k8"} {
		want, wantCut := snapshotOf(t, read, q)
		got, cut := snapshotOf(t, indexed, q)
		if cut != wantCut || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("query %q: from the index %v cut %s; read from the topic %v cut %s", q, got, cut, want, wantCut)
		}
		if q == "" && (len(got[0])+len(got[1])+len(got[2]) != 28 || slices.Contains(got[1], "k7=2")) {
			t.Fatalf("snapshot %v: want 28 keys (k0 below the log start, k7 deleted)", got)
		}
	}
	if n, r := indexed.stats.SnapshotsIndexed.Load(), indexed.stats.SnapshotsRead.Load(); n != 2 || r != 0 {
		t.Fatalf("the indexed pod built %d snapshots from its index and read %d, want 2 and 0", n, r)
	}
	if n := read.stats.SnapshotsIndexed.Load(); n != 0 {
		t.Fatalf("the pod without an index built %d from one", n)
	}
	// After the cut, the stream goes on live from the index's position.
	c := indexed.open(t, "?from=snapshot", "")
	for ev := c.next(t); ev.Type != LiveEvent; ev = c.next(t) {
	}
	kc.Produce("t", &kgo.Record{Partition: 2, Key: []byte("k2"), Value: []byte("k2=live")})
	if ev := c.next(t); ev.Data != "k2=live" {
		t.Fatalf("after the cut: %+v", ev)
	}
}

// TestSeamSnapshotIndexGivesUp: an index that outgrows its bound, or meets a record without a key, gives up
// for good; snapshots are then read from the topic, and are the same.
func TestSeamSnapshotIndexGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound int64
		more  *kgo.Record
	}{
		{"outgrown", 2000, nil},
		{"a record without a key", 1 << 20, &kgo.Record{Partition: 2, Value: []byte("no key")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := memlog.New()
			keyedState(kc)
			if tc.more != nil {
				kc.Produce("t", tc.more)
			}
			read := startPod(t, kc, "t", podOpts{})
			indexed := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.KeyIndex = map[string]int64{"t": tc.bound} }})
			read.waitReady(t)
			indexed.waitReady(t)
			want, wantCut := snapshotOf(t, read, "")
			got, cut := snapshotOf(t, indexed, "")
			if cut != wantCut || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%v cut %s, want %v cut %s", got, cut, want, wantCut)
			}
			st, ok := indexed.topic.Ring.KeyIndexStats()
			if !ok || st.Dropped == "" || st.Keys != 0 || indexed.stats.SnapshotsIndexed.Load() != 0 || indexed.stats.SnapshotsRead.Load() != 1 {
				t.Fatalf("index %+v (%v); snapshots indexed %d, read %d: want it given up, and the snapshot read", st, ok,
					indexed.stats.SnapshotsIndexed.Load(), indexed.stats.SnapshotsRead.Load())
			}
		})
	}
}

// TestSeamSnapshotIndexRetention: retention that passes a key's latest record takes the key out of the index,
// as out of the log: the next snapshot lacks it, as one read from the topic does.
func TestSeamSnapshotIndexRetention(t *testing.T) {
	kc := memlog.New()
	keyedState(kc)
	indexed := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.KeyIndex = map[string]int64{"t": 1 << 20} }})
	indexed.waitReady(t)
	// Partition 1 holds k1, k4, ... k28 (10 keys) at versions 0, 1 and 2 (offsets 0 to 29), then k7's
	// tombstone: its first 25 records take the latest values of k1, k4, k10 and k13 with them.
	kc.DeleteRecords("t", 1, 25)
	read := startPod(t, kc, "t", podOpts{})
	read.waitReady(t)
	waitUntil(t, "the index to drop what retention removed", func() bool {
		got, _ := snapshotOf(t, indexed, "")
		want, _ := snapshotOf(t, read, "")
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	got, _ := snapshotOf(t, indexed, "")
	if want := []string{"k16=2", "k19=2", "k22=2", "k25=2", "k28=2"}; !slices.Equal(got[1], want) {
		t.Fatalf("partition 1 after retention: %v, want %v", got[1], want)
	}
}
