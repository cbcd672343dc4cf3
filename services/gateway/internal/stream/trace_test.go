package stream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingObserver counts what streams report.
type countingObserver struct {
	delivered atomic.Int64
	mu        sync.Mutex
	resumed   []string // sources
	lags      []time.Duration
}

func (o *countingObserver) Resumed(_, source string, _ time.Duration) {
	o.mu.Lock()
	o.resumed = append(o.resumed, source)
	o.mu.Unlock()
}

func (o *countingObserver) Delivered(_ string, lag time.Duration) {
	o.delivered.Add(1)
	o.mu.Lock()
	o.lags = append(o.lags, lag)
	o.mu.Unlock()
}

// tallyObserver only counts delivery reports: the benchmarks' observer, which allocates nothing itself.
type tallyObserver struct{ delivered atomic.Int64 }

func (o *tallyObserver) Resumed(string, string, time.Duration) {}
func (o *tallyObserver) Delivered(string, time.Duration)       { o.delivered.Add(1) }

// TestSampleDelivery: the delivery lag is reported once per publish, by the first write that reaches it,
// whatever the number of streams; a write short of the latest publish reports nothing.
func TestSampleDelivery(t *testing.T) {
	obs := new(countingObserver)
	s := NewServer(Config{Observer: obs, Logger: discardLog})
	var seq atomic.Uint64
	ts := time.Now().Add(-2 * time.Second).UnixMilli()
	top := &Topic{Name: "t", Newest: func() (uint64, int64) { return seq.Load(), ts }}
	conns := make([]*conn, 3)
	for i := range conns {
		conns[i] = &conn{s: s, t: top}
	}
	cases := []struct {
		name      string
		published uint64 // the ring's head after the latest publish
		next      uint64 // where each write brought its stream
		want      int64  // reports so far
	}{
		{"nothing published yet", 0, 0, 0},
		{"a write short of the publish", 5, 4, 0},
		{"writes that reach it: one report", 5, 5, 1},
		{"the same publish again: none", 5, 5, 1},
		{"the next publish", 9, 9, 2},
		{"past it (a later publish not yet stored)", 9, 12, 2},
	}
	for _, tc := range cases {
		seq.Store(tc.published)
		for _, c := range conns {
			c.sampleDelivery(tc.next)
		}
		if got := obs.delivered.Load(); got != tc.want {
			t.Errorf("%s: %d reports, want %d", tc.name, got, tc.want)
		}
	}
	for _, lag := range obs.lags {
		if lag < 2*time.Second || lag > time.Minute {
			t.Errorf("lag %v, want about 2s", lag)
		}
	}
	// A timestamp ahead of the clock (a producer's clock ahead of the gateway's) is no negative lag.
	ts = time.Now().Add(time.Hour).UnixMilli()
	seq.Store(20)
	conns[0].sampleDelivery(20)
	if l := obs.lags[len(obs.lags)-1]; l != 0 {
		t.Errorf("lag of a future timestamp = %v, want 0", l)
	}
}
