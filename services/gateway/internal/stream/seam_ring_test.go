package stream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestSeamRingShrinksUnderReader: a stream far behind the head, stuck in a write to a client that does not
// read, has the frames it still has to send evicted when its ring shrinks (as a ring budget moves memory to
// another topic). It catches up from Kafka and the client gets every record once, in order: a shrink is the
// same for streams as the ring wrapping.
func TestSeamRingShrinksUnderReader(t *testing.T) {
	for _, writers := range []int{0, 2} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 3)
			pad := strings.Repeat("x", 1000)
			const before, live = 3000, 100
			for o := range before {
				for p := range int32(3) {
					produce(kc, "t", p, fmt.Sprintf("%d-%d-%s", p, o, pad))
				}
			}
			pd := startPod(t, kc, "t", podOpts{writers: writers, feed: func(c *feed.Config) { c.RingBytes = 32 << 20 }})
			pd.waitReady(t)
			if n := pd.topic.Ring.Stats().Frames; n != 3*before {
				t.Fatalf("the ring holds %d frames after the prefill, want %d", n, 3*before)
			}
			c := pd.open(t, "", "v1:0-0.1-0.2-0")
			// The client does not read: its parser fills its channel, then the sockets fill, and the stream
			// stops in a write thousands of frames behind the head.
			waitUntil(t, "the client's buffer to fill", func() bool { return len(c.evs) == cap(c.evs) })
			stuck := pd.stats.Frames.Load()
			if stuck >= 3*before-1 {
				t.Fatalf("the stream wrote %d frames: not behind", stuck)
			}
			for o := before; o < before+live; o++ {
				for p := range int32(3) {
					produce(kc, "t", p, fmt.Sprintf("%d-%d-%s", p, o, pad))
				}
			}
			waitUntil(t, "the live records in the ring", func() bool { return pd.topic.Ring.Stats().Head == 3*(before+live) })
			pd.topic.Ring.SetCapacity(64 << 10)
			if st := pd.topic.Ring.Stats(); st.Memory > st.Capacity || st.Tail <= uint64(stuck)+1024 {
				t.Fatalf("after the shrink: %+v, the stream was at frame %d", st, stuck)
			}
			next, last := [3]int{1, 1, 1}, ""
			for next != [3]int{before + live, before + live, before + live} {
				ev := c.next(t)
				var p, o int
				if _, err := fmt.Sscanf(ev.Data, "%d-%d-", &p, &o); err != nil {
					t.Fatalf("event %q %.40q: %v", ev.Type, ev.Data, err)
				}
				if o != next[p] {
					t.Fatalf("partition %d: offset %d, want %d (a gap or a duplicate)", p, o, next[p])
				}
				next[p]++
				last = ev.ID
			}
			if want := fmt.Sprintf("v1:0-%d.1-%d.2-%d", before+live-1, before+live-1, before+live-1); last != want {
				t.Fatalf("last id %s, want %s", last, want)
			}
			if pd.stats.ResumedFromKafka.Load() == 0 {
				t.Fatal("the stream did not catch up from Kafka")
			}
			select {
			case ev, ok := <-c.evs:
				if ok {
					t.Fatalf("an event after the last record: %+v", ev)
				}
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}

// TestSeamBudgetMovesUnderReader: with a ring budget shared by two topics, traffic moving to the other topic
// shrinks the ring of a stream stuck far behind to its floor; the stream catches up from Kafka and its client
// gets every record once, in order, and the rings never add up to more than the budget.
func TestSeamBudgetMovesUnderReader(t *testing.T) {
	for _, writers := range []int{0, 2} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 1)
			kc.CreateTopic("u", 1)
			pad := strings.Repeat("x", 1000)
			const before, live = 20000, 10
			for o := range before {
				produce(kc, "t", 0, fmt.Sprintf("0-%d-%s", o, pad))
			}
			const budget, floor = 64 << 20, 256 << 10
			pd := startPod(t, kc, "t", podOpts{writers: writers, feed: func(c *feed.Config) {
				c.Topics, c.Prefill = []string{"t", "u"}, before
				c.RingBudget, c.RingFloor = budget, floor
				c.RingRebalance, c.RingHalfLife = 20*time.Millisecond, 20*time.Millisecond
			}})
			pd.waitReady(t)
			u := pd.f.Topic("u").Ring()
			// checkBudget reads the two capacities as one state of the rings: t's before and after u's, until
			// both reads agree. (The balancer shrinks one ring, then grows the other: t read before a step and u
			// after it would add up to more than the rings ever held.)
			checkBudget := func() {
				t.Helper()
				for {
					tc := pd.topic.Ring.Stats().Capacity
					uc := u.Stats().Capacity
					if pd.topic.Ring.Stats().Capacity != tc {
						continue
					}
					if sum := tc + uc; sum > budget {
						t.Fatalf("the rings' capacities add up to %d, over the budget %d", sum, budget)
					}
					return
				}
			}
			waitUntil(t, "the prefill in the ring", func() bool { return pd.topic.Ring.Stats().Frames == before })
			c := pd.open(t, "", "v1:0-0")
			waitUntil(t, "the client's buffer to fill", func() bool { return len(c.evs) == cap(c.evs) })
			stuck := pd.stats.Frames.Load()
			if stuck >= before-1 {
				t.Fatalf("the stream wrote %d frames: not behind", stuck)
			}
			// The traffic moves to u: t's share falls to the floor, and the frames the stream still has to
			// send leave the ring.
			for i := 0; pd.topic.Ring.Stats().Capacity > floor; i++ {
				if i > 2000 {
					t.Fatalf("t's ring still has %d after the traffic moved to u", pd.topic.Ring.Stats().Capacity)
				}
				for range 20 {
					produce(kc, "u", 0, pad)
				}
				checkBudget()
				time.Sleep(time.Millisecond) // traffic spread over time, for the balancer to measure
			}
			if st := pd.topic.Ring.Stats(); st.Tail <= uint64(stuck)+1024 || st.Memory > st.Capacity || st.Frames < 100 {
				t.Fatalf("t's ring after the shrink: %+v, the stream was at frame %d", st, stuck)
			}
			for o := before; o < before+live; o++ {
				produce(kc, "t", 0, fmt.Sprintf("0-%d-%s", o, pad))
			}
			for want := 1; want < before+live; want++ {
				ev := c.next(t)
				var p, o int
				if _, err := fmt.Sscanf(ev.Data, "%d-%d-", &p, &o); err != nil || o != want {
					t.Fatalf("event %.30q (%v), want offset %d", ev.Data, err, want)
				}
				if ev.ID != fmt.Sprintf("v1:0-%d", o) {
					t.Fatalf("offset %d with id %s", o, ev.ID)
				}
			}
			if pd.stats.ResumedFromKafka.Load() == 0 {
				t.Fatal("the stream did not catch up from Kafka")
			}
			checkBudget()
		})
	}
}

// TestSeamSlowConflate: on a topic with SlowConflate, a stream that falls behind the ring goes on conflated
// instead of reading every record it missed: its client gets fewer frames than records, each key's latest
// value, each partition's offsets ascending, and its last id is the topic's end, as a resume would need.
func TestSeamSlowConflate(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	const keys, rounds = 10, 400
	pad := strings.Repeat("x", 2000) // 16 MB in all: more than the sockets between the stream and its client hold
	send := func(round int) {
		for k := range keys {
			kc.Produce("t", &kgo.Record{Partition: int32(k % 2), Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d=%d %s", k, round, pad)})
		}
	}
	for r := range rounds {
		send(r)
	}
	pd := startPod(t, kc, "t", podOpts{writers: 2, feed: func(c *feed.Config) { c.RingBytes = 32 << 20 }})
	pd.waitReady(t)
	pd.topic.SlowConflate = 250 * time.Millisecond
	c := pd.open(t, "", "v1:0-0.1-0")
	// The client does not read: the stream stops in a write far behind the head, and the ring shrinks
	// past it.
	waitUntil(t, "the client's buffer to fill", func() bool { return len(c.evs) == cap(c.evs) })
	for r := rounds; r < 2*rounds; r++ {
		send(r)
	}
	waitUntil(t, "the live records in the ring", func() bool { return pd.topic.Ring.Stats().Head == 2*rounds*keys })
	pd.topic.Ring.SetCapacity(64 << 10)
	last := map[string]string{}
	offsets := [2]int64{-1, -1}
	frames, id := 0, ""
	for id != fmt.Sprintf("v1:0-%d.1-%d", rounds*keys-1, rounds*keys-1) {
		ev := c.next(t)
		pos := position.MustParse(ev.ID)
		for p := range int32(2) {
			if o, _ := pos.Offset(p); o < offsets[p] {
				t.Fatalf("partition %d went back from %d to %d", p, offsets[p], o)
			}
		}
		offsets[0], _ = pos.Offset(0)
		offsets[1], _ = pos.Offset(1)
		key, _, _ := strings.Cut(ev.Data, "=")
		last[key] = strings.Fields(ev.Data)[0]
		frames++
		id = ev.ID
	}
	for k := range keys {
		if want := fmt.Sprintf("k%d=%d", k, 2*rounds-1); last[fmt.Sprint("k", k)] != want {
			t.Errorf("key k%d ended at %q, want %s", k, last[fmt.Sprint("k", k)], want)
		}
	}
	if n := pd.stats.SlowConflated.Load(); n != 1 || frames >= 2*rounds*keys-1 {
		t.Fatalf("%d frames of %d records, %d streams conflated; want conflation to have left records out, once", frames, 2*rounds*keys, n)
	}
	t.Logf("%d frames for %d records", frames, 2*rounds*keys)
}
