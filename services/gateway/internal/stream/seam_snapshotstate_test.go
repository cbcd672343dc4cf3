package stream

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// snapshotState opens a from=snapshot stream (query: more parameters) and returns the state its client holds at
// the live frame: each key's value (the values are JSON naming their key, "k"), less the keys a delete frame
// took out.
func snapshotState(t *testing.T, pd *pod, query string) map[string]string {
	t.Helper()
	c := pd.open(t, "?from=snapshot"+query, "")
	state := map[string]string{}
	for {
		ev := c.next(t)
		switch ev.Type {
		case LiveEvent:
			_ = c.body.Close()
			return state
		case feed.DeleteEvent:
			delete(state, ev.Data)
		default:
			var v struct{ K string }
			if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
				t.Fatalf("frame %+v: %v", ev, err)
			}
			state[v.K] = ev.Data
		}
	}
}

// stateRecord is a record of a key in partition p: a JSON value {"k","n"} of event type typ, or a tombstone
// when n is negative.
func stateRecord(p int32, key string, n int, typ string) *kgo.Record {
	r := &kgo.Record{Partition: p, Key: []byte(key)}
	if n >= 0 {
		r.Value = fmt.Appendf(nil, `{"k":%q,"n":%d}`, key, n)
	}
	if typ != "" {
		r.Headers = []kgo.RecordHeader{{Key: "event", Value: []byte(typ)}}
	}
	return r
}

// TestSeamSnapshotFilteredState: with event=, or filter=, a snapshot holds the latest state of each key the
// stream may see, read from the topic as from a key index: a key whose tombstone, or whose latest value, the
// filters do not pass is not in it. Before, a snapshot read from the topic kept the older value that passed,
// and a pod with a key index answered differently.
func TestSeamSnapshotFilteredState(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	for _, r := range []*kgo.Record{
		stateRecord(0, "k1", 1, "created"), stateRecord(0, "k1", 200, "updated"),
		stateRecord(0, "k2", 150, "created"), stateRecord(0, "k2", 5, "updated"), // stopped matching n > 100
		stateRecord(1, "k3", 300, "created"), stateRecord(1, "k3", -1, ""), // deleted
		stateRecord(1, "k4", 120, "created"), stateRecord(1, "k4", 130, "archived"),
		stateRecord(1, "k5", 500, "created"),
	} {
		kc.Produce("t", r)
	}
	read := startPod(t, kc, "t", podOpts{})
	indexed := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.KeyIndex = map[string]int64{"t": 1 << 20} }})
	read.waitReady(t)
	indexed.waitReady(t)
	val := func(k string, n int) string { return fmt.Sprintf(`{"k":%q,"n":%d}`, k, n) }
	for _, tc := range []struct {
		query string
		want  map[string]string
	}{
		{"&filter=value.n%20%3E%20100", map[string]string{"k1": val("k1", 200), "k4": val("k4", 130), "k5": val("k5", 500)}},
		{"&event=created&event=updated", map[string]string{"k1": val("k1", 200), "k2": val("k2", 5), "k5": val("k5", 500)}},
		{"&event=created&key=k1&key=k3&key=k5", map[string]string{"k5": val("k5", 500)}},
	} {
		for _, pd := range []*pod{read, indexed} {
			if got := snapshotState(t, pd, tc.query); !maps.Equal(got, tc.want) {
				t.Errorf("%s, index %v: %v, want %v", tc.query, pd == indexed, got, tc.want)
			}
		}
	}
	if n := indexed.stats.SnapshotsIndexed.Load(); n != 3 {
		t.Fatalf("the indexed pod built %d snapshots from its index, want 3", n)
	}
	// A resume of a filtered snapshot: a key seen passing since the id that then stopped matching is deleted
	// (the client may have had it from before the id); one never seen passing is not named.
	cut := read.topic.Position().String()
	kc.Produce("t", stateRecord(0, "k6", 200, ""))
	kc.Produce("t", stateRecord(0, "k6", 5, ""))
	kc.Produce("t", stateRecord(1, "k7", 5, ""))
	kc.Produce("t", stateRecord(1, "k5", 600, ""))
	waitUntil(t, "the pod to read them", func() bool { return read.topic.Ring.Stats().Frames >= 13 })
	c := read.open(t, "?from=snapshot&filter=value.n%20%3E%20100", cut)
	var got []string
	for ev := c.next(t); ev.Type != LiveEvent; ev = c.next(t) {
		got = append(got, ev.Type+" "+ev.Data)
	}
	slices.Sort(got) // across partitions, in the order the pod read them
	if want := []string{"delete k6", `message {"k":"k5","n":600}`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a resumed filtered snapshot: %v, want %v", got, want)
	}
}

// TestSeamSnapshotPartsState: a snapshot over SnapshotMaxBytes goes out in parts, and a key an earlier part
// sent gets its tombstone when it is deleted (or, filtered, stops matching) later: the client's state at the
// live frame is the topic's. A key no part sent is never named. Before, a fresh snapshot left every tombstone
// out, and the client kept a key the topic had deleted.
func TestSeamSnapshotPartsState(t *testing.T) {
	was := SnapshotMaxBytes
	SnapshotMaxBytes = 1 // every record is a part
	t.Cleanup(func() { SnapshotMaxBytes = was })
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for _, r := range []*kgo.Record{
		stateRecord(0, "a", 200, ""), stateRecord(0, "b", 300, ""), stateRecord(0, "a", -1, ""),
		stateRecord(0, "b", 5, ""), stateRecord(0, "c", 7, ""), stateRecord(0, "c", -1, ""),
	} {
		kc.Produce("t", r)
	}
	// The ring holds the last record alone: the snapshot is read from Kafka, record by record, a part each.
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 1 }})
	pd.waitReady(t)
	if got, want := snapshotState(t, pd, ""), map[string]string{"b": `{"k":"b","n":5}`}; !maps.Equal(got, want) {
		t.Fatalf("in parts: %v, want %v", got, want)
	}
	c := pd.open(t, "?from=snapshot&filter=value.n%20%3E%20100", "")
	var got []string
	for ev := c.next(t); ev.Type != LiveEvent; ev = c.next(t) {
		got = append(got, ev.Type+" "+ev.Data)
	}
	// a: sent, then deleted; b: sent, then stopped matching; c never matched, and is never named.
	want := []string{`message {"k":"a","n":200}`, `message {"k":"b","n":300}`, "delete a", "delete b"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("filtered, in parts: %v, want %v", got, want)
	}
}
