package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// The seam tests run whole gateway pods (feed, ring, replay pool, streams, HTTP on loopback) against an
// in-memory Kafka log (memlog), so that the topic shapes real clusters have are table-tested in
// milliseconds. The app package's tests prove the same behaviors against a real broker.

// pod is one gateway pod reading a memlog cluster.
type pod struct {
	f      *feed.Feed
	topic  *Topic
	topics map[string]*Topic // every topic the pod serves: topic and podOpts.more
	hs     *httptest.Server
	srv    *Server
	stats  *Stats
}

// podOpts change a pod's feed and stream settings.
type podOpts struct {
	feed    func(*feed.Config)
	writers int
	// params, when set, changes each stream's parameters as the gateway's handler would (a token's scope
	// and expiry); an error is a 403.
	params func(r *http.Request, p *Params) error
	// replayLog is where the pod's replays read; nil means the cluster itself.
	replayLog replay.Log
	// more are topics the pod serves besides its first: GET /a,b is then a stream of several topics.
	more []string
}

func startPod(t *testing.T, kc *memlog.Cluster, topic string, o podOpts) *pod {
	t.Helper()
	fc := feed.Config{Topics: append([]string{topic}, o.more...), RingBytes: 1 << 20, MetadataInterval: 50 * time.Millisecond, Prefill: 10000, Logger: discardLog}
	if o.feed != nil {
		o.feed(&fc)
	}
	f, err := feed.NewWith(fc, kc.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.Run(ctx); close(done) }()
	var rl replay.Log = kc
	if o.replayLog != nil {
		rl = o.replayLog
	}
	pool := replay.NewPool(replay.Config{Idle: time.Second, BlockSize: 64}, rl)
	srv := NewServer(Config{Writers: o.writers, Logger: discardLog, Drain: 0})
	pd := &pod{f: f, topic: NewTopic(f, topic, pool, false), topics: map[string]*Topic{}, srv: srv, stats: new(Stats)}
	pd.topics[topic] = pd.topic
	for _, name := range o.more {
		pd.topics[name] = NewTopic(f, name, pool, false)
	}
	pd.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		names := []string{topic}
		if path := strings.TrimPrefix(r.URL.Path, "/"); path != "" {
			names = strings.Split(path, ",")
		}
		ps, err := ParseTopicParams(r.URL.Query(), r.Header, 0, names)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ts []TopicStream
		for i, name := range names {
			if o.params != nil {
				if err := o.params(r, &ps[i]); err != nil {
					http.Error(w, err.Error(), http.StatusForbidden)
					return
				}
			}
			ts = append(ts, TopicStream{Topic: pd.topics[name], Params: ps[i], Stats: pd.stats})
		}
		if len(ts) == 1 {
			srv.Serve(w, r, ts[0].Topic, ts[0].Params, pd.stats)
			return
		}
		srv.ServeTopics(w, r, ts, nil)
	}))
	t.Cleanup(func() {
		pd.hs.CloseClientConnections()
		pd.hs.Close()
		srv.Close()
		cancel()
		<-done
	})
	return pd
}

// waitReady waits until the pod's feed is ready.
func (pd *pod) waitReady(t *testing.T) {
	t.Helper()
	waitUntil(t, "the feed to be ready", func() bool { ok, _ := pd.f.Ready(); return ok })
}

// seamClient is a stream read with the project's WHATWG parser; every byte is kept, to count keep-alives.
type seamClient struct {
	evs  chan sse.Event
	mu   sync.Mutex
	raw  bytes.Buffer
	body io.Closer
}

func (c *seamClient) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw.Write(b)
}

// keepAlives returns how many keep-alive comments the stream has had so far.
func (c *seamClient) keepAlives() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Count(c.raw.String(), ": keep-alive\n")
}

// open opens a stream of the pod (query, e.g. "?key=k"), resuming from lastID when it is not empty.
func (pd *pod) open(t *testing.T, query, lastID string) *seamClient {
	t.Helper()
	h := http.Header{}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	return pd.openWith(t, query, h)
}

// openWith opens a stream of the pod with these request headers.
func (pd *pod) openWith(t *testing.T, query string, h http.Header) *seamClient {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, pd.hs.URL+"/"+query, nil)
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %s", query, resp.StatusCode, b)
	}
	c := &seamClient{evs: make(chan sse.Event, 1024), body: resp.Body}
	t.Cleanup(func() { _ = resp.Body.Close() })
	p := sse.NewParser(io.TeeReader(resp.Body, c))
	go func() {
		defer close(c.evs)
		for {
			ev, err := p.Next()
			if err != nil {
				return
			}
			c.evs <- ev
		}
	}()
	return c
}

// next returns the stream's next event, failing t after 5 s.
func (c *seamClient) next(t *testing.T) sse.Event {
	t.Helper()
	select {
	case ev, ok := <-c.evs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
		return sse.Event{}
	}
}

// produce appends values to a partition outside any transaction.
func produce(kc *memlog.Cluster, topic string, partition int32, values ...string) {
	for _, v := range values {
		kc.Produce(topic, &kgo.Record{Partition: partition, Value: []byte(v)})
	}
}

// resyncData decodes a resync event.
func resyncData(t *testing.T, ev sse.Event) ResyncData {
	t.Helper()
	if ev.Type != "resync" {
		t.Fatalf("event %+v, want a resync", ev)
	}
	var d ResyncData
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSeamLowWatermarkIsTruth: after DeleteRecords, a pod whose ring still holds the deleted frames and a pod
// started after the purge answer one id identically: the same retention resync, the same next event.
func TestSeamLowWatermarkIsTruth(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	a := startPod(t, kc, "t", podOpts{writers: 2})
	a.waitReady(t)
	for i := range 100 {
		produce(kc, "t", 0, fmt.Sprint(i))
	}
	waitUntil(t, "pod a to hold every record", func() bool { return a.topic.Ring.Stats().Frames == 100 })
	kc.DeleteRecords("t", 0, 50)
	b := startPod(t, kc, "t", podOpts{})
	b.waitReady(t)
	want := ResyncData{Reason: ResyncRetention, Topic: "t", Partitions: []ResyncPartition{
		{Partition: 0, Requested: 21, LowWatermark: 50, ResumesAt: 100, Skipped: 79},
	}}
	var cs []*seamClient
	for _, pd := range []*pod{a, b} {
		c := pd.open(t, "", "v1:0-20")
		ev := c.next(t)
		if d := resyncData(t, ev); fmt.Sprint(d) != fmt.Sprint(want) || ev.ID != "v1:0-99" {
			t.Fatalf("pod %s: %+v id %s, want %+v id v1:0-99", pd.hs.URL, d, ev.ID, want)
		}
		cs = append(cs, c)
	}
	produce(kc, "t", 0, "new")
	for _, c := range cs {
		if ev := c.next(t); ev.ID != "v1:0-100" || ev.Data != "new" {
			t.Fatalf("after the resync: %+v", ev)
		}
	}
	// A position the low watermark has not passed is still served from pod a's ring.
	c := a.open(t, "", "v1:0-97")
	for _, want := range []string{"98", "99", "new"} {
		if ev := c.next(t); ev.Data != want {
			t.Fatalf("resume at 98: %+v, want %s", ev, want)
		}
	}
}

// TestSeamReadyWithEmptyTails: a pod is ready although a partition's log ends with offsets that hold no
// record (an aborted transaction, two producers committing one after the other, a lone commit marker).
func TestSeamReadyWithEmptyTails(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail func(kc *memlog.Cluster)
	}{
		{"aborted transaction", func(kc *memlog.Cluster) {
			x := kc.Begin("t")
			x.Produce(&kgo.Record{Value: []byte("x1")})
			x.Produce(&kgo.Record{Value: []byte("x2")})
			x.Abort()
		}},
		{"two producers committing one after the other", func(kc *memlog.Cluster) {
			x, y := kc.Begin("t"), kc.Begin("t")
			x.Produce(&kgo.Record{Value: []byte("x")})
			y.Produce(&kgo.Record{Value: []byte("y")})
			x.Commit()
			y.Commit()
		}},
		{"commit marker", func(kc *memlog.Cluster) {
			x := kc.Begin("t")
			x.Produce(&kgo.Record{Value: []byte("x")})
			x.Commit()
		}},
	} {
		for _, prefill := range []int64{0, 3, 100} {
			t.Run(fmt.Sprintf("%s/prefill %d", tc.name, prefill), func(t *testing.T) {
				kc := memlog.New()
				kc.CreateTopic("t", 1)
				produce(kc, "t", 0, "a", "b", "c", "d", "e")
				tc.tail(kc)
				pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = prefill }})
				pd.waitReady(t)
			})
		}
	}
}

// TestSeamRangeEndsOnMarker: with prefill 0 a transactional partition's start position is its last stable
// offset minus one, a commit marker; a resume whose range ends there gets its records at once, not a replay
// failure after the idle time.
func TestSeamRangeEndsOnMarker(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	x := kc.Begin("t")
	x.Produce(&kgo.Record{Value: []byte("r0")})
	x.Produce(&kgo.Record{Value: []byte("r1")})
	x.Commit() // marker at 2
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 0 }})
	pd.waitReady(t)
	if _, id := pd.topic.Ring.Start(nil); string(id) != "v1:0-2" {
		t.Fatalf("the start position is %s, want the commit marker v1:0-2", id)
	}
	start := time.Now()
	c := pd.open(t, "", "v1:0-0")
	if ev := c.next(t); ev.Data != "r1" || ev.ID != "v1:0-1" {
		t.Fatalf("resume: %+v", ev)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("the resume took %v: the range end waited for a record", took)
	}
	produce(kc, "t", 0, "r4")
	if ev := c.next(t); ev.Data != "r4" || ev.ID != "v1:0-3" {
		t.Fatalf("after the resume: %+v", ev)
	}
	if n := pd.stats.Closed[ReasonReplayFailed].Load(); n != 0 {
		t.Errorf("%d replay failures", n)
	}
}

// keyMoving returns a key whose partition under Kafka's default partitioner is from with n partitions and
// another one with n+1.
func keyMoving(t *testing.T, topic string, n int) (key string, from, to int32) {
	t.Helper()
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for i := range 1000 {
		k := fmt.Sprintf("user-%d", i)
		a := kp.Partition(&kgo.Record{Key: []byte(k)}, n)
		b := kp.Partition(&kgo.Record{Key: []byte(k)}, n+1)
		if a != b && b == n {
			return k, int32(a), int32(b)
		}
	}
	t.Fatal("no key moves to the new partition")
	return "", 0, 0
}

// TestSeamKeyFilterPartitionsAdded: a key= stream covers the partition its key goes to after partitions are
// added, with no gap, and keeps its old partition, where producers that have not seen the new count still
// write; other keys never reach it. On both the goroutine path and the writer pool.
func TestSeamKeyFilterPartitionsAdded(t *testing.T) {
	for _, writers := range []int{0, 2} {
		t.Run(fmt.Sprintf("writers %d", writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 2)
			key, old, moved := keyMoving(t, "t", 2)
			pd := startPod(t, kc, "t", podOpts{writers: writers})
			pd.waitReady(t)
			c := pd.open(t, "?key="+key, "")
			rec := func(p int32, k, v string) {
				kc.Produce("t", &kgo.Record{Partition: p, Key: []byte(k), Value: []byte(v)})
			}
			rec(old, key, "before")
			rec(old, "other", "x")
			if ev := c.next(t); ev.Data != "before" {
				t.Fatalf("before the partition add: %+v", ev)
			}
			if writers > 0 {
				waitUntil(t, "the stream to be parked", func() bool { return pd.stats.Parked.Load() == 1 })
			}
			kc.AddPartitions("t", 1)
			// Written before the pod sees the new partition: it is read from its start.
			rec(moved, key, "moved")
			rec(moved, "other", "y")
			if ev := c.next(t); ev.Data != "moved" {
				t.Fatalf("first record of the key in the new partition: %+v", ev)
			}
			rec(old, key, "stale producer")
			if ev := c.next(t); ev.Data != "stale producer" {
				t.Fatalf("a record of the key in its old partition: %+v", ev)
			}
			// A new stream on a pod that only ever saw the new count reads the key's new partition.
			pd2 := startPod(t, kc, "t", podOpts{})
			pd2.waitReady(t)
			c2 := pd2.open(t, "?key="+key, "")
			rec(moved, key, "last")
			for _, cl := range []*seamClient{c, c2} {
				if ev := cl.next(t); ev.Data != "last" {
					t.Fatalf("last: %+v", ev)
				}
			}
		})
	}
}

// TestSeamIDNamesUndiscoveredPartition: an id naming a partition this pod has not discovered yet (the
// seconds after partitions are added) is checked with Kafka, not called invalid, and every partition's
// position is kept; a pod that knows the partition serves it from that position.
func TestSeamIDNamesUndiscoveredPartition(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	produce(kc, "t", 0, "a0", "a1", "a2")
	slow := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.MetadataInterval = time.Hour }})
	slow.waitReady(t)
	kc.AddPartitions("t", 1)
	produce(kc, "t", 1, "b0", "b1", "b2", "b3", "b4")
	c := slow.open(t, "", "v1:0-1.1-2")
	if ev := c.next(t); ev.Type != "message" || ev.Data != "a2" || ev.ID != "v1:0-2.1-2" {
		t.Fatalf("first event on the pod that does not know partition 1: %+v", ev)
	}
	if n := slow.stats.Resyncs[resyncInvalid].Load(); n != 0 {
		t.Fatalf("%d invalid-id resyncs", n)
	}
	// An id naming a partition Kafka does not have either is still invalid.
	bad := slow.open(t, "", "v1:0-1.7-2")
	if d := resyncData(t, bad.next(t)); d.Reason != ResyncInvalidID {
		t.Fatalf("partition 7: %+v", d)
	}
	fresh := startPod(t, kc, "t", podOpts{})
	fresh.waitReady(t)
	c2 := fresh.open(t, "", "v1:0-2.1-2")
	for _, want := range []string{"b3", "b4"} {
		if ev := c2.next(t); ev.Data != want {
			t.Fatalf("resume on a pod that knows partition 1: %+v, want %s", ev, want)
		}
	}
}

// TestSeamRetriedPartitionStartsAtEnd: a partition whose start could not be listed at the first refresh is
// assigned on a later one at the end, like the others, not from its log start (which would flood live
// clients with its history and evict the other partitions from the ring).
func TestSeamRetriedPartitionStartsAtEnd(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	for i := range 50 {
		produce(kc, "t", 0, fmt.Sprint("p0-", i))
		produce(kc, "t", 1, fmt.Sprint("p1-", i))
	}
	kc.HideOffsets("t", 1, 1)
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 0 }})
	pd.waitReady(t)
	if got := pd.f.Topic("t").Partitions(); len(got) != 2 {
		t.Fatalf("partitions %v", got)
	}
	if _, id := pd.topic.Ring.Start(nil); string(id) != "v1:0-49.1-49" {
		t.Fatalf("head %s, want v1:0-49.1-49", id)
	}
	c := pd.open(t, "", "")
	produce(kc, "t", 1, "live")
	if ev := c.next(t); ev.Data != "live" || ev.ID != "v1:0-49.1-50" {
		t.Fatalf("first event: %+v, want the live record", ev)
	}
	if n := pd.topic.Ring.Stats().Frames; n != 1 {
		t.Errorf("the ring holds %d frames, want 1 (prefill 0): the retried partition was read from its start", n)
	}
}

// TestSeamRingStartAfterRetentionAtStartup: when retention passes a partition's start offset before reading
// begins, the ring does not claim the records it never held; a resume there is a retention resync.
func TestSeamRingStartAfterRetentionAtStartup(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for i := range 100 {
		produce(kc, "t", 0, fmt.Sprint(i))
	}
	kc.PausePolls(true)
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 10 }})
	waitUntil(t, "the partition to be assigned", func() bool { return len(pd.f.Topic("t").Partitions()) == 1 })
	kc.DeleteRecords("t", 0, 95)
	kc.PausePolls(false)
	pd.waitReady(t)
	lows := map[int32]int64{}
	pd.topic.Ring.Low(func(p int32, o int64) { lows[p] = o })
	if lows[0] != 95 {
		t.Fatalf("the ring claims partition 0 from %d, want 95 (reading began there)", lows[0])
	}
	c := pd.open(t, "", "v1:0-91")
	if d := resyncData(t, c.next(t)); d.Reason != ResyncRetention || d.Partitions[0].LowWatermark != 95 {
		t.Fatalf("resume below the low watermark: %+v", d)
	}
}

// TestSeamKeepAlives: every wait keeps the client alive: a filtered stream whose frames are all filtered out,
// on both paths, and streams waiting for a slow Kafka block fetch, the one fetching it and another waiting
// for the same block.
func TestSeamKeepAlives(t *testing.T) {
	for _, writers := range []int{0, 2} {
		t.Run(fmt.Sprintf("all filtered, writers %d", writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 1)
			pd := startPod(t, kc, "t", podOpts{writers: writers})
			pd.waitReady(t)
			c := pd.open(t, "?event=wanted&heartbeat=100", "")
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				produce(kc, "t", 0, "dropped")
				time.Sleep(20 * time.Millisecond)
			}
			if n := c.keepAlives(); n < 5 {
				t.Fatalf("%d keep-alives in 1 s at a heartbeat of 100 ms while every frame was filtered out", n)
			}
		})
	}
	t.Run("waiting for a block fetch", func(t *testing.T) {
		kc := memlog.New()
		kc.CreateTopic("t", 1)
		for i := range 30 {
			produce(kc, "t", 0, fmt.Sprint(i))
		}
		pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 0 }})
		pd.waitReady(t)
		kc.SetFetchDelay(time.Second)
		a := pd.open(t, "?heartbeat=100", "v1:0-5")
		b := pd.open(t, "?heartbeat=100", "v1:0-5")
		for _, c := range []*seamClient{a, b} {
			if ev := c.next(t); ev.Data != "6" {
				t.Fatalf("first replayed event %+v", ev)
			}
			if n := c.keepAlives(); n < 5 {
				t.Errorf("%d keep-alives during a 1 s block fetch at a heartbeat of 100 ms", n)
			}
		}
	})
}

// TestSeamTopicRecreated: a topic deleted and created again while streams are open is read again from its
// start; a stream (filtered or not) whose position is past the new topic's end gets an ahead resync and the
// new records, instead of skipping them as ones it already has.
func TestSeamTopicRecreated(t *testing.T) {
	for _, query := range []string{"", "?event=a"} {
		t.Run("query "+query, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 1)
			pd := startPod(t, kc, "t", podOpts{writers: 2})
			pd.waitReady(t)
			c := pd.open(t, query, "")
			ev := func(v string) *kgo.Record {
				return &kgo.Record{Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("a")}}}
			}
			for i := range 10 {
				kc.Produce("t", ev(fmt.Sprint("old-", i)))
			}
			for range 10 {
				c.next(t)
			}
			kc.DeleteTopic("t")
			kc.CreateTopic("t", 1)
			kc.Produce("t", ev("new-0"))
			d := resyncData(t, c.next(t))
			if d.Reason != ResyncAhead || d.Partitions[0].Requested != 10 {
				t.Fatalf("resync %+v, want ahead from 10", d)
			}
			kc.Produce("t", ev("new-1"))
			got := c.next(t)
			if got.Data == "new-0" {
				got = c.next(t)
			}
			if got.Data != "new-1" || got.ID != "v1:0-1" {
				t.Fatalf("after the resync: %+v", got)
			}
		})
	}
}

// TestSeamTopicNotThereYet: a stream of a configured topic that does not exist yet opens, keeps alive, and
// gets the topic's records from its start once it is created; while the cluster cannot be reached it opens
// too, with no position.
func TestSeamTopicNotThereYet(t *testing.T) {
	kc := memlog.New()
	pd := startPod(t, kc, "t", podOpts{})
	waitUntil(t, "the topic to be known absent", pd.f.Topic("t").Absent)
	c := pd.open(t, "?heartbeat=100", "")
	time.Sleep(300 * time.Millisecond)
	kc.CreateTopic("t", 2)
	produce(kc, "t", 1, "first")
	if ev := c.next(t); ev.Data != "first" || ev.ID != "v1:1-0" {
		t.Fatalf("first event: %+v", ev)
	}
	if c.keepAlives() < 2 {
		t.Errorf("%d keep-alives while waiting for the topic", c.keepAlives())
	}
	if !strings.Contains(c.raw.String(), "id: v1:\n") {
		t.Errorf("no empty position while waiting: %q", c.raw.String())
	}

	down := memlog.New()
	down.SetDown(true)
	pd2 := startPod(t, down, "t", podOpts{})
	c2 := pd2.open(t, "?heartbeat=100", "")
	time.Sleep(300 * time.Millisecond)
	c2.mu.Lock()
	raw := c2.raw.String()
	c2.mu.Unlock()
	if !strings.HasPrefix(raw, "retry: 3000\n: keep-alive\n") || strings.Contains(raw, "id:") {
		t.Fatalf("stream while the cluster is down: %q", raw)
	}
	down.CreateTopic("t", 1)
	produce(down, "t", 0, "before")
	down.SetDown(false)
	pd2.waitReady(t)
	// It starts where a stream arriving at the pod's first look at the topic would: no history, no gap.
	produce(down, "t", 0, "hello")
	if ev := c2.next(t); ev.Data != "hello" {
		t.Fatalf("after the cluster came back: %+v", ev)
	}
}

// TestSeamLatestAfterRecreation: a from=latest stream opened after a topic was deleted and created again
// gets the new topic's records, not a position from the old one that skips them.
func TestSeamLatestAfterRecreation(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for i := range 10 {
		produce(kc, "t", 0, fmt.Sprint("old-", i))
	}
	pd := startPod(t, kc, "t", podOpts{})
	pd.waitReady(t)
	kc.DeleteTopic("t")
	kc.CreateTopic("t", 1)
	waitUntil(t, "the pod to see the new topic", func() bool { return pd.f.Topic("t").Epoch() == 1 })
	c := pd.open(t, "", "")
	produce(kc, "t", 0, "new-0")
	if ev := c.next(t); ev.Data != "new-0" || ev.ID != "v1:0-0" {
		t.Fatalf("first event: %+v", ev)
	}
}

// ended waits until the stream has ended, and returns every byte it had.
func (c *seamClient) ended(t *testing.T) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-c.evs:
			if !ok {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.raw.String()
			}
		case <-deadline:
			t.Fatal("the stream did not end within 5 s")
		}
	}
}

// TestSeamLeavingRedirects: a pod that is leaving answers every new stream with a short jittered retry and the
// id of the position it would have started from, and ends it at once; a client that reconnects to another
// pod with that id gets exactly what was produced in between, on both paths. Streams open before carry on.
func TestSeamLeavingRedirects(t *testing.T) {
	for _, writers := range []int{0, 2} {
		t.Run(fmt.Sprint("writers=", writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 2)
			produce(kc, "t", 0, "a0", "a1")
			produce(kc, "t", 1, "b0")
			leaving, other := startPod(t, kc, "t", podOpts{writers: writers}), startPod(t, kc, "t", podOpts{writers: writers})
			leaving.waitReady(t)
			other.waitReady(t)
			before := leaving.open(t, "", "")
			leaving.srv.Leave()

			fresh := leaving.open(t, "", "").ended(t)
			var retry int
			var id string
			if _, err := fmt.Sscanf(fresh, "retry: %d\nid: %s\n\n", &retry, &id); err != nil {
				t.Fatalf("a fresh stream of a leaving pod: %q (%v), want a retry and an id", fresh, err)
			}
			if retry < 500 || retry >= 1500 || id != "v1:0-1.1-0" {
				t.Fatalf("a fresh stream of a leaving pod: retry %d, id %s; want 500 <= retry < 1500 and v1:0-1.1-0", retry, id)
			}
			if resumed := leaving.open(t, "", "v1:0-0").ended(t); !strings.HasSuffix(resumed, "\nid: v1:0-0\n\n") {
				t.Fatalf("a resuming stream of a leaving pod: %q, want its own id back", resumed)
			}
			// A compact id is given back as it is, not resolved: the leaving pod reads nothing from Kafka for it.
			resolves := 0
			leaving.topic.Resolve = func(context.Context, string, [16]byte) (position.Vector, error) {
				resolves++
				return position.Vector{}, errors.New("resolved")
			}
			if resumed := leaving.open(t, "", "v2:AAA").ended(t); !strings.HasSuffix(resumed, "\nid: v2:AAA\n\n") || resolves != 0 {
				t.Fatalf("a stream of a leaving pod resuming a compact id: %q after %d resolves, want its own id back unresolved", resumed, resolves)
			}
			produce(kc, "t", 0, "a2")
			if ev := other.open(t, "", id).next(t); ev.Data != "a2" || ev.ID != "v1:0-2.1-0" {
				t.Fatalf("the reconnect on the other pod: %+v, want a2 with id v1:0-2.1-0", ev)
			}
			if ev := before.next(t); ev.Data != "a2" {
				t.Fatalf("a stream open before the pod left: %+v, want a2", ev)
			}
			if n := leaving.stats.Closed[ReasonShutdown].Load(); n != 3 {
				t.Fatalf("streams ended for the shutdown: %d, want 3", n)
			}
		})
	}
}

// TestSeamExplainResume: with explain=1 a resuming stream says where what it missed comes from, before those
// frames: "ring" for positions the pod holds, "kafka" for older ones; without it, or for a new stream, there
// is no such event.
func TestSeamExplainResume(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	produce(kc, "t", 0, "old-0", "old-1", "old-2")
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 0 }})
	pd.waitReady(t)
	produce(kc, "t", 0, "new-3", "new-4")
	live := pd.open(t, "", "")
	_ = live // keeps the ring's head moving past new-4 in the meantime
	waitUntil(t, "the ring to hold new-4", func() bool { _, ok := pd.topic.Ring.Seek(0, 4); return ok })
	for _, c := range []struct {
		query, from, source, next string
	}{
		{"?explain=1", "v1:0-3", SourceRing, "new-4"},
		{"?explain=1", "v1:0-0", SourceKafka, "old-1"},
		{"", "v1:0-3", "", "new-4"},
	} {
		s := pd.open(t, c.query, c.from)
		ev := s.next(t)
		if c.source != "" {
			var d ResumedData
			if ev.Type != "resumed" || json.Unmarshal([]byte(ev.Data), &d) != nil || d.Source != c.source || d.From != c.from || ev.ID != c.from {
				t.Fatalf("%s from %s: first event %+v, want resumed from %s with source %s", c.query, c.from, ev, c.from, c.source)
			}
			ev = s.next(t)
		}
		if ev.Data != c.next {
			t.Fatalf("%s from %s: event %+v, want %s", c.query, c.from, ev, c.next)
		}
	}
	if s := pd.open(t, "?explain=1", ""); s != nil {
		produce(kc, "t", 0, "new-5")
		if ev := s.next(t); ev.Data != "new-5" {
			t.Fatalf("a new stream with explain=1: %+v, want new-5 and no resumed event", ev)
		}
	}
}

// TestSeamReplayCacheAfterRecreation: blocks the shared replay cache read from a topic are never served for
// the topic created again under the same name: a resume on the new topic reads the new records from Kafka.
func TestSeamReplayCacheAfterRecreation(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	pad := strings.Repeat("x", 2000)
	for i := range 60 {
		produce(kc, "t", 0, fmt.Sprint("old-", i, pad))
	}
	pd := startPod(t, kc, "t", podOpts{feed: func(c *feed.Config) { c.Prefill = 0; c.RingBytes = 64 << 10 }})
	pd.waitReady(t)
	// A resume from the start of the old topic fills the cache with its first block.
	if ev := pd.open(t, "", "v1:0-0").next(t); !strings.HasPrefix(ev.Data, "old-1") {
		t.Fatalf("resume on the old topic: %.20s", ev.Data)
	}
	kc.DeleteTopic("t")
	kc.CreateTopic("t", 1)
	waitUntil(t, "the pod to see the new topic", func() bool { return pd.f.Topic("t").Epoch() == 1 })
	// More than the ring holds, so that a resume near the start has to read Kafka.
	for i := range 60 {
		produce(kc, "t", 0, fmt.Sprint("new-", i, pad))
	}
	waitUntil(t, "the ring to hold the last new records and no longer the first", func() bool {
		_, last := pd.topic.Ring.Seek(0, 59)
		_, first := pd.topic.Ring.Seek(0, 1)
		return last && !first
	})
	c := pd.open(t, "", "v1:0-0")
	for i := 1; i < 5; i++ {
		if ev := c.next(t); !strings.HasPrefix(ev.Data, fmt.Sprint("new-", i, "x")) || ev.ID != fmt.Sprint("v1:0-", i) {
			t.Fatalf("resume on the new topic, offset %d: %.20s (id %s), want new-%d", i, ev.Data, ev.ID, i)
		}
	}
}

// TestSeamRecreatedWithFewerPartitions: a topic created again with fewer partitions is served with those
// only: the pod stays ready, its partitions are the new topic's, a new stream's ids list only them, and an id
// naming a partition the new topic lacks is invalid rather than followed.
func TestSeamRecreatedWithFewerPartitions(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 3)
	for q := range int32(3) {
		produce(kc, "t", q, "old")
	}
	pd := startPod(t, kc, "t", podOpts{})
	pd.waitReady(t)
	kc.DeleteTopic("t")
	kc.CreateTopic("t", 1)
	waitUntil(t, "the pod to see the new topic", func() bool { return pd.f.Topic("t").Epoch() == 1 })
	waitUntil(t, "the pod's partitions to be the new topic's", func() bool {
		return fmt.Sprint(pd.topic.Partitions()) == "[0]"
	})
	pd.waitReady(t)
	c := pd.open(t, "", "")
	produce(kc, "t", 0, "new-0")
	if ev := c.next(t); ev.Data != "new-0" || ev.ID != "v1:0-0" {
		t.Fatalf("a new stream on the new topic: %+v, want new-0 with id v1:0-0", ev)
	}
	if d := resyncData(t, pd.open(t, "", "v1:0-0.2-0").next(t)); d.Reason != ResyncInvalidID {
		t.Fatalf("an id naming a partition the new topic lacks: %+v, want invalid-id", d)
	}
}
