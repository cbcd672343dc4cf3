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

// follower is a cluster read from a follower (broker 2) that stops answering while paused (memlog.PausePolls):
// the feed tells it of a stall (Stalled), which wakes its poll and makes it move the stalled partitions to
// their leaders (Moves), and that move (Move) unpauses it, as the leader answers.
type follower struct {
	*memlog.Client
	kc *memlog.Cluster

	mu      sync.Mutex
	cancel  context.CancelFunc
	stalled map[string][]int32
	moves   []string
}

func (f *follower) Following() bool { return true }

func (f *follower) Stalled(parts map[string][]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stalled == nil {
		f.stalled = parts
	}
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *follower) Moves() []feed.FollowMove {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stalled == nil {
		return nil
	}
	m := []feed.FollowMove{feed.ToLeaders(2, f.stalled)}
	f.stalled = map[string][]int32{} // once
	return m
}

func (f *follower) Moved(func(broker int32, toLeaders, back int64)) {}

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

func (f *follower) Move(parts map[string]map[int32]int64, toLeaders bool) {
	f.mu.Lock()
	f.moves = append(f.moves, fmt.Sprint(toLeaders, parts))
	f.mu.Unlock()
	f.Reassign(parts)
	f.kc.PausePolls(false)
}

// TestStalledFollowerBackToLeader: a partition with records to read that the feed has not read for the stall
// time is reported stalled, and when the cluster moves it to its leader the feed gives the exact offset after
// the last record read; the rest of the records arrive once each, in order.
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
	if fmt.Sprint(cl.moves) != "[true map[t:map[0:5]]]" {
		t.Fatalf("moves to the leader: %v, want one, of partition 0 from offset 5", cl.moves)
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
