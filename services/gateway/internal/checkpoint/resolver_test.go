package checkpoint

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

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
	gate    chan struct{} // when set, fetches wait for it
}

var errGone = errors.New("below the low watermark")

func (l *fakeLog) Fetch(_ context.Context, _ string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	l.fetches.Add(1)
	if l.gate != nil {
		<-l.gate
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Resolve(ctx, tc.id, tc.topic, tc.kid); !errors.Is(err, tc.want) {
				t.Fatalf("Resolve = %v, want %v", err, tc.want)
			}
		})
	}
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
