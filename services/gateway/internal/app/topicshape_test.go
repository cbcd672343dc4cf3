package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// openRaw opens a stream and returns its body as lines, failing t unless the answer is a 200 event stream.
func openRaw(t *testing.T, ctx context.Context, url string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %q %s, want a 200 event stream", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return bufio.NewReader(resp.Body)
}

// readLines reads n lines.
func readLines(t *testing.T, br *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for range n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		out = append(out, strings.TrimSuffix(line, "\n"))
	}
	return out
}

// TestStreamWaitsForConfiguredTopic: a stream of a configured topic that Kafka does not have yet is accepted
// (200, retry:, an empty position, keep-alives) and delivers the topic's records from its start once it is
// created; a browser opened in that window keeps working.
func TestStreamWaitsForConfiguredTopic(t *testing.T) {
	topic := kafkatest.TopicName(t)
	g := startGateway(t, []string{topic}, func(c *Config) { c.MetadataInterval = 10 * time.Second })
	kafkatest.WaitFor(t, 30*time.Second, "readyz to name the missing topic", func() bool {
		code, body := get(t, g.admin+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "does not exist")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	br := openRaw(t, ctx, g.url+"/streams/"+topic+"?heartbeat=200")
	if got := readLines(t, br, 5); got[0] != "retry: 3000" || got[1] != "id: v1:" || got[2] != "" || got[3] != ": keep-alive" {
		t.Fatalf("stream of a topic not created yet opens with %q, want retry, id: v1:, keep-alives", got)
	}
	kafkatest.CreateTopic(t, topic, 1, nil)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), topic) })
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	// Produced right after creation: the gateway looks for the topic every second, not every 10 s, and
	// reads it from its start.
	start := time.Now()
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("first")}, &kgo.Record{Value: []byte("second")})
	p := sse.NewParser(br)
	for i, want := range []string{"first", "second"} {
		ev, err := p.Next()
		if err != nil || ev.Data != want || ev.ID != "v1:0-"+string(rune('0'+i)) {
			t.Fatalf("event %d = %+v, %v; want %s", i, ev, err, want)
		}
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("the first record took %v to arrive: the topic was not looked for every second", took)
	}
}

// TestStreamWhileKafkaUnreachable: a configured topic is never answered 404 because of the broker's state;
// with no broker reachable the stream opens and keeps alive, and /readyz says why it is not ready.
func TestStreamWhileKafkaUnreachable(t *testing.T) {
	topic := kafkatest.TopicName(t)
	g := startGateway(t, []string{topic}, func(c *Config) { c.Kafka.Brokers = []string{"127.0.0.1:1"} })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	br := openRaw(t, ctx, g.url+"/streams/"+topic+"?heartbeat=200")
	// No position: nobody knows yet whether the topic exists.
	if got := readLines(t, br, 3); got[0] != "retry: 3000" || got[1] != ": keep-alive" || got[2] != "" {
		t.Fatalf("stream with Kafka unreachable opens with %q, want retry and keep-alives", got)
	}
	if code, body := get(t, g.admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "metadata") {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if code, _ := get(t, g.url+"/streams/nope"); code != http.StatusNotFound {
		t.Fatalf("a topic that is not configured = %d, want 404", code)
	}
}

// txnProduce writes values in one transaction of cl and commits (or aborts) it.
func txnProduce(t *testing.T, cl *kgo.Client, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx := kafkatest.Context(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestLowWatermarkIsTruth: after DeleteRecords, a gateway whose ring still holds the deleted records and one
// started after the purge answer one id identically.
func TestLowWatermarkIsTruth(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	a := startGateway(t, []string{topic}, nil)
	a.waitReady(t)
	produceN(t, cl, 0, 100, 10)
	ctx := kafkatest.Context(t)
	// Pod a holds all 100 in its ring: a resume from 20 is served from it.
	_, p, body, err := openStream(ctx, a.url+"/streams/"+topic, "v1:0-98")
	if err != nil {
		t.Fatal(err)
	}
	readN(t, p, 1)
	_ = body.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 50})
	if _, err := kafkatest.Admin(t).DeleteRecords(ctx, os); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	b := startGateway(t, []string{topic}, nil)
	b.waitReady(t)
	// Pod a learns the new low watermark within a metadata refresh (and a resume within a second).
	kafkatest.WaitFor(t, 10*time.Second, "pod a's ring to be trimmed", func() bool {
		return metricValue(t, a, "ssegate_ring_oldest_offset", `topic="`+topic+`"`) == 50
	})
	want := stream.ResyncData{Reason: "retention", Topic: topic, Partitions: []stream.ResyncPartition{
		{Partition: 0, Requested: 21, LowWatermark: 50, ResumesAt: 100, Skipped: 79},
	}}
	for _, g := range []*gateway{a, b} {
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, "v1:0-20")
		if err != nil {
			t.Fatal(err)
		}
		d, id := resyncOf(t, p)
		_ = body.Close()
		if fmt.Sprint(d) != fmt.Sprint(want) || id != "v1:0-99" {
			t.Fatalf("gateway %s: resync %+v id %q, want %+v id v1:0-99", g.url, d, id, want)
		}
	}
}

// TestReadyWithEmptyTails: a gateway turns ready although a partition ends with offsets that hold no record:
// an aborted transaction, and two producers committing one after the other.
func TestReadyWithEmptyTails(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	plain := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	x := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-x"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	y := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-y"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, plain, &kgo.Record{Partition: 0, Value: []byte("a")}, &kgo.Record{Partition: 1, Value: []byte("b")})
	// Partition 0: an aborted transaction of two records and its marker.
	txnProduce(t, x, false, &kgo.Record{Partition: 0, Value: []byte("x1")}, &kgo.Record{Partition: 0, Value: []byte("x2")})
	// Partition 1: two producers with open transactions, committed one after the other: two markers.
	ctx := kafkatest.Context(t)
	for _, cl := range []*kgo.Client{x, y} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range []*kgo.Client{x, y} {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	for _, prefill := range []int64{0, 2, 1000} {
		g := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = prefill })
		g.waitReady(t)
	}
}

// TestResumeEndsOnCommitMarker: with prefill 0 the start position of a transactional partition is a commit
// marker; a resume whose range ends there is served at once, with no replay failure.
func TestResumeEndsOnCommitMarker(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	x := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-x"))
	txnProduce(t, x, true, &kgo.Record{Value: []byte("r0")}, &kgo.Record{Value: []byte("r1")}) // marker at 2
	g := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = 0 })
	g.waitReady(t)
	ctx := kafkatest.Context(t)
	start := time.Now()
	_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, "v1:0-0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	if ev := readN(t, p, 1)[0]; ev.Data != "r1" || ev.ID != "v1:0-1" {
		t.Fatalf("resume: %+v", ev)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the resume took %v", took)
	}
	txnProduce(t, x, true, &kgo.Record{Value: []byte("r3")})
	if ev := readN(t, p, 1)[0]; ev.Data != "r3" || ev.ID != "v1:0-3" {
		t.Fatalf("after the resume: %+v", ev)
	}
}

// TestKeyFilterAfterPartitionsAdded: a key= stream gets its key's records in the partition the key goes to
// after partitions are added, and still in the old one.
func TestKeyFilterAfterPartitionsAdded(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	var key string
	var old, moved int32
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for i := range 1000 {
		k := fmt.Sprintf("user-%d", i)
		if a, b := kp.Partition(&kgo.Record{Key: []byte(k)}, 2), kp.Partition(&kgo.Record{Key: []byte(k)}, 3); a != b && b == 2 {
			key, old, moved = k, int32(a), int32(b)
			break
		}
	}
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := connect(t, ctx, g.url+"/streams/"+topic+"?key="+key)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl, &kgo.Record{Partition: old, Key: []byte(key), Value: []byte("before")})
	if ev := c.next(t); ev.Data != "before" {
		t.Fatalf("before: %+v", ev)
	}
	if _, err := kafkatest.Admin(t).CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "a produce to the new partition", func() bool {
		cl.ForceMetadataRefresh()
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Partition: moved, Key: []byte(key), Value: []byte("moved")}).FirstErr() == nil
	})
	kafkatest.Produce(t, cl, &kgo.Record{Partition: moved, Key: []byte("other"), Value: []byte("other")})
	kafkatest.Produce(t, cl, &kgo.Record{Partition: old, Key: []byte(key), Value: []byte("stale")})
	got := map[string]bool{}
	for range 2 {
		got[c.next(t).Data] = true
	}
	if !got["moved"] || !got["stale"] {
		t.Fatalf("after the partition add the stream got %v, want moved and stale", got)
	}
}

// TestIDNamesUndiscoveredPartition: an id naming a partition the gateway has not discovered yet is asked of
// Kafka and every partition's position is kept.
func TestIDNamesUndiscoveredPartition(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.MetadataInterval = time.Hour })
	g.waitReady(t)
	ctx := kafkatest.Context(t)
	if _, err := kafkatest.Admin(t).CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl, &kgo.Record{Partition: 0, Value: []byte("a0")}, &kgo.Record{Partition: 0, Value: []byte("a1")})
	kafkatest.WaitFor(t, 30*time.Second, "a produce to partition 1", func() bool {
		cl.ForceMetadataRefresh()
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Partition: 1, Value: []byte("b0")}).FirstErr() == nil
	})
	for i := 1; i < 6; i++ {
		kafkatest.Produce(t, cl, &kgo.Record{Partition: 1, Value: fmt.Appendf(nil, "b%d", i)})
	}
	_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, "v1:0-0.1-4")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	if ev := readN(t, p, 1)[0]; ev.Type != "message" || ev.Data != "a1" || ev.ID != "v1:0-1.1-4" {
		t.Fatalf("first event: %+v, want a1 with partition 1's position kept", ev)
	}
}

// TestTopicRecreatedWhileServed: a topic deleted and created again while a filtered stream is open is read
// again; the stream gets an ahead resync and the new topic's records.
func TestTopicRecreatedWhileServed(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	c := connect(t, ctx, g.url+"/streams/"+topic+"?event=order.paid")
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	produceN(t, cl, 0, 8, 10) // seq 0 and 4 are order.paid
	readN(t, c.p, 2)
	recreateTopic(t, ctx, topic, 1)
	cl2 := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	// Wait for the gateway to notice before producing: the resync then skips nothing.
	time.Sleep(2 * time.Second)
	produceN(t, cl2, 100, 8, 10) // seq 100 and 104 are order.paid, at offsets 0 and 4
	var evs []sse.Event
	for len(evs) < 3 {
		evs = append(evs, c.next(t))
	}
	if evs[0].Type != "resync" || !strings.Contains(evs[0].Data, `"reason":"ahead"`) {
		t.Fatalf("first event after the recreation: %+v, want an ahead resync", evs[0])
	}
	if !strings.Contains(evs[1].Data, `"seq":100`) || !strings.Contains(evs[2].Data, `"seq":104`) || evs[2].ID != "v1:0-4" {
		t.Fatalf("after the resync: %+v", evs[1:])
	}
}

// TestProbeStream: the helm test's probe passes on a gateway's stream and fails on a 404 and on a server that
// is not a stream.
func TestProbeStream(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := ProbeStream(ctx, g.url+"/streams/"+topic+"?heartbeat=200"); err != nil {
		t.Fatalf("probe of a stream: %v", err)
	}
	if err := ProbeStream(ctx, g.url+"/streams/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("probe of an unserved topic: %v", err)
	}
	if err := ProbeStream(ctx, g.url+"/"); err == nil || !strings.Contains(err.Error(), "Content-Type") {
		t.Fatalf("probe of the dashboard: %v", err)
	}
}

// TestTopicRecreatedWithFewerPartitions: a topic deleted and created again with fewer partitions is served
// with the new partitions only, on a real broker: the gateway stays ready, an id naming a partition the new
// topic lacks is invalid, and a new stream's ids name only the partition the new topic has.
func TestTopicRecreatedWithFewerPartitions(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	recreateTopic(t, ctx, topic, 1)
	time.Sleep(2 * time.Second) // the gateway notices within its metadata interval (200 ms here)
	g.waitReady(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/streams/"+topic+"?lastEventId=v1:2-5", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sse.NewParser(resp.Body).Next()
	_ = resp.Body.Close()
	if err != nil || ev.Type != "resync" || !strings.Contains(ev.Data, `"reason":"invalid-id"`) {
		t.Fatalf("an id naming a partition the new topic lacks: %+v %v, want an invalid-id resync", ev, err)
	}
	c := connect(t, ctx, g.url+"/streams/"+topic)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("new-0")})
	if ev := c.next(t); ev.Data != "new-0" || ev.ID != "v1:0-0" {
		t.Fatalf("a new stream on the new topic: %+v, want new-0 with id v1:0-0", ev)
	}
}

// recreateTopic deletes topic and creates it again with partitions partitions, once the broker lets it.
func recreateTopic(t *testing.T, ctx context.Context, topic string, partitions int32) {
	t.Helper()
	adm := kafkatest.Admin(t)
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic to be created again", func() bool {
		resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		return err == nil && resp.Err == nil
	})
}
