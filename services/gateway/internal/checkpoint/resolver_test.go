package checkpoint

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
)

// fakeLog is a position topic of one partition in memory: records from offset low on.
type fakeLog struct {
	low     int64
	values  [][]byte
	fetches atomic.Int64
	fail    error
	gate    chan struct{} // when set, fetches wait for it (or for their context to end)
	// inflight counts the fetches under way, peak the most there were at once.
	inflight, peak atomic.Int64
}

var errGone = errors.New("below the low watermark")

func (l *fakeLog) Fetch(ctx context.Context, _ string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	l.fetches.Add(1)
	n := l.inflight.Add(1)
	defer l.inflight.Add(-1)
	for {
		if p := l.peak.Load(); n <= p || l.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		}
	}
	switch {
	case l.fail != nil:
		return nil, offset, l.fail
	case partition != 0:
		return nil, offset, kerr.UnknownTopicOrPartition
	case offset < l.low:
		return nil, offset, errGone
	case offset > int64(len(l.values)):
		return nil, offset, kerr.OffsetOutOfRange
	}
	var recs []*kgo.Record
	for o := offset; o < int64(len(l.values)); o++ {
		recs = append(recs, &kgo.Record{Partition: 0, Offset: o, Value: l.values[o]})
	}
	return recs, int64(len(l.values)), nil
}

func TestResolve(t *testing.T) {
	kid := [16]byte{7}
	base := position.MustParse("v1:0-10.1-20")
	log := &fakeLog{values: [][]byte{
		[]byte("not a checkpoint"),
		position.AppendCheckpoint(nil, position.Checkpoint{Topic: "orders", TopicID: kid, Writer: "a", Vector: base}),
		position.AppendCheckpoint(nil, position.Checkpoint{Topic: "other", TopicID: kid, Writer: "a", Vector: base}),
	}}
	r, err := NewResolver("positions", log, func(err error) bool { return errors.Is(err, errGone) }, 8)
	if err != nil {
		t.Fatal(err)
	}
	id := func(ref position.Ref, pos string) string {
		b, ok := position.AppendCompact(nil, ref, base, position.MustParse(pos), 256)
		if !ok {
			t.Fatal("AppendCompact refused")
		}
		return string(b)
	}
	ctx := context.Background()
	v, err := r.Resolve(ctx, id(position.Ref{Offset: 1}, "v1:0-12.1-20.4-3"), "orders", kid)
	if err != nil || v.String() != "v1:0-12.1-20.4-3" {
		t.Fatalf("Resolve = %v, %v", v, err)
	}
	if _, ok := r.Cached(id(position.Ref{Offset: 1}, "v1:0-11.1-20"), "orders", kid); !ok {
		t.Fatal("a resolved checkpoint is not cached")
	}
	if n := log.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	for _, tc := range []struct {
		name, id, topic string
		kid             [16]byte
		want            error
	}{
		{"malformed", "v2:!", "orders", kid, ErrInvalid},
		{"not a checkpoint", id(position.Ref{Offset: 0}, "v1:0-10.1-20"), "orders", kid, ErrInvalid},
		{"other topic", id(position.Ref{Offset: 2}, "v1:0-10.1-20"), "orders", kid, ErrInvalid},
		{"recreated topic", id(position.Ref{Offset: 1}, "v1:0-10.1-20"), "orders", [16]byte{8}, ErrInvalid},
		{"past the end", id(position.Ref{Offset: 99}, "v1:0-10.1-20"), "orders", kid, ErrInvalid},
		{"no partition", id(position.Ref{Partition: 3, Offset: 1}, "v1:0-10.1-20"), "orders", kid, ErrInvalid},
		// The id was made against another record at offset 1: the position topic was created again.
		{"another record at the offset", id(position.Ref{Offset: 1, Check: 1 + position.CheckpointSum(log.values[1])%127}, "v1:0-10.1-20"), "orders", kid, ErrInvalid},
		{"its own record", id(position.Ref{Offset: 1, Check: position.CheckpointSum(log.values[1])}, "v1:0-11.1-20"), "orders", kid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Resolve(ctx, tc.id, tc.topic, tc.kid); !errors.Is(err, tc.want) || tc.want == nil && err != nil {
				t.Fatalf("Resolve = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("check of a cached checkpoint", func(t *testing.T) {
		sum := position.CheckpointSum(log.values[1])
		if _, ok := r.Cached(id(position.Ref{Offset: 1, Check: sum}, "v1:0-11.1-20"), "orders", kid); !ok {
			t.Fatal("Cached refuses an id with its record's check")
		}
		if _, ok := r.Cached(id(position.Ref{Offset: 1, Check: 1 + sum%127}, "v1:0-11.1-20"), "orders", kid); ok {
			t.Fatal("Cached resolves an id made against another record")
		}
	})
	t.Run("gone", func(t *testing.T) {
		r, _ := NewResolver("positions", &fakeLog{low: 5}, func(err error) bool { return errors.Is(err, errGone) }, 8)
		if _, err := r.Resolve(ctx, id(position.Ref{Offset: 1}, "v1:0-10.1-20"), "orders", kid); !errors.Is(err, ErrGone) {
			t.Fatalf("Resolve = %v, want ErrGone", err)
		}
	})
	t.Run("kafka error", func(t *testing.T) {
		r, _ := NewResolver("positions", &fakeLog{fail: kerr.NotLeaderForPartition}, nil, 8)
		_, err := r.Resolve(ctx, id(position.Ref{Offset: 1}, "v1:0-10.1-20"), "orders", kid)
		if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrGone) {
			t.Fatalf("Resolve = %v, want a plain Kafka error", err)
		}
	})
}

// TestResolveOneReadPerCheckpoint: a reconnect storm naming one checkpoint reads it once.
func TestResolveOneReadPerCheckpoint(t *testing.T) {
	base := position.MustParse("v1:0-1")
	log := &fakeLog{gate: make(chan struct{}), values: [][]byte{
		position.AppendCheckpoint(nil, position.Checkpoint{Topic: "t", Vector: base}),
	}}
	r, _ := NewResolver("positions", log, nil, 8)
	id, _ := position.AppendCompact(nil, position.Ref{}, base, position.MustParse("v1:0-2"), 64)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			v, err := r.Resolve(context.Background(), string(id), "t", [16]byte{})
			if err == nil && v.String() != "v1:0-2" {
				err = errors.New("wrong position " + v.String())
			}
			errs <- err
		})
	}
	close(log.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := log.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for one checkpoint, want 1", n)
	}
}

// checkpointLog returns a position topic of n checkpoints of topic "t", each at v1:0-1, and a function that
// returns the compact id v1:0-2 against the checkpoint at offset o (offsets past n name no record).
func checkpointLog(t *testing.T, n int) (*fakeLog, func(o int64) string) {
	t.Helper()
	base := position.MustParse("v1:0-1")
	log := &fakeLog{}
	for range n {
		log.values = append(log.values, position.AppendCheckpoint(nil, position.Checkpoint{Topic: "t", Vector: base}))
	}
	return log, func(o int64) string {
		id, ok := position.AppendCompact(nil, position.Ref{Offset: o}, base, position.MustParse("v1:0-2"), 64)
		if !ok {
			t.Fatal("AppendCompact refused")
		}
		return string(id)
	}
}

// TestResolveBoundsReads: a storm of distinct ids reads at most the readers' bound at once; the callers
// beyond it wait their turn and are all answered.
func TestResolveBoundsReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, readers = 20, 3
		log, id := checkpointLog(t, n)
		log.gate = make(chan struct{})
		r, err := NewResolver("positions", log, nil, 0, WithReaders(readers))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for o := range int64(n) {
			wg.Go(func() {
				v, err := r.Resolve(t.Context(), id(o), "t", [16]byte{})
				if err == nil && v.String() != "v1:0-2" {
					err = errors.New("wrong position " + v.String())
				}
				errs <- err
			})
		}
		synctest.Wait() // every caller reads or waits for a slot
		if got := log.inflight.Load(); got != readers {
			t.Errorf("%d reads at once, want the bound %d", got, readers)
		}
		close(log.gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if peak, total := log.peak.Load(), log.fetches.Load(); peak > readers || total != n {
			t.Fatalf("%d reads at most at once, %d in all; want at most %d, and %d", peak, total, readers, n)
		}
	})
}

// TestResolveWaitsWithContext: a caller waiting for a read slot gives up when its context ends, without
// reading; a caller that waits long enough is answered.
func TestResolveWaitsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, id := checkpointLog(t, 3)
		log.gate = make(chan struct{})
		r, _ := NewResolver("positions", log, nil, 0, WithReaders(1))
		first := make(chan error, 1)
		go func() {
			_, err := r.Resolve(t.Context(), id(0), "t", [16]byte{})
			first <- err
		}()
		synctest.Wait() // the first caller holds the only slot
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := r.Resolve(ctx, id(1), "t", [16]byte{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Resolve while the slot is taken = %v, want the context's error", err)
		}
		if n := log.fetches.Load(); n != 1 {
			t.Errorf("%d reads, want only the first caller's", n)
		}
		third := make(chan error, 1)
		go func() {
			_, err := r.Resolve(t.Context(), id(2), "t", [16]byte{})
			third <- err
		}()
		synctest.Wait()
		close(log.gate)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-third; err != nil {
			t.Fatalf("a caller that waited its turn: %v", err)
		}
	})
}

// TestResolveReaderLeaves: when the caller reading a checkpoint leaves, another caller waiting for the same
// checkpoint reads it instead of getting the first one's error.
func TestResolveReaderLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, id := checkpointLog(t, 1)
		log.gate = make(chan struct{})
		r, _ := NewResolver("positions", log, nil, 0)
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() {
			_, err := r.Resolve(ctx, id(0), "t", [16]byte{})
			first <- err
		}()
		synctest.Wait() // the first caller reads
		second := make(chan error, 1)
		go func() {
			v, err := r.Resolve(t.Context(), id(0), "t", [16]byte{})
			if err == nil && v.String() != "v1:0-2" {
				err = errors.New("wrong position " + v.String())
			}
			second <- err
		}()
		synctest.Wait() // the second waits for the first's read
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("the reader that left: %v, want context.Canceled", err)
		}
		synctest.Wait() // the second reads again
		close(log.gate)
		if err := <-second; err != nil {
			t.Fatalf("the caller that stayed: %v", err)
		}
		if n := log.fetches.Load(); n != 2 {
			t.Fatalf("%d reads, want 2", n)
		}
	})
}

// TestResolveRemembersFailures: an id whose checkpoint is not there, or gone, is answered from memory for
// DefaultFailureTTL (also under another id naming the same checkpoint), and read again after it; Kafka
// errors and ended contexts are not remembered.
func TestResolveRemembersFailures(t *testing.T) {
	gone := func(err error) bool { return errors.Is(err, errGone) }
	for _, tc := range []struct {
		name     string
		log      func(*fakeLog)
		want     error
		reads    int64 // for three calls within the TTL
		ctxEnded bool
	}{
		{"past the end", func(*fakeLog) {}, ErrInvalid, 1, false},
		{"not a checkpoint", func(l *fakeLog) { l.values = append(l.values, make([][]byte, 10)...) }, ErrInvalid, 1, false},
		{"gone", func(l *fakeLog) { l.low = 10 }, ErrGone, 1, false},
		{"kafka error", func(l *fakeLog) { l.fail = kerr.NotLeaderForPartition }, nil, 3, false},
		{"context ended", func(*fakeLog) {}, context.Canceled, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log, id := checkpointLog(t, 1)
				tc.log(log)
				r, _ := NewResolver("positions", log, gone, 0)
				ctx, cancel := context.WithCancel(t.Context())
				if tc.ctxEnded {
					cancel()
				}
				defer cancel()
				resolve := func(id string) {
					t.Helper()
					_, err := r.Resolve(ctx, id, "t", [16]byte{})
					if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
						t.Fatalf("Resolve = %v, want %v", err, tc.want)
					}
				}
				// The same bad checkpoint twice, then under another id (other entries).
				other, _ := position.AppendCompact(nil, position.Ref{Offset: 5}, position.MustParse("v1:0-1"), position.MustParse("v1:0-9.3-4"), 64)
				resolve(id(5))
				resolve(id(5))
				resolve(string(other))
				if n := log.fetches.Load(); n != tc.reads {
					t.Fatalf("%d reads for three calls naming one bad checkpoint, want %d", n, tc.reads)
				}
				time.Sleep(DefaultFailureTTL)
				resolve(id(5))
				if n := log.fetches.Load(); tc.reads == 1 && n != 2 {
					t.Fatalf("%d reads after the failure expired, want 2", n)
				}
			})
		})
	}
}

// TestResolveFailuresBounded: the failures remembered are bounded in number, the oldest forgotten first.
func TestResolveFailuresBounded(t *testing.T) {
	log, id := checkpointLog(t, 1)
	r, _ := NewResolver("positions", log, nil, 0, WithFailures(2, time.Hour))
	for _, o := range []int64{5, 6, 7, 6, 7, 5} { // 5 is forgotten when 7 fails
		if _, err := r.Resolve(t.Context(), id(o), "t", [16]byte{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Resolve = %v, want ErrInvalid", err)
		}
	}
	if n := log.fetches.Load(); n != 4 {
		t.Fatalf("%d reads, want 4: three failures, and the first again once forgotten", n)
	}
}

// TestResolveWithoutPositionTopic: a gateway without a position topic answers every compact id ErrInvalid,
// and reads nothing.
func TestResolveWithoutPositionTopic(t *testing.T) {
	log, id := checkpointLog(t, 1)
	r, err := NewResolver("", log, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(t.Context(), id(0), "t", [16]byte{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Resolve = %v, want ErrInvalid", err)
	}
	if n := log.fetches.Load(); n != 0 {
		t.Fatalf("%d reads without a position topic, want none", n)
	}
}

// TestResolveMalformedReadsNothing: a malformed compact id is ErrInvalid from the parser, before any read.
func TestResolveMalformedReadsNothing(t *testing.T) {
	log, _ := checkpointLog(t, 1)
	r, _ := NewResolver("positions", log, nil, 0)
	for _, id := range []string{"v2:", "v2:!", "v2:gAAA", "v2:AA=", "v2:AA\n", "v2:" + strings.Repeat("A", position.MaxCompactLen)} {
		if _, err := r.Resolve(t.Context(), id, "t", [16]byte{}); !errors.Is(err, ErrInvalid) || !errors.Is(err, position.ErrSyntax) && !errors.Is(err, position.ErrTooLong) && !errors.Is(err, position.ErrRange) {
			t.Errorf("Resolve(%q) = %v, want ErrInvalid from the parser", id, err)
		}
	}
	if n := log.fetches.Load(); n != 0 {
		t.Fatalf("%d reads for malformed ids, want none", n)
	}
}

// TestResolveRereadsStaleRecord: after the position topic is created again, the record at a cached offset
// is another one. An id made against the new record is refused while the cached one is fresh (any client can
// send ids with any check, and each must not cost a read), and resolves once the cached one is older than
// the failure TTL: the record is read again.
func TestResolveRereadsStaleRecord(t *testing.T) {
	kid := [16]byte{7}
	base := position.MustParse("v1:0-10.1-20")
	record := func(writer string) []byte {
		return position.AppendCheckpoint(nil, position.Checkpoint{Topic: "orders", TopicID: kid, Writer: writer, Vector: base})
	}
	log := &fakeLog{values: [][]byte{record("old-pod")}}
	const ttl = 500 * time.Millisecond // the two resolves after the change must come within it
	r, err := NewResolver("positions", log, nil, 8, WithFailures(0, ttl))
	if err != nil {
		t.Fatal(err)
	}
	id := func(rec []byte) string {
		b, ok := position.AppendCompact(nil, position.Ref{Offset: 0, Check: position.CheckpointSum(rec)}, base, position.MustParse("v1:0-11.1-20"), 256)
		if !ok {
			t.Fatal("AppendCompact refused")
		}
		return string(b)
	}
	ctx := t.Context()
	old := id(log.values[0])
	if _, err := r.Resolve(ctx, old, "orders", kid); err != nil {
		t.Fatal(err)
	}
	log.values[0] = record("new-pod") // the topic created again: another checkpoint at offset 0
	fresh := id(log.values[0])
	if _, err := r.Resolve(ctx, fresh, "orders", kid); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Resolve against a fresh cached record = %v, want ErrInvalid", err)
	}
	if n := log.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches while the cached record is fresh, want 1", n)
	}
	time.Sleep(2 * ttl)
	if v, err := r.Resolve(ctx, fresh, "orders", kid); err != nil || v.String() != "v1:0-11.1-20" {
		t.Fatalf("Resolve once the cached record is stale = %v, %v; want the new record's position", v, err)
	}
	if _, err := r.Resolve(ctx, old, "orders", kid); !errors.Is(err, ErrInvalid) {
		t.Fatalf("the old id after the record changed = %v, want ErrInvalid", err)
	}
	if n := log.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2: one more once the cached record was stale", n)
	}
}
