package replay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// batchRecorder is a log that can send first fetches together; it notes what each batch and each fetch of
// its own asked for, and fails every batched fetch when failBatch is set.
type batchRecorder struct {
	replay.Log
	failBatch bool
	mu        sync.Mutex
	batches   [][]int32 // the partitions of each FetchFirsts
	own       int       // FetchMax calls
}

func (b *batchRecorder) FetchMax(ctx context.Context, topic string, partition int32, offset int64, _ int32) ([]*kgo.Record, int64, error) {
	b.mu.Lock()
	b.own++
	b.mu.Unlock()
	return b.Fetch(ctx, topic, partition, offset)
}

func (b *batchRecorder) FetchFirsts(ctx context.Context, topic string, fs []replay.FirstFetch) {
	var parts []int32
	for i := range fs {
		parts = append(parts, fs[i].Partition)
		if b.failBatch {
			fs[i].Next, fs[i].Err = fs[i].Offset, errors.New("broker gone")
			continue
		}
		fs[i].Recs, fs[i].Next, fs[i].Err = b.Fetch(ctx, topic, fs[i].Partition, fs[i].Offset)
	}
	b.mu.Lock()
	b.batches = append(b.batches, parts)
	b.mu.Unlock()
}

// TestFirstFetchesBatched: the first fetches of the blocks a read starts go out as one batch, whether the read
// or a prefetch before it starts them; a batch that fails leaves each block to fetch on its own, and the read
// still gets every record in order. A read of one partition fetches on its own.
func TestFirstFetchesBatched(t *testing.T) {
	for _, tc := range []struct {
		name            string
		parts           int32
		prefetch, fail  bool
		batches, ownMax int
	}{
		{"read", 12, false, false, 1, 0},
		{"prefetch then read", 12, true, false, 1, 0},
		{"batch fails", 12, false, true, 1, 12},
		{"one partition", 1, false, false, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", int(tc.parts))
			var ranges []replay.Range
			for p := range tc.parts {
				for i := range 3 {
					kc.Produce("t", &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
				}
				ranges = append(ranges, replay.Range{Partition: p, After: 0, Upto: 2})
			}
			rec := &batchRecorder{Log: kc, failBatch: tc.fail}
			pool := replay.NewPool(replay.Config{}, rec)
			if tc.prefetch {
				pool.Prefetch(t.Context(), "t", 0, ranges)
			}
			got := map[int32][]string{}
			err := pool.Read(t.Context(), "t", 0, ranges, 0, nil, func(r *kgo.Record) error {
				got[r.Partition] = append(got[r.Partition], string(r.Value))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for p := range tc.parts {
				if want := fmt.Sprintf("[%d-1 %d-2]", p, p); fmt.Sprint(got[p]) != want {
					t.Errorf("partition %d: read %v, want %s", p, got[p], want)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.batches) != tc.batches || len(rec.batches) > 0 && len(rec.batches[0]) != int(tc.parts) || rec.own != tc.ownMax {
				t.Errorf("batches %v and %d fetches of their own; want %d batch of the %d partitions and %d of their own",
					rec.batches, rec.own, tc.batches, tc.parts, tc.ownMax)
			}
		})
	}
}
