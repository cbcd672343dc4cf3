package feed

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readyFeed makes a feed of topics a and b with no cluster: the test plays the refresher (assign) and the
// fetch loop (publish). Topic a is assigned at the feed's first refresh with partition 0 ten records behind
// (prefill), partition 1 empty; b is not (absent from Kafka).
func readyFeed(t *testing.T) (f *Feed, a, b *Topic) {
	t.Helper()
	f, err := NewWith(Config{Topics: []string{"a", "b"}, RingBytes: 1 << 20, Prefill: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b = f.Topic("a"), f.Topic("b")
	a.assign([]int32{0, 1}, map[int32]int64{0: 10, 1: 0}, map[int32]int64{0: 0, 1: 0}, true, 100)
	f.refreshed.Store(true)
	return f, a, b
}

// read publishes records [from, to) of partition p of tp, as a fetch that reports the last stable offset lso.
func read(tp *Topic, p int32, from, to, lso int64) {
	x := Fetched{Topic: tp.name, Partition: p, First: from, Next: to, LastStable: lso, LogStart: 0}
	for o := from; o < to; o++ {
		x.Records = append(x.Records, &kgo.Record{Topic: tp.name, Partition: p, Offset: o, Value: []byte("v")})
	}
	tp.publish([]Fetched{x})
}

// hold takes tp's lock as the fetch loop does while it frames a poll (which takes long with a prefill or a
// busy machine), and returns its release; the lock is released when the test ends too.
func hold(t *testing.T, tp *Topic) (release func()) {
	t.Helper()
	tp.mu.Lock()
	done := false
	release = func() {
		if !done {
			done = true
			tp.mu.Unlock()
		}
	}
	t.Cleanup(release)
	return release
}

// answer calls fn on another goroutine and returns its result, or fails t when fn has not returned within
// 5 s: fn must not wait for a topic's lock, which the test holds meanwhile (without the bound a lock it waits
// for would hang the test until the end).
func answer[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s is waiting for a topic's lock held by the fetch loop (no answer after 5 s)", what)
		panic("unreachable")
	}
}

type readiness struct {
	ok  bool
	why string
}

func ready(f *Feed) func() readiness {
	return func() readiness { ok, why := f.Ready(); return readiness{ok, why} }
}

// lags returns Lag's answer as "topic/partition=lag" sorted.
func lags(f *Feed) func() string {
	return func() string {
		var out []string
		f.Lag(func(topic string, p int32, lag int64) { out = append(out, fmt.Sprintf("%s/%d=%d", topic, p, lag)) })
		sort.Strings(out)
		return strings.Join(out, " ")
	}
}

// TestReadyTakesNoTopicLock: /readyz (Feed.Ready) and the scrapes (Lag, Progress) answer while the fetch loop
// holds a topic's lock for a whole poll. Before, Ready took every topic's lock: a poll framed longer than the
// probe's timeout failed the readiness probe, on every pod at once since every pod reads every partition.
func TestReadyTakesNoTopicLock(t *testing.T) {
	f, a, b := readyFeed(t)
	b.assign([]int32{0}, map[int32]int64{0: 0}, map[int32]int64{0: 0}, true, 100)

	release := hold(t, a)
	got := answer(t, "Ready, not ready yet,", ready(f))
	if got.ok || got.why != "topic a partition 0 not caught up" {
		t.Errorf("Ready = %+v, want not ready: topic a partition 0 not caught up", got)
	}
	if got := answer(t, "Lag", lags(f)); got != "a/0=10 a/1=0 b/0=0" {
		t.Errorf("Lag = %s, want a/0=10 a/1=0 b/0=0", got)
	}
	records := answer(t, "Progress", func() int64 {
		var n int64
		f.Progress(func(_ string, _ int32, records, _ int64) { n += records })
		return n
	})
	if records != 0 {
		t.Errorf("Progress: %d records, want 0", records)
	}
	release()

	read(a, 0, 0, 10, 10)
	release = hold(t, b)
	if got := answer(t, "Ready", ready(f)); !got.ok {
		t.Errorf("Ready = %+v, want ready", got)
	}
	release()
}

// TestReadyLatches: readiness says why it waits until every topic exists, has every partition assigned and
// has read them up to where reading began; from then on it stays ready, whatever Kafka and the lag do, and
// answers at once while the fetch loop holds a topic's lock.
func TestReadyLatches(t *testing.T) {
	f, err := NewWith(Config{Topics: []string{"a", "b"}, RingBytes: 1 << 20, Prefill: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.Topic("a"), f.Topic("b")
	check := func(step string, want readiness) {
		t.Helper()
		if got := answer(t, "Ready", ready(f)); got != want {
			t.Fatalf("%s: Ready = %+v, want %+v", step, got, want)
		}
	}
	check("before the first refresh", readiness{false, "kafka metadata not loaded yet"})
	// The first refresh: a exists, its partition 0 ten records behind (prefill) and the end offset of its
	// partition 1 not listed yet; b does not exist.
	a.assign([]int32{0, 1}, map[int32]int64{0: 10}, map[int32]int64{0: 0, 1: 0}, true, 100)
	f.refreshed.Store(true)
	check("a's partition 1 not assigned", readiness{false, "topic a has partitions not assigned yet"})
	a.assign([]int32{0, 1}, map[int32]int64{0: 10, 1: 0}, map[int32]int64{0: 0, 1: 0}, false, 100)
	check("a's prefill being read", readiness{false, "topic a partition 0 not caught up"})
	read(a, 0, 0, 6, 10)
	check("a's prefill half read", readiness{false, "topic a partition 0 not caught up"})
	read(a, 0, 6, 10, 10)
	check("b absent", readiness{false, "topic b does not exist in kafka"})
	// b is created: read from its start, with nothing to wait for.
	b.assign([]int32{0}, map[int32]int64{0: 0}, map[int32]int64{0: 0}, false, 100)
	check("caught up", readiness{true, ""})

	// Later lag: a broker blip, records arriving faster than they are read.
	a.publish([]Fetched{{Topic: "a", Partition: 0, First: -1, Next: 10, LastStable: 1000, LogStart: 0}})
	check("a partition 1000 offsets behind", readiness{true, ""})
	if got := lags(f)(); !strings.Contains(got, "a/0=990") {
		t.Errorf("Lag = %s, want a/0=990", got)
	}
	// The topic deleted and created again: it is read again from its start.
	a.setID([16]byte{1})
	a.recreated([16]byte{2}, []int32{0, 1})
	check("a created again", readiness{true, ""})
	// The view of a partition table in which a partition is behind the offset it must reach: the latch
	// answers, not the view.
	a.mu.Lock()
	a.parts[0].ready = 1 << 40
	a.storeView()
	a.mu.Unlock()
	check("a view that is behind", readiness{true, ""})
	// A slow poll: the fetch loop holds a topic's lock.
	hold(t, a)
	check("a's lock held", readiness{true, ""})
}
