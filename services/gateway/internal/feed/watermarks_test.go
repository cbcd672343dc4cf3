package feed_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// slowOffsets is a cluster whose offset look-ups take a while and are counted.
type slowOffsets struct {
	feed.Cluster
	calls atomic.Int64
}

func (s *slowOffsets) ListOffsets(ctx context.Context, kind feed.OffsetKind, topics ...string) (map[string]map[int32]int64, error) {
	s.calls.Add(1)
	time.Sleep(50 * time.Millisecond)
	return s.Cluster.ListOffsets(ctx, kind, topics...)
}

// TestWatermarksSingleFlight: a storm of streams that find the watermark cache stale asks Kafka once (two
// look-ups: start and end offsets), not once per stream; a caller that wants a fresh answer (maxAge 0) never
// takes one that began before it asked; a caller that leaves does not fail the others.
func TestWatermarksSingleFlight(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	cl := &slowOffsets{Cluster: kc.Client()}
	f, err := feed.NewWith(feed.Config{Topics: []string{"t"}, RingBytes: 1 << 20}, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	leaving, leave := context.WithCancel(context.Background())
	wg.Go(func() { // the first caller leaves at once
		_, _ = f.Watermarks(leaving, "t", time.Second)
	})
	leave()
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			wm, err := f.Watermarks(context.Background(), "t", time.Second)
			if err == nil && len(wm) != 2 {
				err = context.DeadlineExceeded
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a caller of the storm: %v", err)
		}
	}
	if n := cl.calls.Load(); n != 2 {
		t.Fatalf("offset look-ups for a storm of 51 callers: %d, want 2 (one flight)", n)
	}
	// Fresh answers: one that began before the call is waited for, then asked again.
	before := cl.calls.Load()
	wg.Go(func() { _, _ = f.Watermarks(context.Background(), "t", 0) })
	time.Sleep(10 * time.Millisecond)
	if _, err := f.Watermarks(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n := cl.calls.Load() - before; n != 4 {
		t.Fatalf("offset look-ups for two callers wanting fresh answers one after the other: %d, want 4", n)
	}
}

// hungOffsets is a cluster whose offset look-ups of topic "t" answer only when their context ends.
type hungOffsets struct {
	feed.Cluster
	started chan struct{}
}

func (h *hungOffsets) ListOffsets(ctx context.Context, kind feed.OffsetKind, topics ...string) (map[string]map[int32]int64, error) {
	if len(topics) == 1 && topics[0] == "t" && kind == feed.LogStart {
		select {
		case h.started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.Cluster.ListOffsets(ctx, kind, topics...)
}

// TestRunJoinsWatermarkLookUps: a watermark look-up under way when the feed stops is ended and joined by Run
// (before, it went on for up to its 10 s bound after Run returned, owned by nobody), and none starts after.
func TestRunJoinsWatermarkLookUps(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	cl := &hungOffsets{Cluster: kc.Client(), started: make(chan struct{}, 1)}
	f, err := feed.NewWith(feed.Config{Topics: []string{"t"}, RingBytes: 1 << 20, MetadataInterval: time.Hour}, cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = f.Run(ctx); close(ran) }()
	looked := make(chan error, 1)
	go func() { _, err := f.Watermarks(context.Background(), "t", 0); looked <- err }()
	<-cl.started
	stop()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	select { // the look-up ended with Run; its caller hears at once (before, after the look-up's 10 s bound)
	case err := <-looked:
		if err == nil {
			t.Fatal("the look-up cut short by the stop answered no error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a watermark look-up went on after Run returned")
	}
	if _, err := f.Watermarks(context.Background(), "t", 0); err == nil {
		t.Fatal("a look-up after Run returned started")
	}
}
