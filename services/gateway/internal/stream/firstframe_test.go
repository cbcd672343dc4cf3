package stream

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// heldLog answers the first fetch of a replay and holds the others until release is closed.
type heldLog struct {
	*memlog.Cluster
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (h *heldLog) Fetch(ctx context.Context, topic string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	if n > 1 {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		}
	}
	return h.Cluster.Fetch(ctx, topic, partition, offset)
}

var _ replay.Log = (*heldLog)(nil)

// TestResumeFirstFrameNotHeldBack: a resume from Kafka writes its first frame as soon as the replay has it,
// not once it has gathered a buffer's worth: here the rest of the replay is held up, and the client still
// gets the first record; then everything else once, in order, up to the live record.
func TestResumeFirstFrameNotHeldBack(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for o := range 300 {
		produce(kc, "t", 0, fmt.Sprintf("r%d", o))
	}
	h := &heldLog{Cluster: kc, release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	pd := startPod(t, kc, "t", podOpts{replayLog: h, feed: func(c *feed.Config) { c.Prefill = 0 }})
	pd.waitReady(t)
	produce(kc, "t", 0, "live") // the ring holds only this one
	waitUntil(t, "the live record in the ring", func() bool { return pd.topic.Ring.Stats().Frames == 1 })
	c := pd.open(t, "", "v1:0-0")
	if ev := c.next(t); ev.Data != "r1" || ev.ID != "v1:0-1" {
		t.Fatalf("first event %+v, want r1 at v1:0-1", ev)
	}
	release()
	for o := 2; o < 300; o++ {
		if ev := c.next(t); ev.Data != fmt.Sprintf("r%d", o) {
			t.Fatalf("event %q, want r%d", ev.Data, o)
		}
	}
	if ev := c.next(t); ev.Data != "live" {
		t.Fatalf("event %q after the replay, want the live record", ev.Data)
	}
}
