package stream

import (
	"fmt"
	"testing"
)

// TestConflateHoldPerKey: what a conflation holds grows with its keys, not its records: a million updates of
// one key in one interval hold a few entries (not a million: 64 MiB against a 1 MiB bound), and updates of
// many keys keep held within twice the keys; what is held stays the latest of each key, in the order they
// came, and its counted bytes stay within the bound.
func TestConflateHoldPerKey(t *testing.T) {
	cf := &conflation{every: MaxConflate, maxBytes: maxHeldBytes, byKey: map[heldKey]int{}}
	rest := []byte("data: {\"n\":1}\n\n")
	for i := range 1_000_000 {
		cf.hold(0, int64(i), []byte("the-key"), rest, false, 1)
		if len(cf.held) > 40 || cf.bytes > cf.maxBytes {
			t.Fatalf("after %d updates of one key: %d entries held, %d bytes counted", i+1, len(cf.held), cf.bytes)
		}
	}
	if cf.due != 1+int64(MaxConflate) {
		t.Errorf("due %d: one key's updates made the hold send at once", cf.due)
	}
	live := cf.liveHeld()
	if len(live) != 1 || live[0].offset != 999_999 {
		t.Fatalf("held %+v, want the last update only", live)
	}

	// 1,000 keys updated 100 times each, in turns, and records without a key between: the latest of each key
	// and every keyless record, in the order they came.
	cf = &conflation{every: MaxConflate, maxBytes: 64 << 20, byKey: map[heldKey]int{}}
	offset := int64(0)
	for round := range 100 {
		for k := range 1000 {
			cf.hold(int32(k%3), offset, fmt.Appendf(nil, "k%d", k), rest, false, 1)
			offset++
		}
		cf.hold(0, offset, nil, rest, false, 1)
		offset++
		if len(cf.held) > 2*(1000+round+1)+17 {
			t.Fatalf("round %d: %d entries held for %d keys and %d keyless", round, len(cf.held), 1000, round+1)
		}
	}
	live = cf.liveHeld()
	if len(live) != 1000+100 {
		t.Fatalf("%d held, want 1,000 keys and 100 keyless", len(live))
	}
	for i := 1; i < len(live); i++ {
		if live[i].offset <= live[i-1].offset {
			t.Fatalf("held out of order at %d: %d after %d", i, live[i].offset, live[i-1].offset)
		}
	}
	want := 0
	for _, h := range live {
		want += heldCost(h.key, h.rest)
	}
	if dead := len(cf.held) - len(live); cf.bytes != want+dead*heldOverhead {
		t.Errorf("bytes counted %d, want %d (%d live, %d superseded)", cf.bytes, want+dead*heldOverhead, len(live), dead)
	}
	for k, i := range cf.byKey {
		if h := cf.held[i]; h.rest == nil || string(h.key) != k.key || h.partition != k.partition {
			t.Fatalf("key %v points at %+v", k, h)
		}
	}
}

// liveHeld returns the held entries not superseded.
func (cf *conflation) liveHeld() []heldFrame {
	var out []heldFrame
	for _, h := range cf.held {
		if h.rest != nil {
			out = append(out, h)
		}
	}
	return out
}

// TestConflatedPodBound: what all the conflated streams of a pod hold is bounded together (ConflatedBytes):
// past it, a stream that holds anything sends at once, however little it holds itself; a stream that sent
// what it held, or ended without sending it, no longer counts it.
func TestConflatedPodBound(t *testing.T) {
	s := NewServer(Config{})
	rest := []byte("data: " + string(make([]byte, 1000)) + "\n\n")
	streams := make([]*conn, 40)
	for i := range streams {
		streams[i] = &conn{s: s, p: kept{Conflate: MaxConflate}, stats: &Stats{}}
	}
	// Each of the 40 holds 1,000 keys of 1 KB once (within its own 1 MiB bound): 40 MB together.
	for i, c := range streams {
		cf := c.conflating()
		for k := range 900 {
			cf.hold(0, int64(k), fmt.Appendf(nil, "k%d", k), rest, false, 1)
		}
		if over := s.conflated.Load() > ConflatedBytes; (cf.due == 1) != over {
			t.Fatalf("stream %d: pod holds %d bytes (bound %d), but due %d", i, s.conflated.Load(), ConflatedBytes, cf.due)
		}
	}
	if s.conflated.Load() <= ConflatedBytes {
		t.Fatalf("the pod holds %d bytes: the test did not pass the bound", s.conflated.Load())
	}
	want := int64(0)
	for _, c := range streams {
		want += int64(c.cf.bytes)
	}
	if got := s.conflated.Load(); got != want {
		t.Fatalf("the pod counts %d bytes, its streams hold %d", got, want)
	}
	// Half send what they hold, half end without sending it: nothing is counted any more.
	for i, c := range streams {
		if i%2 == 0 {
			c.flushDue(0)
		} else {
			c.end(ReasonClientGone)
		}
	}
	if got := s.conflated.Load(); got != 0 {
		t.Errorf("after every stream sent or ended, the pod counts %d bytes held", got)
	}
}
