package feed_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// follower is a cluster read from a follower that stops answering while paused (memlog.PausePolls): the feed
// is told of a stall (Stalled), which wakes its poll, and its move back to the leaders (Reassign) unpauses it,
// as the leader answers.
type follower struct {
	*memlog.Client
	kc *memlog.Cluster

	mu        sync.Mutex
	cancel    context.CancelFunc
	lost      bool
	reassigns []map[string]map[int32]int64
}

func (f *follower) Following() bool { return true }

func (f *follower) Stalled() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = true
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *follower) ReplicaLost() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	lost := f.lost
	f.lost = false
	return lost
}

func (f *follower) Poll(ctx context.Context) ([]feed.Fetched, error) {
	pctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	defer cancel()
	out, err := f.Client.Poll(pctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		return nil, nil // woken by Stalled
	}
	return out, err
}

func (f *follower) Reassign(parts map[string]map[int32]int64) {
	f.mu.Lock()
	f.reassigns = append(f.reassigns, parts)
	f.mu.Unlock()
	f.Client.Reassign(parts)
	f.kc.PausePolls(false)
}

// TestStalledFollowerBackToLeader: a partition with records to read that the feed has not read for the stall
// time is read from the leader again, from the exact offset after the last record read, and the rest of the
// records arrive once each, in order.
func TestStalledFollowerBackToLeader(t *testing.T) {
	defer feed.SetReplicaStall(300 * time.Millisecond)()
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			kc.Produce("t", &kgo.Record{Value: fmt.Appendf(nil, "%d", i)})
		}
	}
	produce(0, 5)
	cl := &follower{Client: kc.Client(), kc: kc}
	f, err := feed.NewWith(feed.Config{Topics: []string{"t"}, RingBytes: 1 << 20, MetadataInterval: 50 * time.Millisecond, Prefill: 100}, cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	frames := func() int { return f.Topic("t").Ring().Stats().Frames }
	waitFor(t, func() bool { return frames() == 5 })
	kc.PausePolls(true) // the follower stops answering
	produce(5, 10)
	waitFor(t, func() bool { return frames() == 10 })
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.reassigns) != 1 || fmt.Sprint(cl.reassigns[0]) != "map[t:map[0:5]]" {
		t.Fatalf("moves back to the leader: %v, want one, of partition 0 from offset 5", cl.reassigns)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
