package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// sizedGate answers the short first fetch of a block (FetchMax) at once and holds every other fetch until open
// is closed, as a slow block read would.
type sizedGate struct {
	*gatedLog
}

func (s sizedGate) FetchMax(ctx context.Context, topic string, partition int32, offset int64, _ int32) ([]*kgo.Record, int64, error) {
	return s.Log.Fetch(ctx, topic, partition, offset)
}

// TestFirstFetchesDoNotWaitForReaders: a resume of more partitions than there are replay readers gets its first
// record after the first (short) fetch of every partition, not after whole blocks of its first partitions: the
// short fetches do not wait for a reader slot, the rest of each block does.
func TestFirstFetchesDoNotWaitForReaders(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 3)
	for i := range 900 {
		kc.Produce("t", &kgo.Record{Partition: int32(i % 3), Value: []byte("v")})
	}
	g := sizedGate{&gatedLog{Log: kc, free: 0, open: make(chan struct{})}}
	pool := replay.NewPool(replay.Config{Readers: 1}, g)
	first := make(chan struct{})
	done := make(chan error, 1)
	n := 0
	go func() {
		ranges := []replay.Range{{Partition: 0, After: -1, Upto: 299}, {Partition: 1, After: -1, Upto: 299}, {Partition: 2, After: -1, Upto: 299}}
		done <- pool.Read(context.Background(), "t", 0, ranges, 0, nil, func(*kgo.Record) error {
			if n == 0 {
				close(first)
			}
			n++
			return nil
		})
	}()
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("Read ended (%v) before the blocks could be read", err)
	case <-time.After(5 * time.Second):
		close(g.open)
		t.Fatalf("no record before the first blocks were read whole (Read: %v)", <-done)
	}
	close(g.open)
	if err := <-done; err != nil || n != 900 {
		t.Fatalf("Read: %d records, %v; want 900", n, err)
	}
}

// TestReadTellsBeforeWaiting: ReadWith calls Waits.Before once the records it has are handed on and it is
// about to wait for more from Kafka, so that a caller gathering records into larger writes sends them then.
func TestReadTellsBeforeWaiting(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for range 300 { // a fetch of the in-memory log covers 100 offsets
		kc.Produce("t", &kgo.Record{Value: []byte("v")})
	}
	g := &gatedLog{Log: kc, free: 1, open: make(chan struct{})}
	pool := replay.NewPool(replay.Config{}, g)
	n := 0
	waited := make(chan int, 8)
	before := func() error {
		select {
		case waited <- n:
		default:
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		done <- pool.ReadWith(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: -1, Upto: 299}},
			replay.Waits{Before: before}, func(*kgo.Record) error { n++; return nil })
	}()
	for {
		select {
		case got := <-waited:
			if got == 100 {
				close(g.open)
				if err := <-done; err != nil || n != 300 {
					t.Fatalf("Read: %d records, %v; want 300", n, err)
				}
				return
			}
		case err := <-done:
			t.Fatalf("Read ended (%v) before the gated fetch", err)
		case <-time.After(5 * time.Second):
			close(g.open)
			t.Fatalf("Before was not called with the first fetch's 100 records handed on (Read: %v)", <-done)
		}
	}
}

// sizeRecorder is a sized log that notes what each first fetch asked for.
type sizeRecorder struct {
	replay.Log
	mu    sync.Mutex
	asked []int32
}

func (s *sizeRecorder) FetchMax(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) ([]*kgo.Record, int64, error) {
	s.mu.Lock()
	s.asked = append(s.asked, maxBytes)
	s.mu.Unlock()
	return s.Fetch(ctx, topic, partition, offset)
}

// TestFirstFetchShare: a read of several partitions asks each partition's first fetch for its share of a
// single partition's first fetch (32 KiB), at least 4 KiB: its first record needs all of them.
func TestFirstFetchShare(t *testing.T) {
	for _, tc := range []struct {
		partitions int
		want       int32
	}{{1, 32 << 10}, {4, 8 << 10}, {12, 4 << 10}} {
		kc := memlog.New()
		kc.CreateTopic("t", tc.partitions)
		var ranges []replay.Range
		for p := range tc.partitions {
			kc.Produce("t", &kgo.Record{Partition: int32(p), Value: []byte("v")})
			ranges = append(ranges, replay.Range{Partition: int32(p), After: -1, Upto: 0})
		}
		rec := &sizeRecorder{Log: kc}
		pool := replay.NewPool(replay.Config{}, rec)
		n := 0
		if err := pool.Read(context.Background(), "t", 0, ranges, 0, nil, func(*kgo.Record) error { n++; return nil }); err != nil || n != tc.partitions {
			t.Fatalf("%d partitions: read %d records, %v", tc.partitions, n, err)
		}
		if len(rec.asked) != tc.partitions {
			t.Fatalf("%d partitions: %d first fetches, want one each", tc.partitions, len(rec.asked))
		}
		for _, got := range rec.asked {
			if got != tc.want {
				t.Errorf("%d partitions: a first fetch asked for %d bytes, want %d", tc.partitions, got, tc.want)
			}
		}
	}
}
