package stream

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

func TestBusyRest(t *testing.T) {
	for _, tc := range []struct {
		pass    time.Duration
		waiting bool
		want    time.Duration
	}{
		{2 * time.Millisecond, false, 0},                   // nothing new when the pass ended: not busy
		{100 * time.Microsecond, true, 0},                  // a short pass: resting would only add latency
		{2 * time.Millisecond, true, 2 * time.Millisecond}, // busy: rest as long as the pass took
		{time.Second, true, 5 * time.Millisecond},          // capped
	} {
		if got := busyRest(int64(tc.pass), tc.waiting); got != tc.want {
			t.Errorf("busyRest(%v, %v) = %v, want %v", tc.pass, tc.waiting, got, tc.want)
		}
	}
}

// publishFor publishes a 200-byte frame every gap until d has passed and returns how many it published.
func publishFor(rg *ring.Ring, published *atomic.Uint64, gap, d time.Duration) int64 {
	frame := make([]byte, 200)
	var batch ring.Batch
	id := []byte("v1:0-1")
	n := int64(0)
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		batch.Reset()
		batch.Add(append(batch.Buf(), frame...), 0, n, nil)
		published.Store(uint64(n + 1))
		rg.Publish(&batch, id)
		if gap < time.Millisecond {
			// A sleep this short lasts about half a millisecond on Linux whatever it asks: wait it out instead.
			for next := time.Now().Add(gap); time.Now().Before(next); {
				runtime.Gosched()
			}
		} else {
			time.Sleep(gap)
		}
	}
	return n
}

// TestPoolRestsWhenBusy: writers kept busy by frames that arrive faster than a pass over their connections
// rest between passes and so write several frames per write; writers that keep up never rest, so that low
// rates get their frames at once.
func TestPoolRestsWhenBusy(t *testing.T) {
	run := func(t *testing.T, conns int, gap, d time.Duration) (rests int64, framesPerWrite float64) {
		t.Helper()
		rg, _ := ring.New(64<<20, 0)
		srv := NewServer(Config{Writers: 2, Logger: discardLog})
		defer srv.Close()
		st := new(Stats)
		var published atomic.Uint64
		topic := &Topic{Ring: rg, Newest: func() (uint64, int64) { return published.Load(), 1 }}
		parkDevNull(t, srv, topic, st, conns)
		n := publishFor(rg, &published, gap, d)
		waitUntil(t, "every frame written", func() bool { return st.Frames.Load() == n*int64(conns) })
		for _, w := range srv.pool.writers {
			rests += w.rests.Load()
		}
		return rests, float64(st.Frames.Load()) / float64(st.Writes.Load())
	}
	t.Run("busy", func(t *testing.T) {
		// 8,000 connections make a pass of about a millisecond; a frame every 100 µs keeps the writers busy.
		rests, fpw := run(t, 8000, 100*time.Microsecond, 300*time.Millisecond)
		if rests == 0 {
			t.Fatal("busy writers never rested")
		}
		if fpw < 4 {
			t.Fatalf("busy writers wrote %.1f frames per write, want at least 4", fpw)
		}
		t.Logf("rests %d, %.1f frames per write", rests, fpw)
	})
	t.Run("keeping up", func(t *testing.T) {
		// 10 connections and a frame every 20 ms: every pass ends with nothing new.
		rests, fpw := run(t, 10, 20*time.Millisecond, 300*time.Millisecond)
		if rests != 0 {
			t.Fatalf("writers that keep up rested %d times", rests)
		}
		if fpw > 1.2 {
			t.Fatalf("writers that keep up wrote %.2f frames per write, want about 1 (each frame at once)", fpw)
		}
	})
}
