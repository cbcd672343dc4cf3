package source

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// TestCrashAndRestartExactlyOnce stops ingest at random points while a source streams, half the time
// cleanly and half the time like a crash (the open transaction is neither committed nor aborted; the
// next producer with the same transactional id fences it), with the upstream also dropping connections
// in the middle of events. A read_committed consumer must see every event exactly once, in order.
func TestCrashAndRestartExactlyOnce(t *testing.T) {
	const total = 400
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	// Cut points are decided up front and each is used once (a replay of the event goes through); the
	// handler runs on server goroutines, hence the atomics.
	cuts := make([]atomic.Int32, total+1)
	for i := range cuts {
		cuts[i].Store(-1)
		if rng.IntN(40) == 0 {
			cuts[i].Store(int32(rng.IntN(20)))
		}
	}
	srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{
		Events: total, Every: time.Millisecond, Hold: true, Abort: true,
		Cut: func(i int, _ string) int { return int(cuts[i].Swap(-1)) },
	}))
	opt := testOptions(t)
	opt.CommitEvents = 7 // many small transactions, so kills land inside and between them
	topic := kafkatest.NewTopic(t, 1, nil)
	spec := Spec{Name: "crash-" + strconv.Itoa(int(seed%1000)), URL: srv.URL, Topic: topic, Format: FormatRaw}

	for round := range 8 {
		o := opt
		o.AbandonOnStop = round%2 == 0
		r := start(t, spec, o)
		stopAt := int64(rng.IntN(60) + 1)
		checkFor(t, 60*time.Second, "events read (round "+strconv.Itoa(round)+")", func() bool {
			return r.src.Stats().Events.Load() >= stopAt || r.src.Status().LastID == strconv.Itoa(total)
		})
		if err := r.stop(t); err != nil {
			t.Fatalf("round %d: Run returned %v", round, err)
		}
	}
	start(t, spec, opt)
	checkFor(t, 90*time.Second, "every event committed", func() bool {
		return len(readCommitted(t, topic)) >= total
	})
	got := values(readCommitted(t, topic))
	if want := wantLog(1, total); !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %d records, want %d exactly once in order; first difference at %d",
			len(got), total, firstDiff(got, want))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestBackpressureBoundsMemory gives the reader a channel nobody drains (Kafka stalled) and an endless
// stream of large events: ingest must stop reading the body instead of buffering it.
func TestBackpressureBoundsMemory(t *testing.T) {
	chunk := ssetest.Frame("", "", strings.Repeat("y", 64<<10))
	srv := ssetest.New(t, func(s *ssetest.Stream, _ *http.Request) {
		for s.Write(chunk) == nil {
		}
	})
	s := New(Spec{Name: "bp", URL: srv.URL, Topic: "unused"}, Options{BufferEvents: 4})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, o := s.connect(ctx, "")
	if resp == nil {
		t.Fatalf("connect: %v", o.err)
	}
	defer func() { _ = resp.Body.Close() }()
	buf := newBuffer(4, 1<<30) // bound by events only
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.read(ctx, resp.Body, buf, "", cancel)
	}()
	checkFor(t, 10*time.Second, "the buffer to fill", func() bool { return len(buf.items) == cap(buf.items) })
	// Once stalled, the bytes read stay put: poll until two readings 200ms apart agree.
	var before int64 = -1
	checkFor(t, 10*time.Second, "reading to stop", func() bool {
		now := s.Stats().Bytes.Load()
		stalled := now == before
		before = now
		if !stalled {
			time.Sleep(200 * time.Millisecond)
		}
		return stalled
	})
	// 4 queued events, one being sent, the parser's buffer and the transport's: far below 1 MiB.
	if n := s.Stats().Bytes.Load(); n > 1<<20 {
		t.Fatalf("read %d bytes with the consumer stalled; want under 1 MiB", n)
	}
	cancel()
	<-done
	srv.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	t.Logf("stalled after %d bytes read by ingest", s.Stats().Bytes.Load())
}
