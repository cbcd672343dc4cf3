package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// openStream opens a stream and returns the id of its opening block and a parser of the rest. It is safe
// to call from any goroutine: it returns errors rather than failing the test.
func openStream(ctx context.Context, url, lastID string) (string, *sse.Parser, io.Closer, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return "", nil, nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	p := sse.NewParser(bufio.NewReader(resp.Body))
	return "", p, resp.Body, nil
}

func produceN(t *testing.T, cl *kgo.Client, from, n int, pad int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", (from+i)%13), Value: fmt.Appendf(nil, `{"seq":%d,"pad":"%s"}`, from+i, strings.Repeat("x", pad))}
		if (from+i)%4 == 0 {
			recs[i].Headers = []kgo.RecordHeader{{Key: "event", Value: []byte("order.paid")}}
		}
	}
	kafkatest.Produce(t, cl, recs...)
}

// readN reads n events (or fails) and returns them with the stream's position after them.
func readN(t *testing.T, p *sse.Parser, n int) []sse.Event {
	t.Helper()
	evs := make([]sse.Event, 0, n)
	for range n {
		ev, err := p.Next()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(evs), n, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestResumeFromRingAndKafka: a client that resumes gets exactly what it missed, from the ring when the ring
// still holds it and from Kafka when it does not.
func TestResumeFromRingAndKafka(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.RingBytes = 64 << 10 })
	g.waitReady(t)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	c := connect(t, ctx, g.url+"/streams/"+topic)
	produceN(t, cl, 0, 30, 10)
	all := readN(t, c.p, 20)
	_ = c.resp.Body.Close()
	lastID := all[len(all)-1].ID

	for _, tc := range []struct {
		name   string
		more   int // records produced while away
		pad    int
		source string
	}{
		{"ring", 50, 10, "ring"},
		{"kafka", 1500, 100, "kafka"}, // about 200 KB of frames: more than the 64 KiB ring holds
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := resumes(t, g, topic, tc.source)
			produced := len(records(t, topic))
			produceN(t, cl, produced, tc.more, tc.pad)
			recs := byOffset(kafkatest.ReadAll(t, topic))
			total := 0
			for _, m := range recs {
				total += len(m)
			}
			want := total - countThrough(recs, position.MustParse(lastID))
			_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, lastID)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = body.Close() }()
			evs := readN(t, p, want)
			checkEvents(t, lastID, evs, recs)
			if got := resumes(t, g, topic, tc.source); got != before+1 {
				t.Errorf("resumes from %s = %v, want %v", tc.source, got, before+1)
			}
			lastID = evs[len(evs)-1].ID
		})
	}
}

// records returns the topic's records, all partitions together.
func records(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, rs := range kafkatest.ReadAll(t, topic) {
		out = append(out, rs...)
	}
	return out
}

// countThrough counts the records at or before the position v.
func countThrough(recs map[int32]map[int64]*kgo.Record, v position.Vector) int {
	n := 0
	for p, m := range recs {
		last, ok := v.Offset(p)
		for o := range m {
			if ok && o <= last {
				n++
			}
		}
	}
	return n
}

func resumes(t *testing.T, g *gateway, topic, source string) float64 {
	t.Helper()
	return metricValue(t, g, "ssegate_resumes_total", `topic="`+topic+`"`, `source="`+source+`"`)
}

func metricValue(t testing.TB, g *gateway, name string, labels ...string) float64 {
	t.Helper()
	_, body := get(t, g.admin+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// TestResumeRandomized: clients on two gateways disconnect and resume at random moments, each time at a
// random gateway, while records are produced; every client ends up with every record of every partition
// since it started, exactly once, in order, checked against the topic read back directly.
func TestResumeRandomized(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	small := func(c *Config) { c.RingBytes = 64 << 10; c.Prefill = 200 }
	// The second gateway keeps a goroutine per stream (writers 0): clients move between both ways of serving.
	gws := []*gateway{startGateway(t, []string{topic}, small), startGateway(t, []string{topic}, func(c *Config) { small(c); c.Writers = 0 })}
	for _, g := range gws {
		g.waitReady(t)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()

	const clients, total = 8, 3000
	type result struct {
		events []sse.Event
		opens  int
		err    error
	}
	results := make([]result, clients)
	var final atomic.Pointer[position.Vector] // the topic's end, once everything is produced
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			r := &results[i]
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			// Every client starts from the empty position, whenever it first connects: it must get
			// every record of the topic.
			lastID := "v1:"
			for {
				g := gws[rng.IntN(len(gws))]
				// A connection that gets nothing for a while is dropped and the client reconnects: at
				// the end of the topic that is how it notices it has everything.
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				_, p, body, err := openStream(cctx, g.url+"/streams/"+topic, lastID)
				if err != nil {
					ccancel()
					r.err = err
					return
				}
				r.opens++
				budget := 1 + rng.IntN(400)
				for range budget {
					ev, err := p.Next()
					if err != nil && cctx.Err() != nil && ctx.Err() == nil {
						break // idle: reconnect
					}
					if err != nil {
						r.err = fmt.Errorf("open %d: %w", r.opens, err)
						_ = body.Close()
						ccancel()
						return
					}
					r.events = append(r.events, ev)
					lastID = ev.ID
					if end := final.Load(); end != nil && position.MustParse(lastID).Equal(*end) {
						_ = body.Close()
						ccancel()
						return
					}
				}
				_ = body.Close()
				ccancel()
				if end := final.Load(); end != nil && position.MustParse(lastID).Equal(*end) {
					return
				}
				// Sometimes stay away for a while, so that the ring moves on.
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
			}
		})
	}
	for i := 0; i < total; i += 100 {
		produceN(t, cl, i, 100, 150)
		time.Sleep(20 * time.Millisecond)
	}
	recs := kafkatest.ReadAll(t, topic)
	var end position.Vector
	for p, rs := range recs {
		end.Set(p, rs[len(rs)-1].Offset)
	}
	final.Store(&end)
	wg.Wait()
	// The test is only worth something if both ways of resuming happened.
	var fromRing, fromKafka float64
	for _, g := range gws {
		fromRing += resumes(t, g, topic, "ring")
		fromKafka += resumes(t, g, topic, "kafka")
	}
	t.Logf("resumes: %v from the ring, %v through Kafka", fromRing, fromKafka)
	if fromRing == 0 || fromKafka == 0 {
		t.Errorf("resumes: %v from the ring, %v through Kafka; want both", fromRing, fromKafka)
	}
	byOff := byOffset(recs)
	for i, r := range results {
		t.Run(fmt.Sprintf("client%d", i), func(t *testing.T) {
			if r.err != nil {
				t.Fatalf("client failed: %v", r.err)
			}
			if len(r.events) != total {
				t.Errorf("got %d events over %d connections, want %d", len(r.events), r.opens, total)
			}
			checkEvents(t, "v1:", r.events, byOff)
		})
	}
}

// resyncOf reads events until a resync and returns its data.
func resyncOf(t *testing.T, p *sse.Parser) (stream.ResyncData, string) {
	t.Helper()
	ev, err := p.Next()
	if err != nil {
		t.Fatalf("reading the resync: %v", err)
	}
	if ev.Type != "resync" {
		t.Fatalf("first event is %q %q, want a resync", ev.Type, ev.Data)
	}
	var d stream.ResyncData
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		t.Fatalf("resync data %q: %v", ev.Data, err)
	}
	return d, ev.ID
}

// TestResyncRetention: a position below the low watermark (here moved by DeleteRecords) gets a retention
// resync with the exact numbers, and the stream continues live.
func TestResyncRetention(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produceN(t, cl, 0, 100, 10)
	ctx := kafkatest.Context(t)
	adm := kafkatest.Admin(t)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 50})
	if _, err := adm.DeleteRecords(ctx, os); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	g := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = 0 })
	g.waitReady(t)
	_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, "v1:0-10")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	d, id := resyncOf(t, p)
	want := stream.ResyncData{Reason: "retention", Topic: topic, Partitions: []stream.ResyncPartition{
		{Partition: 0, Requested: 11, LowWatermark: 50, ResumesAt: 100, Skipped: 89},
	}}
	if fmt.Sprint(d) != fmt.Sprint(want) || id != "v1:0-99" {
		t.Fatalf("resync = %+v id %q, want %+v id v1:0-99", d, id, want)
	}
	produceN(t, cl, 100, 1, 10)
	if ev := readN(t, p, 1)[0]; ev.ID != "v1:0-100" {
		t.Fatalf("after the resync: %+v", ev)
	}
	if v := metricValue(t, g, "ssegate_resync_skipped_total", `topic="`+topic+`"`); v != 89 {
		t.Errorf("skipped metric = %v, want 89", v)
	}
}

// TestResyncAhead: a position at or past the high watermark (an id from a recreated topic or another
// cluster) gets an ahead resync and continues from the live tail.
func TestResyncAhead(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl, &kgo.Record{Partition: 0, Value: []byte("a")}, &kgo.Record{Partition: 0, Value: []byte("b")},
		&kgo.Record{Partition: 1, Value: []byte("c")})
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx := kafkatest.Context(t)
	_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, "v1:0-500.1-0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	d, id := resyncOf(t, p)
	want := stream.ResyncData{Reason: "ahead", Topic: topic, Partitions: []stream.ResyncPartition{
		{Partition: 0, Requested: 501, LowWatermark: 0, ResumesAt: 2, Skipped: 0},
	}}
	if fmt.Sprint(d) != fmt.Sprint(want) || id != "v1:0-1.1-0" {
		t.Fatalf("resync = %+v id %q, want %+v id v1:0-1.1-0", d, id, want)
	}
	kafkatest.Produce(t, cl, &kgo.Record{Partition: 0, Value: []byte("d")})
	if ev := readN(t, p, 1)[0]; ev.ID != "v1:0-2.1-0" || ev.Data != "d" {
		t.Fatalf("after the resync: %+v", ev)
	}
}

// TestResyncInvalidID: a malformed or foreign id gets an invalid-id resync, never an HTTP error, and the
// stream starts from the from parameter.
func TestResyncInvalidID(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl, &kgo.Record{Partition: 1, Value: []byte("a")})
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx := kafkatest.Context(t)
	for _, tc := range []struct{ name, id, errHas string }{
		{"garbage", "hello", "malformed"},
		{"other version", "v2:0-1", "malformed"},
		{"not ascending", "v1:1-0.0-0", "malformed"},
		{"negative", "v1:0--1", "malformed"},
		{"unknown partition", "v1:0-0.7-3", "partition 7"},
		{"too long", "v1:" + strings.Repeat("1", 40<<10), "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = body.Close() }()
			d, id := resyncOf(t, p)
			if d.Reason != "invalid-id" || !strings.Contains(d.Error, tc.errHas) || d.Partitions == nil || len(d.Partitions) != 0 {
				t.Fatalf("resync = %+v", d)
			}
			if id != "v1:1-0" {
				t.Fatalf("resync id = %q, want the live position v1:1-0", id)
			}
		})
	}
}

// TestFromAndFilters: from=earliest and from=<time> start new streams in the past, event= keeps only some
// types, and lastEventId in the query resumes like the header.
func TestFromAndFilters(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produceN(t, cl, 0, 40, 5)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond) // record timestamps are milliseconds
	produceN(t, cl, 40, 40, 5)
	g := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = 0 })
	g.waitReady(t)
	recs := byOffset(kafkatest.ReadAll(t, topic))
	ctx := kafkatest.Context(t)

	t.Run("earliest", func(t *testing.T) {
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic+"?from=earliest", "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		checkEvents(t, "v1:", readN(t, p, 80), recs)
	})
	t.Run("time", func(t *testing.T) {
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic+"?from="+mid.UTC().Format(time.RFC3339Nano), "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		evs := readN(t, p, 40)
		for _, ev := range evs {
			var v struct{ Seq int }
			if err := json.Unmarshal([]byte(ev.Data), &v); err != nil || v.Seq < 40 {
				t.Fatalf("from=<time> delivered %q, from before the time", ev.Data)
			}
		}
	})
	t.Run("event filter", func(t *testing.T) {
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic+"?from=earliest&event=order.paid", "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		evs := readN(t, p, 20) // every fourth record is order.paid
		for _, ev := range evs {
			if ev.Type != "order.paid" {
				t.Fatalf("event filter let through %+v", ev)
			}
		}
		produceN(t, cl, 80, 4, 5)
		if ev := readN(t, p, 1)[0]; ev.Type != "order.paid" || !strings.Contains(ev.Data, `"seq":80`) {
			t.Fatalf("live after filtered replay: %+v", ev)
		}
	})
	t.Run("lastEventId query", func(t *testing.T) {
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic+"?from=latest&lastEventId=v1:", "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		first := readN(t, p, 1)[0]
		if id := position.MustParse(first.ID); id.Len() != 1 {
			t.Fatalf("resume from v1: starts at %s, want the first record of one partition", first.ID)
		}
	})
	t.Run("bad from", func(t *testing.T) {
		code, body := get(t, g.url+"/streams/"+topic+"?from=yesterday")
		if code != http.StatusBadRequest || !strings.Contains(body, `"param":"from"`) {
			t.Fatalf("from=yesterday: %d %s", code, body)
		}
	})
}

// TestKeyFilter: key= keeps only records with those keys, and the ids list only the partitions the keys
// are in (where Kafka's default partitioner put them), live and in replay.
func TestKeyFilter(t *testing.T) {
	topic := kafkatest.NewTopic(t, 4, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "%d", i)})
		}
	}
	produce(0, 50)
	g := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = 0 })
	g.waitReady(t)
	wantParts := map[int32]bool{}
	for p, rs := range kafkatest.ReadAll(t, topic) {
		for _, r := range rs {
			if k := string(r.Key); k == "k3" || k == "k7" {
				wantParts[p] = true
			}
		}
	}
	ctx := kafkatest.Context(t)
	_, p, body, err := openStream(ctx, g.url+"/streams/"+topic+"?from=earliest&key=k3&key=k7", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	check := func(evs []sse.Event, first int) {
		t.Helper()
		for i, ev := range evs {
			id := position.MustParse(ev.ID)
			for j := range id.Len() {
				if !wantParts[id.At(j).Partition] {
					t.Fatalf("event %d id %s lists partition %d, which holds neither key", i, ev.ID, id.At(j).Partition)
				}
			}
			var n int
			if _, err := fmt.Sscan(ev.Data, &n); err != nil || (n%10 != 3 && n%10 != 7) || n < first {
				t.Fatalf("event %d: %q is not a record of k3 or k7", i, ev.Data)
			}
		}
	}
	check(readN(t, p, 10), 0) // 5 records each in the replay
	produce(50, 20)
	evs := readN(t, p, 4) // and 2 each live
	check(evs, 50)
	last := evs[len(evs)-1].ID

	// Resuming the key-filtered id (on the same filter) gets exactly what came since.
	produce(70, 10)
	_ = body.Close()
	_, p2, body2, err := openStream(ctx, g.url+"/streams/"+topic+"?key=k3&key=k7", last)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body2.Close() }()
	check(readN(t, p2, 2), 70)
}

// TestSlowClientCatchesUp: a client that stops reading for a while falls behind a small ring; when it reads
// again it catches up through Kafka and gets every record exactly once (a fast-path stream's position must
// survive falling behind).
func TestSlowClientCatchesUp(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.RingBytes = 64 << 10; c.WriteTimeout = 30 * time.Second })
	g.waitReady(t)
	// A tiny receive buffer, so that the gateway's writes block soon after the client stops reading.
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/streams/"+topic, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	br := bufio.NewReaderSize(resp.Body, 512)
	for range 3 { // retry line, id line, blank line: the topic is empty, so the position is v1:
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	p := sse.NewParser(br)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produceN(t, cl, 0, 10, 10)
	first := readN(t, p, 10)
	// Stop reading while about 4 MB go by: far more than the ring and the socket buffers hold.
	for i := 10; i < 10010; i += 500 {
		produceN(t, cl, i, 500, 400)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the ring to move past the stalled client", func() bool {
		return metricValue(t, g, "ssegate_ring_evicted_total", `topic="`+topic+`"`) > 5000
	})
	rest := readN(t, p, 10000)
	checkEvents(t, "v1:", append(first, rest...), byOffset(kafkatest.ReadAll(t, topic)))
	if v := resumes(t, g, topic, "kafka"); v < 1 {
		t.Errorf("the stalled client never caught up through Kafka (resumes from kafka = %v)", v)
	}
}

// TestResyncAheadRecreatedTopic: an id from before the topic was deleted and created again points past the
// new topic's end; the client gets an ahead resync and continues from the new topic's live tail.
func TestResyncAheadRecreatedTopic(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produceN(t, cl, 0, 5, 10)
	ctx := kafkatest.Context(t)
	recreateTopic(t, ctx, topic, 1)
	// A new client: the old one's metadata describes the deleted topic. The producer retries until the new
	// topic has a leader.
	cl2 := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produceN(t, cl2, 100, 2, 10)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, "v1:0-4")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	d, id := resyncOf(t, p)
	want := stream.ResyncData{Reason: "ahead", Topic: topic, Partitions: []stream.ResyncPartition{
		{Partition: 0, Requested: 5, LowWatermark: 0, ResumesAt: 2, Skipped: 0},
	}}
	if fmt.Sprint(d) != fmt.Sprint(want) || id != "v1:0-1" {
		t.Fatalf("resync = %+v id %q, want %+v id v1:0-1", d, id, want)
	}
	produceN(t, cl2, 102, 1, 10)
	if ev := readN(t, p, 1)[0]; ev.ID != "v1:0-2" || !strings.Contains(ev.Data, `"seq":102`) {
		t.Fatalf("after the resync: %+v", ev)
	}
}
