package replay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// gatedLog answers its first free fetches at once and holds every later one until open is closed.
type gatedLog struct {
	replay.Log
	free    int
	open    chan struct{}
	mu      sync.Mutex
	fetches int
}

func (g *gatedLog) Fetch(ctx context.Context, topic string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	g.mu.Lock()
	g.fetches++
	n := g.fetches
	g.mu.Unlock()
	if n > g.free {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		}
	}
	return g.Log.Fetch(ctx, topic, partition, offset)
}

// TestReadHandsOnAsDecoded: a read hands on the records of a block's first fetch while the rest of the block
// is still being fetched, rather than after the whole block.
func TestReadHandsOnAsDecoded(t *testing.T) {
	kc := topicOfV(300) // a fetch of the in-memory log covers 100 offsets: three fetches for the range
	g := &gatedLog{Log: kc, free: 1, open: make(chan struct{})}
	pool := replay.NewPool(replay.Config{}, g)
	first := make(chan int64, 1)
	done := make(chan error, 1)
	n := 0
	go func() {
		done <- pool.Read(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: -1, Upto: 299}}, 0, nil,
			func(r *kgo.Record) error {
				if n == 0 {
					first <- r.Offset
				}
				n++
				return nil
			})
	}()
	select {
	case off := <-first:
		if off != 0 {
			t.Fatalf("first record at offset %d, want 0", off)
		}
	case err := <-done:
		t.Fatalf("Read ended (%v) before the rest of the block could be fetched", err)
	case <-time.After(5 * time.Second):
		close(g.open)
		t.Fatalf("no record was handed on before the rest of the block was fetched (Read: %v)", <-done)
	}
	close(g.open)
	if err := <-done; err != nil || n != 300 {
		t.Fatalf("Read: %d records, %v; want 300", n, err)
	}
}

// TestReadMidBlockCachesWholeBlock: a read starting in the middle of a block reads the part before it too, so
// that a later read from the block's start comes from the cache, not from Kafka again.
func TestReadMidBlockCachesWholeBlock(t *testing.T) {
	kc := topicOfV(600)
	pool := replay.NewPool(replay.Config{}, kc)
	read := func(after int64) int {
		t.Helper()
		n := 0
		err := pool.Read(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: after, Upto: 599}}, 0, nil,
			func(r *kgo.Record) error {
				if want := after + 1 + int64(n); r.Offset != want {
					return errors.New("out of order")
				}
				n++
				return nil
			})
		if err != nil {
			t.Fatalf("Read after %d: %v", after, err)
		}
		return n
	}
	if n := read(449); n != 150 {
		t.Fatalf("read from the middle: %d records, want 150", n)
	}
	fetches := kc.Fetches()
	if n := read(-1); n != 600 {
		t.Fatalf("read from the start: %d records, want 600", n)
	}
	if kc.Fetches() != fetches || pool.Stats.CacheHits.Load() != 1 || pool.Stats.Reads.Load() != 1 {
		t.Fatalf("the second read fetched %d times (cache hits %d, block reads %d): want the cached block",
			kc.Fetches()-fetches, pool.Stats.CacheHits.Load(), pool.Stats.Reads.Load())
	}
}

// TestPrefetch: Prefetch starts reading a range's first block without waiting, and the Read of the range that
// follows reads from it rather than from Kafka again; a block already cached is not read again.
func TestPrefetch(t *testing.T) {
	kc := topicOfV(50)
	g := &gatedLog{Log: kc, free: 1, open: make(chan struct{})}
	pool := replay.NewPool(replay.Config{}, g)
	ranges := []replay.Range{{Partition: 0, After: 9, Upto: 49}}
	pool.Prefetch(context.Background(), "t", 0, ranges) // returns at once: the fetch runs on
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.fetches >= 1 })
	close(g.open)
	n := 0
	if err := pool.Read(context.Background(), "t", 0, ranges, 0, nil, func(*kgo.Record) error { n++; return nil }); err != nil || n != 40 {
		t.Fatalf("Read: %d records, %v; want 40", n, err)
	}
	if reads := pool.Stats.Reads.Load(); reads != 1 {
		t.Fatalf("%d block reads, want the prefetch's only", reads)
	}
	pool.Prefetch(context.Background(), "t", 0, ranges)
	if reads := pool.Stats.Reads.Load(); reads != 1 {
		t.Fatalf("a prefetch of a cached block read it again (%d reads)", reads)
	}
}

// TestReadAfterLanding: a connection that missed the cache while another's read of the block was under way,
// and finds no read under way because it landed in between, takes the block from the cache rather than
// reading it again.
func TestReadAfterLanding(t *testing.T) {
	kc := topicOfV(50)
	g := &gatedLog{Log: kc, free: 0, open: make(chan struct{})}
	pool := replay.NewPool(replay.Config{}, g)
	ranges := []replay.Range{{Partition: 0, After: -1, Upto: 49}}
	read := func() error {
		n := 0
		err := pool.Read(context.Background(), "t", 0, ranges, 0, nil, func(*kgo.Record) error { n++; return nil })
		if err == nil && n != 50 {
			err = errors.New("not every record")
		}
		return err
	}
	first := make(chan error, 1)
	go func() { first <- read() }()
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.fetches >= 1 }) // its read is under way
	atLaunch, land := make(chan struct{}), make(chan struct{})
	var once sync.Once
	replay.SetBeforeLaunch(pool, func() { once.Do(func() { close(atLaunch); <-land }) })
	second := make(chan error, 1)
	go func() { second <- read() }()
	<-atLaunch // the second missed the cache
	close(g.open)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	close(land) // the first read landed: cached, and no longer under way
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if reads := pool.Stats.Reads.Load(); reads != 1 {
		t.Fatalf("%d block reads, want 1: the second connection read the landed block again", reads)
	}
}

// topicOfV returns an in-memory log with topic "t" of one partition holding n records of value "v".
func topicOfV(n int) *memlog.Cluster {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for range n {
		kc.Produce("t", &kgo.Record{Value: []byte("v")})
	}
	return kc
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPrefetchBelowLowWatermark: a prefetch from an offset retention has removed does not fail a Read that
// starts at the low watermark (a from=earliest stream that looked the watermarks up after prefetching).
func TestPrefetchBelowLowWatermark(t *testing.T) {
	kc := topicOfV(50)
	kc.DeleteRecords("t", 0, 20)
	g := &gatedLog{Log: kc, open: make(chan struct{})} // every fetch held: the Read joins the prefetch first
	pool := replay.NewPool(replay.Config{}, g)
	pool.Prefetch(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: -1, Upto: 49}})
	n := 0
	done := make(chan error, 1)
	go func() {
		done <- pool.Read(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: 19, Upto: 49}}, 0, nil,
			func(*kgo.Record) error { n++; return nil })
	}()
	waitFor(t, func() bool { return pool.Stats.CacheHits.Load() == 1 }) // the Read reads from the prefetch
	close(g.open)
	if err := <-done; err != nil || n != 30 {
		t.Fatalf("Read from the low watermark: %d records, %v; want 30", n, err)
	}
}

// TestReadStarterLeaves: a read that joined another connection's block read gets every record even when that
// connection leaves mid-read (its context, which the block read runs under, ends): it reads the block itself.
func TestReadStarterLeaves(t *testing.T) {
	kc := topicOfV(50)
	g := &gatedLog{Log: kc, open: make(chan struct{})} // every fetch held
	pool := replay.NewPool(replay.Config{}, g)
	ranges := []replay.Range{{Partition: 0, After: -1, Upto: 49}}
	actx, leave := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() {
		aDone <- pool.Read(actx, "t", 0, ranges, 0, nil, func(*kgo.Record) error { return nil })
	}()
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.fetches >= 1 }) // A's block read started
	n := 0
	bDone := make(chan error, 1)
	go func() {
		bDone <- pool.Read(context.Background(), "t", 0, ranges, 0, nil, func(*kgo.Record) error { n++; return nil })
	}()
	waitFor(t, func() bool { return pool.Stats.CacheHits.Load() == 1 }) // B reads from A's
	leave()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the read that left: %v", err)
	}
	close(g.open)
	if err := <-bDone; err != nil || n != 50 {
		t.Fatalf("the read that stayed: %d records, %v; want 50", n, err)
	}
	if reads := pool.Stats.Reads.Load(); reads != 2 {
		t.Errorf("%d block reads, want 2 (the one that was left, and the stayer's own)", reads)
	}
}
