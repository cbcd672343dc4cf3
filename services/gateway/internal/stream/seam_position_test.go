package stream

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
