package feed

import (
	"context"
	"fmt"
	"time"
)

// Watermarks are a partition's low and high watermarks: the oldest offset still stored and the offset the
// next record will get.
type Watermarks struct {
	Low, High int64
}

type cachedWatermarks struct {
	at time.Time
	wm map[int32]Watermarks
}

// Watermarks returns the low and high watermarks of every partition of topic. Answers are cached for
// maxAge, so that a reconnect storm asks Kafka once rather than once per connection. Every answer from Kafka
// also trims the topic's ring to the low watermarks: the ring never serves what Kafka no longer has.
func (f *Feed) Watermarks(ctx context.Context, topic string, maxAge time.Duration) (map[int32]Watermarks, error) {
	asked := time.Now()
	for {
		f.wmMu.Lock()
		if c, ok := f.wmCache[topic]; ok && asked.Sub(c.at) < maxAge {
			f.wmMu.Unlock()
			return c.wm, nil
		}
		// One look-up at a time per topic: a reconnect storm that finds the cache stale asks Kafka once. A
		// look-up that began before this call is joined only when its answer is young enough for maxAge (a
		// caller asking for a fresh answer, maxAge 0, never takes an older one).
		fl := f.wmFly[topic]
		if fl == nil {
			if f.wmDone {
				f.wmMu.Unlock()
				return nil, ErrClosed
			}
			// Not the caller's context: no caller's leaving fails the others. Bounded in time, and ended
			// when the feed stops (stopLookups).
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			fl = &wmFlight{began: time.Now(), done: make(chan struct{}), cancel: cancel}
			f.wmFly[topic] = fl
			f.lookups.Add(1)
			go f.lookUpWatermarks(lctx, topic, fl)
		}
		// A look-up too old for this caller is waited for, then the cache (or a new look-up) is tried again.
		tooOld := fl.began.Before(asked) && asked.Sub(fl.began) >= maxAge
		f.wmMu.Unlock()
		select {
		case <-fl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if tooOld {
			continue
		}
		if fl.err != nil {
			return nil, fl.err
		}
		return fl.wm, nil
	}
}

// wmFlight is a watermark look-up under way; wm and err are written before done is closed.
type wmFlight struct {
	began  time.Time
	done   chan struct{}
	cancel context.CancelFunc // ends the look-up (the feed stops)
	wm     map[int32]Watermarks
	err    error
}

// lookUpWatermarks asks Kafka for topic's watermarks, caches them, trims the ring to the low ones, and lands
// fl. It runs on its own goroutine (joined by Run through f.lookups) under ctx, which is bounded in time.
func (f *Feed) lookUpWatermarks(ctx context.Context, topic string, fl *wmFlight) {
	defer f.lookups.Done()
	defer fl.cancel()
	fl.wm, fl.err = f.listWatermarks(ctx, topic)
	f.wmMu.Lock()
	if fl.err == nil {
		f.wmCache[topic] = cachedWatermarks{at: fl.began, wm: fl.wm}
	}
	delete(f.wmFly, topic)
	f.wmMu.Unlock()
	close(fl.done)
}

// listWatermarks asks Kafka for topic's low and high watermarks, and trims the ring to the low ones.
func (f *Feed) listWatermarks(ctx context.Context, topic string) (map[int32]Watermarks, error) {
	starts, err := f.kc.ListOffsets(ctx, LogStart, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := f.kc.ListOffsets(ctx, LogEnd, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	wm := map[int32]Watermarks{}
	for p, o := range starts[topic] {
		wm[p] = Watermarks{Low: o, High: -1}
	}
	for p, o := range ends[topic] {
		w, ok := wm[p]
		if !ok {
			w.Low = -1
		}
		w.High = o
		wm[p] = w
	}
	if t := f.topics[topic]; t != nil {
		for p, w := range wm {
			if w.Low > 0 {
				t.ring.Trim(p, w.Low)
			}
		}
	}
	return wm, nil
}

// OffsetsAfter returns, per partition of topic, the offset of the first record with a timestamp at or after
// t, or the partition's high watermark when there is none yet (see Cluster.OffsetsAfter).
func (f *Feed) OffsetsAfter(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	return f.kc.OffsetsAfter(ctx, topic, t)
}
