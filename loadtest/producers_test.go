package main

import (
	"context"
	"hash/fnv"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// TestDueOfSplitsTheRate: the producers' shares add up to the whole rate at every moment, none is more than
// one record ahead of another, and one producer has the whole rate.
func TestDueOfSplitsTheRate(t *testing.T) {
	for _, rate := range []float64{0.5, 3, 100, 1234.5} {
		for _, n := range []int{1, 2, 3, 4, 7} {
			for ms := 0; ms <= 5000; ms += 37 {
				elapsed := time.Duration(ms) * time.Millisecond
				total := int64(rate * elapsed.Seconds())
				var sum, lo, hi int64
				for i := range n {
					d := dueOf(i, n, rate, elapsed)
					if i == 0 || d < lo {
						lo = d
					}
					hi = max(hi, d)
					if i > 0 && d > dueOf(i-1, n, rate, elapsed) {
						t.Fatalf("rate %v, %d producers, %v: producer %d is due more than producer %d", rate, n, elapsed, i, i-1)
					}
					sum += d
				}
				if sum != total || hi-lo > 1 {
					t.Fatalf("rate %v, %d producers, %v: shares add up to %d (want %d), from %d to %d", rate, n, elapsed, sum, total, lo, hi)
				}
			}
		}
	}
}

// fakeTopic is a topic in memory that fakeClients append to as a broker does: each client's records in the
// order it handed them over, each partition's offsets in the order the records arrived. Every partition
// starts with one record (offset 0), as the warm-up records leave it.
type fakeTopic struct {
	mu    sync.Mutex
	parts [][]fakeRecord
}

// fakeRecord is one record of a fakeTopic: which producer wrote it, and its value.
type fakeRecord struct {
	producer int
	value    string
}

func newFakeTopic(parts int) *fakeTopic {
	t := &fakeTopic{parts: make([][]fakeRecord, parts)}
	for p := range t.parts {
		t.parts[p] = []fakeRecord{{producer: -1, value: `{"ts":1,"seq":-1,"pad":""}`}}
	}
	return t
}

// fakeClient is a producerClient that acknowledges what it holds every 100 us, in order, as one produce
// request would. It counts the records handed over and not yet acknowledged, and the most of them at once.
type fakeClient struct {
	topic *fakeTopic
	id    int

	mu          sync.Mutex
	held        []fakePending // handed over, not yet appended to the topic
	unacked     int           // handed over, promise not yet called
	maxUnacked  int
	handed      int
	stopAcking  chan struct{}
	stopOnce    sync.Once
	acknowledge sync.WaitGroup
}

type fakePending struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

func newFakeClient(topic *fakeTopic, id int) *fakeClient {
	c := &fakeClient{topic: topic, id: id, stopAcking: make(chan struct{})}
	c.acknowledge.Go(c.ackLoop)
	return c
}

func (c *fakeClient) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = append(c.held, fakePending{r, promise})
	c.unacked++
	c.maxUnacked = max(c.maxUnacked, c.unacked)
	c.handed++
}

// Flush waits until every record handed over has had its promise called.
func (c *fakeClient) Flush(ctx context.Context) error {
	for {
		c.mu.Lock()
		n := c.unacked
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// ackLoop appends what the client holds to the topic, by the hash of each record's key, and calls the
// promises, until close. A record stops counting as unacknowledged just before its promise is called, which
// frees its place in the producer's window.
func (c *fakeClient) ackLoop() {
	for {
		select {
		case <-c.stopAcking:
			return
		case <-time.After(100 * time.Microsecond):
		}
		c.mu.Lock()
		batch := c.held
		c.held = nil
		c.mu.Unlock()
		c.topic.mu.Lock()
		for _, p := range batch {
			h := fnv.New32a()
			_, _ = h.Write(p.r.Key)
			part := int(h.Sum32() % uint32(len(c.topic.parts)))
			c.topic.parts[part] = append(c.topic.parts[part], fakeRecord{producer: c.id, value: string(p.r.Value)})
		}
		c.topic.mu.Unlock()
		for _, p := range batch {
			c.mu.Lock()
			c.unacked--
			c.mu.Unlock()
			p.promise(p.r, nil)
		}
	}
}

func (c *fakeClient) close() {
	c.stopOnce.Do(func() { close(c.stopAcking) })
	c.acknowledge.Wait()
}

// runFakeProducers runs n producers at rate (window records in flight each) on fake clients of one topic of
// three partitions for d, and returns the topic, the clients and the producers' counts.
func runFakeProducers(t *testing.T, n int, rate float64, window int, d time.Duration) (*fakeTopic, []*fakeClient, *produceStats, time.Duration) {
	t.Helper()
	topic := newFakeTopic(3)
	cls := make([]*fakeClient, n)
	ps := make([]*producer, n)
	for i := range n {
		cls[i] = newFakeClient(topic, i)
		t.Cleanup(cls[i].close)
		ps[i] = &producer{cl: cls[i], i: i, n: n, rate: rate, window: window, size: 64, keys: 100}
	}
	var st produceStats
	t0 := time.Now()
	stop := startProducers(context.Background(), ps, &st)
	time.Sleep(d)
	stop()
	return topic, cls, &st, time.Since(t0)
}

// TestProducersShareOneSequence: several producers as fast as they go each keep their window full and no
// fuller, every record handed over is acknowledged by the end (the flush), and the seqs of all of them
// together are 0, 1, 2, ... once each, each producer's increasing in every partition, the producers' records
// interleaved.
func TestProducersShareOneSequence(t *testing.T) {
	const n, window = 3, 16
	topic, cls, st, _ := runFakeProducers(t, n, 0, window, 50*time.Millisecond)
	if st.sent.Load() == 0 || st.acked.Load() != st.sent.Load() || st.failed.Load() != 0 {
		t.Fatalf("sent %d, acknowledged %d, failed %d", st.sent.Load(), st.acked.Load(), st.failed.Load())
	}
	for _, c := range cls {
		if c.handed == 0 || c.maxUnacked != window {
			t.Errorf("producer %d handed over %d records, %d at most at once (window %d)", c.id, c.handed, c.maxUnacked, window)
		}
	}
	seen := make([]bool, st.sent.Load())
	for p, recs := range topic.parts {
		last := map[int]int64{}
		for off, rec := range recs[1:] {
			seq, ok := seqOf(rec.value)
			if !ok || seq < 0 || seq >= int64(len(seen)) || seen[seq] {
				t.Fatalf("partition %d offset %d: seq %d (ok %v) out of range or repeated", p, off+1, seq, ok)
			}
			seen[seq] = true
			if l, ok := last[rec.producer]; ok && seq <= l {
				t.Fatalf("partition %d offset %d: producer %d's seq %d after its %d", p, off+1, rec.producer, seq, l)
			}
			last[rec.producer] = seq
		}
	}
	for seq, ok := range seen {
		if !ok {
			t.Fatalf("seq %d is in no partition", seq)
		}
	}
	if !interleaved(topic) {
		t.Fatal("every partition's seqs increase: the producers did not interleave, so the test checked nothing")
	}
}

// interleaved reports whether a partition of topic has a record with a lower seq after one with a higher: the
// records of several producers interleaved.
func interleaved(topic *fakeTopic) bool {
	for _, recs := range topic.parts {
		prev := int64(-1)
		for _, rec := range recs[1:] {
			seq, _ := seqOf(rec.value)
			if seq < prev {
				return true
			}
			prev = seq
		}
	}
	return false
}

// TestProducersSplitTheRate: n producers at a rate together produce that rate, not n times it, and each
// takes its share.
func TestProducersSplitTheRate(t *testing.T) {
	const n, rate = 4, 4000.0
	_, cls, st, elapsed := runFakeProducers(t, n, rate, maxProducerInFlight, 250*time.Millisecond)
	sent := float64(st.sent.Load())
	if want := rate * elapsed.Seconds(); sent > want+n || sent < want/2 {
		t.Fatalf("sent %.0f records in %v at %v/s, want about %.0f", sent, elapsed, rate, want)
	}
	for _, c := range cls {
		if share := float64(c.handed) / sent; share < 0.5/n || share > 1.5/n {
			t.Errorf("producer %d handed over %d of %.0f records", c.id, c.handed, sent)
		}
	}
}

// delivery is one record a gateway delivers: its partition and offset.
type delivery struct {
	part int
	off  int
}

// deliverTopic is the order a gateway delivers topic in to one reader starting at offset 1 of every
// partition: each record in turn from the partitions in rotation.
func deliverTopic(topic *fakeTopic) []delivery {
	next := make([]int, len(topic.parts))
	var ds []delivery
	for more := true; more; {
		more = false
		for p, recs := range topic.parts {
			if next[p]+1 < len(recs) {
				next[p]++
				ds = append(ds, delivery{p, next[p]})
				more = true
			}
		}
	}
	return ds
}

// eventsOf returns the events of the deliveries ds of topic: each record's value, with the v1 id of the
// position after it (its partition at its offset, the others where the deliveries before it left them).
func eventsOf(t *testing.T, topic *fakeTopic, ds []delivery) []sse.Event {
	t.Helper()
	es := make([]position.Entry, len(topic.parts))
	for p := range es {
		es[p] = position.Entry{Partition: int32(p)}
	}
	evs := make([]sse.Event, len(ds))
	for i, d := range ds {
		es[d.part].Offset = int64(d.off)
		v, err := position.FromEntries(es)
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = sse.Event{ID: v.String(), Data: topic.parts[d.part][d.off].value}
	}
	return evs
}

// TestTrackerInterleavedProducers: a reader of a topic that several producers wrote to at once, their
// records interleaved in every partition and their seqs out of order, is checked by offset: everything
// delivered once is clean, and a record left out, a record twice or two records of a partition swapped are
// caught.
func TestTrackerInterleavedProducers(t *testing.T) {
	topic, _, st, _ := runFakeProducers(t, 3, 0, 8, 20*time.Millisecond)
	ds := deliverTopic(topic)
	if int64(len(ds)) != st.acked.Load() || !interleaved(topic) {
		t.Fatalf("%d deliveries for %d records, interleaved %v", len(ds), st.acked.Load(), interleaved(topic))
	}
	ends := make([]int64, len(topic.parts))
	for p, recs := range topic.parts {
		ends[p] = int64(len(recs))
	}
	check := func(ds []delivery) trackerCounts {
		var (
			c  client
			sh shared
			h  histogram
		)
		sh.hist.Store(&h)
		if err := c.tr.open("v1:0-0.1-0.2-0", time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, ev := range eventsOf(t, topic, ds) {
			if err := c.event(&sh, ev, true); err != nil {
				t.Fatal(err)
			}
		}
		c.tr.finish(ends)
		if h.Count() != int64(len(ds)) {
			t.Fatalf("%d latencies of %d events", h.Count(), len(ds))
		}
		return c.tr.counts()
	}
	if got := check(ds); got != (trackerCounts{Delivered: int64(len(ds))}) {
		t.Fatalf("every record once: counts %+v, want %d delivered", got, len(ds))
	}
	k := len(ds) / 2
	dropped := append(append([]delivery{}, ds[:k]...), ds[k+1:]...)
	if got := check(dropped); got.Lost != 1 || got.Dup != 0 {
		t.Errorf("one record left out: counts %+v, want 1 lost", got)
	}
	twice := append(append(append([]delivery{}, ds[:k+1]...), ds[k]), ds[k+1:]...)
	if got := check(twice); got.Lost != 0 || got.Dup != 1 {
		t.Errorf("one record twice: counts %+v, want 1 duplicated", got)
	}
	// Delivery j is the next record of delivery k's partition.
	j := k + 1
	for ds[j].part != ds[k].part {
		j++
	}
	swapped := append([]delivery{}, ds...)
	swapped[k], swapped[j] = swapped[j], swapped[k]
	if got := check(swapped); got.Lost != 1 || got.Dup != 1 {
		t.Errorf("two records of a partition swapped: counts %+v, want 1 lost (skipped) and 1 duplicated (gone back)", got)
	}
}

// TestBoundOf: the readers falling behind is the gateway's bound whatever the producers did; otherwise the
// producers are the bound when short of the target or without one, and nothing when the target was met.
func TestBoundOf(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		rate     float64
		produced float64
		catchUp  time.Duration
		caughtUp bool
		want     string
	}{
		{"full rate, the readers kept up", 0, 25000, 40 * ms, true, boundProducer},
		{"full rate, the readers fell behind", 0, 25000, 3 * time.Second, true, boundGateway},
		{"full rate, a reader never caught up", 0, 25000, 0, false, boundGateway},
		{"full rate, just at the limit", 0, 25000, lagLimit, true, boundProducer},
		{"full rate, just past the limit", 0, 25000, lagLimit + ms, true, boundGateway},
		{"the target met, the readers kept up", 1000, 998, 30 * ms, true, boundNone},
		{"the target met, the readers fell behind", 1000, 1000, 2 * time.Second, true, boundGateway},
		{"short of the target, the readers kept up", 1000, 900, 30 * ms, true, boundProducer},
		{"short of the target, the readers fell behind", 1000, 900, 5 * time.Second, true, boundGateway},
		{"just short of the target", 1000, 949, 30 * ms, true, boundProducer},
		{"within the shortfall", 1000, 951, 30 * ms, true, boundNone},
	}
	for _, tc := range tests {
		if got := boundOf(tc.rate, tc.produced, tc.catchUp, tc.caughtUp); got != tc.want {
			t.Errorf("%s: bound %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCatchUp: the catch-up is the last reader's, timed from the end of producing; a failed reader does not
// count, and one that never caught up makes the run not caught up.
func TestCatchUp(t *testing.T) {
	t1 := time.Unix(1000, 0)
	cs := []*client{{n: 0}, {n: 1}, {n: 2}}
	for _, c := range cs {
		if err := c.tr.open("v1:0-4", t1.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	setCatchUpTargets(cs, []int64{6})
	cs[0].tr.frame("v1:0-5", &lazyClock{t1.Add(10 * time.Millisecond)})
	cs[0].tr.frame("v1:0-6", &lazyClock{t1.Add(20 * time.Millisecond)}) // past the target: no later stamp
	cs[1].tr.frame("v1:0-5", &lazyClock{t1.Add(300 * time.Millisecond)})
	cs[2].failed.Store(true)
	now := t1.Add(2 * time.Second)
	if d, ok := catchUp(cs, t1, now); !ok || d != 300*time.Millisecond {
		t.Fatalf("catch-up %v (caught up %v), want 300ms", d, ok)
	}
	cs[2].failed.Store(false)
	if d, ok := catchUp(cs, t1, now); ok || d != 2*time.Second {
		t.Fatalf("with a reader behind: catch-up %v (caught up %v), want 2s and not caught up", d, ok)
	}
}

// TestSteadySummaryBound: the steady line has the producers, their rate, the catch-up and the bound.
func TestSteadySummaryBound(t *testing.T) {
	r := result{Mode: modeSteady, Producers: 4, ProducedPerSec: 23456.4, CatchUpSeconds: 2.345, CaughtUp: true, Bound: boundGateway}
	want := " deliveries/s=0 producers=4 produced/s=23456 catch_up=2.35s bound=gateway p50=-"
	if s := r.summary(); !strings.Contains(s, want) {
		t.Fatalf("summary %s\nwant it to contain %q", s, want)
	}
	r.CaughtUp = false
	if s := r.summary(); !strings.Contains(s, " catch_up=- bound=gateway") {
		t.Fatalf("not caught up: summary %s", s)
	}
}

// TestParseProducers: --producers and --producer-in-flight in the modes that produce at a rate, and the
// window's default for the rate.
func TestParseProducers(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args   []string
		n      int
		window int
	}{
		{nil, 1, inFlightAtRate},
		{[]string{"--rate=0"}, 1, inFlightAtFull},
		{[]string{"--producers=4", "--rate=0"}, 4, inFlightAtFull},
		{[]string{"--producers=4", "--producer-in-flight=8", "--mode=storm"}, 4, 8},
		{[]string{"--producers=64", "--mode=slow"}, 64, inFlightAtRate},
	} {
		c, err := parseConfig(tc.args, env, io.Discard)
		if err != nil {
			t.Fatalf("parseConfig(%v): %v", tc.args, err)
		}
		if c.Producers != tc.n || c.producerWindow() != tc.window {
			t.Errorf("parseConfig(%v): %d producers, %d in flight; want %d, %d", tc.args, c.Producers, c.producerWindow(), tc.n, tc.window)
		}
	}
	for _, args := range [][]string{
		{"--producers=0"},
		{"--producers=65"},
		{"--producer-in-flight=-1"},
		{"--producer-in-flight=100001"},
		{"--producers=2", "--mode=idle"},
		{"--producers=2", "--mode=resume"},
		{"--producer-in-flight=10", "--mode=idle"},
	} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
}
