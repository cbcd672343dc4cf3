package stream

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestLiveFirst: a catch-up batch waits while a writer pass is under way, for maxYield at most, and then for
// one of the catch-up slots.
func TestLiveFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLiveFirst(1)
		entered := func() <-chan struct{} {
			ch := make(chan struct{})
			go func() {
				if err := g.enter(t.Context()); err == nil {
					close(ch)
				}
			}()
			synctest.Wait()
			return ch
		}
		isClosed := func(ch <-chan struct{}) bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}

		g.passBegin()
		first := entered()
		if isClosed(first) {
			t.Fatal("a catch-up entered while a writer pass was under way")
		}
		g.passEnd()
		synctest.Wait()
		if !isClosed(first) {
			t.Fatal("the catch-up did not enter once the pass ended")
		}

		second := entered()
		if isClosed(second) {
			t.Fatal("a second catch-up entered while the only slot was held")
		}
		g.leave()
		synctest.Wait()
		if !isClosed(second) {
			t.Fatal("the second catch-up did not enter when the slot was given back")
		}
		g.leave()

		// Writers that are always busy delay a batch by maxYield, no more.
		g.passBegin()
		start := time.Now()
		if err := g.enter(t.Context()); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != maxYield {
			t.Errorf("a batch waited %v for a pass that did not end, want %v", waited, maxYield)
		}
		g.leave()
		g.passEnd()
	})
}

// TestRingCatchUpWaitsForWriters: a stream catching up from far back in the ring writes each batch after the
// writers' pass under way, and all of it once the writers are idle.
func TestRingCatchUpWaitsForWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeeder(t, 1<<20)
		f.publish("start")
		from := f.id()
		for i := range 100 {
			f.publish(fmt.Sprint("frame ", i, " ", strings.Repeat("x", 30)))
		}
		srv := NewServer(Config{Logger: discardLog, MaxWriteBytes: 512}) // batches of about 10 frames
		defer srv.Close()
		w := newMemWriter()
		srv.live.passBegin() // a writer pass that lasts
		done, cancel := serveMem(t, srv, w, f.rg, Params{LastEventID: from}, new(Stats))
		defer func() {
			cancel()
			<-done
		}()
		synctest.Wait()
		if n := strings.Count(w.String(), "data: frame "); n >= 100 {
			t.Fatalf("the catch-up wrote all %d frames during a writer pass", n)
		}
		srv.live.passEnd()
		synctest.Wait()
		if n := strings.Count(w.String(), "data: frame "); n != 100 {
			t.Fatalf("the catch-up wrote %d frames once the writers were idle, want 100", n)
		}
	})
}
