package main

import (
	"context"
	"time"
)

// maxWindows bounds the latency windows of a run; a run that would have more keeps one. A histogram is about
// 10 KiB, and a hundred windows are already more than a summary line can show.
const maxWindows = 100

// latencyWindows splits the live readers' latency by time: a histogram for each window of every from the
// start of producing, the last one running on to the end of the run (the readers catching up included).
// Frames record into whichever window is current (shared.hist), so the split costs nothing a frame; a frame
// read just as a window ends may land in either.
type latencyWindows struct {
	sh    *shared
	every time.Duration
	hs    []*histogram
}

// newLatencyWindows makes the windows of a run that produces for duration and sets the first as the one
// frames record into.
func newLatencyWindows(sh *shared, every, duration time.Duration) *latencyWindows {
	n := 1
	if every > 0 && duration > every {
		n = int((duration + every - 1) / every)
	}
	if n > maxWindows {
		n = 1
	}
	w := &latencyWindows{sh: sh, every: every, hs: make([]*histogram, n)}
	for i := range w.hs {
		w.hs[i] = new(histogram)
	}
	sh.hist.Store(w.hs[0])
	return w
}

// advance makes window k the one frames record into.
func (w *latencyWindows) advance(k int) { w.sh.hist.Store(w.hs[k]) }

// start moves on to each window at its time from t0, and returns a function that waits until it has moved
// to the last one, or stops it early when ctx ends.
func (w *latencyWindows) start(ctx context.Context, t0 time.Time) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 1; k < len(w.hs); k++ {
			sleep(ctx, time.Until(t0.Add(time.Duration(k)*w.every)))
			if ctx.Err() != nil {
				return
			}
			w.advance(k)
		}
	}()
	return func() { <-done }
}

// total returns the histogram of every window together. Frames must no longer be recorded.
func (w *latencyWindows) total() *histogram {
	if len(w.hs) == 1 {
		return w.hs[0]
	}
	var t histogram
	for _, h := range w.hs {
		t.merge(h)
	}
	return &t
}

// latencies returns each window's latency summary, nil for a run of one window; a window without frames
// has a nil entry.
func (w *latencyWindows) latencies() []*latency {
	if len(w.hs) == 1 {
		return nil
	}
	out := make([]*latency, len(w.hs))
	for i, h := range w.hs {
		out[i] = latencyOf(h)
	}
	return out
}
