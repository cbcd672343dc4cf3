package replay_test

import (
	"context"
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
