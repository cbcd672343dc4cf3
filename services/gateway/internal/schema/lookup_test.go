package schema

import (
	"sync"
	"testing"
	"time"
)

// TestLookupSingleFlight: many callers of one id not known yet make one lookup; AppendJSONNow returns at once
// with schema-pending while AppendJSON waits for that lookup and decodes.
func TestLookupSingleFlight(t *testing.T) {
	src := newMem()
	src.block = make(chan struct{})
	d := NewDecoders(src, Options{})
	v := framed(1, nil, []byte{0x54, 0x06, 'A', 'B', 'C'})
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() { _, errs[i] = d.AppendJSON(nil, Avro, v) })
	}
	waitUntil(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.flights[1] != nil })
	start := time.Now()
	if _, err := d.AppendJSONNow(nil, Avro, v); !isReason(err, Pending) || time.Since(start) > time.Second {
		t.Fatalf("AppendJSONNow while the lookup runs: %v after %v, want schema-pending at once", err, time.Since(start))
	}
	close(src.block)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if src.calls != 1 {
		t.Errorf("%d lookups for 51 callers of one id, want 1", src.calls)
	}
}

// TestLookupBounds: values of many ids not known yet start at most maxFlights lookups at once and at most
// lookupBurst (then lookupRate a second) in all; the others are schema-pending without a lookup, and asked
// for when next seen.
func TestLookupBounds(t *testing.T) {
	src := newMem()
	src.block = make(chan struct{})
	d := NewDecoders(src, Options{})
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	d.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	for id := 100; id < 1100; id++ {
		if _, err := d.AppendJSONNow(nil, Avro, framed(id, nil, []byte{0})); !isReason(err, Pending) {
			t.Fatalf("id %d: %v, want schema-pending", id, err)
		}
	}
	d.mu.Lock()
	flights := len(d.flights)
	d.mu.Unlock()
	if flights != maxFlights {
		t.Errorf("%d lookups under way for 1000 new ids, want %d", flights, maxFlights)
	}
	close(src.block)
	waitUntil(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.flights) == 0 })
	for id := 1100; id < 2100; id++ {
		_, _ = d.AppendJSONNow(nil, Avro, framed(id, nil, []byte{0}))
		waitUntil(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.flights) == 0 })
	}
	src.mu.Lock()
	calls := src.calls
	src.mu.Unlock()
	if calls != lookupBurst {
		t.Errorf("%d lookups of 2000 new ids within a second, want the burst, %d", calls, lookupBurst)
	}
	mu.Lock()
	clock = clock.Add(time.Second)
	mu.Unlock()
	for id := 2100; id < 2200; id++ {
		_, _ = d.AppendJSONNow(nil, Avro, framed(id, nil, []byte{0}))
		waitUntil(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.flights) == 0 })
	}
	src.mu.Lock()
	calls = src.calls
	src.mu.Unlock()
	if calls != lookupBurst+lookupRate {
		t.Errorf("%d lookups a second later, want %d", calls, lookupBurst+lookupRate)
	}
}

// TestOutageBackoffResetByAnswer: an answer of the registry (a 404) ends an outage's backoff, so the next
// outage backs off from the start (a second), not from where the last one ended.
func TestOutageBackoffResetByAnswer(t *testing.T) {
	src := newMem()
	d := NewDecoders(src, Options{})
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	d.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(by time.Duration) { mu.Lock(); clock = clock.Add(by); mu.Unlock() }
	setDown := func(down bool) { src.mu.Lock(); src.down = down; src.mu.Unlock() }
	try := func(id int) error { _, err := d.AppendJSON(nil, Avro, framed(id, nil, []byte{0x02, 0x00})); return err }
	setDown(true)
	_ = try(50)   // down: 1s
	for range 4 { // probes that fail: 2s, 4s, 8s, 16s
		advance(backoffMax)
		_ = try(51)
	}
	setDown(false)
	advance(backoffMax)
	if err := try(52); !isReason(err, UnknownSchema) {
		t.Fatalf("registry back, unknown id: %v", err)
	}
	setDown(true)
	if err := try(53); !isReason(err, Unavailable) {
		t.Fatalf("down again: %v", err)
	}
	setDown(false)
	src.mu.Lock()
	src.byID[54] = src.byID[1]
	src.mu.Unlock()
	advance(backoffMin)
	if err := try(54); err != nil {
		t.Fatalf("a second into the second outage, registry back: %v, want the backoff of a second over and the id decoded", err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
