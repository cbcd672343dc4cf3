package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// testResolver returns a Resolver of the position topic pt that reads Kafka on its own, like a third pod.
func testResolver(t *testing.T, pt string) *checkpoint.Resolver {
	t.Helper()
	log, err := replay.NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(log.Close)
	r, err := checkpoint.NewResolver(pt, log, isOutOfRange, 16)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// asV1 returns evs with their compact ids resolved to v1, through r.
func asV1(t *testing.T, r *checkpoint.Resolver, topic string, evs []sse.Event) []sse.Event {
	t.Helper()
	out := make([]sse.Event, len(evs))
	for i, ev := range evs {
		out[i] = ev
		if position.IsCompact(ev.ID) {
			v, err := r.Resolve(t.Context(), ev.ID, topic, [16]byte{})
			if err != nil {
				t.Fatalf("event %d: resolving %s: %v", i, ev.ID, err)
			}
			out[i].ID = v.String()
		}
	}
	return out
}

// produceSpread produces n records of pad bytes to random partitions of parts.
func produceSpread(t *testing.T, cl *kgo.Client, n, parts, pad int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: rand.Int32N(int32(parts)), Value: []byte(`{"i":` + strings.Repeat("1", 1+i%3) + `,"pad":"` + strings.Repeat("x", pad) + `"}`)}
	}
	kafkatest.Produce(t, cl, recs...)
}

// TestCompactIDs: a gateway with id-format v2 frames short ids on a topic of many partitions; another
// gateway (v1 itself) resumes them exactly, from its ring and from Kafka; ids it cannot resolve resync.
func TestCompactIDs(t *testing.T) {
	const parts = 64
	topic := kafkatest.NewTopic(t, parts, nil)
	pt := kafkatest.NewTopic(t, 1, nil)
	a := startGateway(t, []string{topic}, func(c *Config) { c.IDFormat, c.PositionTopic = "v2", pt })
	b := startGateway(t, []string{topic}, func(c *Config) { c.PositionTopic = pt })
	small := startGateway(t, []string{topic}, func(c *Config) { c.PositionTopic, c.RingBytes, c.Prefill = pt, 64<<10, 0 })
	a.waitReady(t)
	b.waitReady(t)
	small.waitReady(t)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	res := testResolver(t, pt)

	c := connect(t, ctx, a.url+"/streams/"+topic)
	waitFirstCheckpoint(t, a, topic)
	const n = 600
	var evs []sse.Event
	for range n / 5 {
		// A steady trickle of 250 records a second, as most topics get, rather than one burst; each read as it
		// comes, so a slow machine slows the trickle rather than piling records up between acknowledgements.
		produceSpread(t, cl, 5, parts, 10)
		evs = append(evs, readN(t, c.p, 5)...)
		time.Sleep(20 * time.Millisecond)
	}
	compact, idBytes := 0, 0
	for _, ev := range evs {
		idBytes += len(ev.ID)
		if position.IsCompact(ev.ID) {
			compact++
		}
	}
	acked := metricValue(t, a, "ssegate_checkpoint_writes_total", `topic="`+topic+`"`, `result="acked"`)
	ackSecs := metricValue(t, a, "ssegate_checkpoint_ack_seconds_total", `topic="`+topic+`"`)
	t.Logf("%d of %d ids compact, %.1f id bytes per frame; %v checkpoints acknowledged in %.1f ms on average",
		compact, n, float64(idBytes)/n, acked, 1000*ackSecs/acked)
	if ackSecs <= 0 || ackSecs > 10*acked {
		t.Errorf("%v checkpoints waited %v s for Kafka in all: want some time, and under the 10 s delivery timeout each", acked, ackSecs)
	}
	if compact < n*8/10 {
		t.Fatalf("%d of %d ids compact, want most", compact, n)
	}
	// A v1 id of 64 partitions with 1- or 2-digit offsets is about 330 bytes.
	if avg := float64(idBytes) / n; avg > 64 {
		t.Fatalf("%.1f id bytes per frame, want at most 64", avg)
	}
	if got := metricValue(t, a, "ssegate_frame_ids_total", `topic="`+topic+`"`, `format="v2"`); got < float64(compact) {
		t.Errorf("ssegate_frame_ids_total v2 = %v, want at least the %d compact ids seen", got, compact)
	}
	all := asV1(t, res, topic, evs)
	checkEvents(t, c.initialID, all, byOffset(kafkatest.ReadAll(t, topic)))

	// Resume points: compact ids in the middle.
	at := func(i int) int {
		for ; i < n; i++ {
			if position.IsCompact(evs[i].ID) {
				return i
			}
		}
		t.Fatal("no compact id")
		return 0
	}
	resume := func(t *testing.T, g *gateway, i int) {
		t.Helper()
		recs := byOffset(kafkatest.ReadAll(t, topic))
		total := 0
		for _, m := range recs {
			total += len(m)
		}
		want := total - countThrough(recs, position.MustParse(all[i].ID))
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, evs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		got := readN(t, p, want)
		checkEvents(t, all[i].ID, asV1(t, res, topic, got), recs)
	}
	t.Run("same gateway", func(t *testing.T) { resume(t, a, at(n/3)) })
	t.Run("other gateway ring", func(t *testing.T) {
		before := resumes(t, b, topic, "ring")
		resume(t, b, at(n/2))
		if got := resumes(t, b, topic, "ring"); got != before+1 {
			t.Errorf("ring resumes = %v, want %v", got, before+1)
		}
	})
	t.Run("other gateway kafka", func(t *testing.T) {
		produceSpread(t, cl, 1000, parts, 100) // about 150 KB of frames: more than the 64 KiB ring holds
		before := resumes(t, small, topic, "kafka")
		resume(t, small, at(n/2+10))
		if got := resumes(t, small, topic, "kafka"); got != before+1 {
			t.Errorf("kafka resumes = %v, want %v", got, before+1)
		}
	})

	invalid := func(t *testing.T, g *gateway, id, reason, errHas string) {
		t.Helper()
		_, p, body, err := openStream(ctx, g.url+"/streams/"+topic, id)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		d, rid := resyncOf(t, p)
		if d.Reason != reason || !strings.Contains(d.Error, errHas) || d.Partitions == nil || len(d.Partitions) != 0 {
			t.Fatalf("resync = %+v, want reason %s with %q", d, reason, errHas)
		}
		if !strings.HasPrefix(rid, "v1:") {
			t.Fatalf("resync id %q, want the live position", rid)
		}
	}
	for _, tc := range []struct{ name, id, errHas string }{
		{"garbage", "v2:!!", "malformed"},
		{"not canonical", "v2:gAAA", "malformed"},
		{"offset never written", "v2:AP____8H", "has no offset"},
		{"no such partition", "v2:gAkA", "no partition 9"}, // 9<<7: partition 9, no check
	} {
		t.Run(tc.name, func(t *testing.T) { invalid(t, b, tc.id, "invalid-id", tc.errHas) })
	}
	t.Run("checkpoint of another topic", func(t *testing.T) {
		other := kafkatest.NewTopic(t, 1, nil)
		g := startGateway(t, []string{other}, func(c *Config) { c.PositionTopic = pt })
		g.waitReady(t)
		_, p, body, err := openStream(ctx, g.url+"/streams/"+other, evs[at(n/2)].ID)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = body.Close() }()
		if d, _ := resyncOf(t, p); d.Reason != "invalid-id" || !strings.Contains(d.Error, "checkpoint of topic") {
			t.Fatalf("resync = %+v", d)
		}
	})
	t.Run("gateway without a position topic", func(t *testing.T) {
		g := startGateway(t, []string{topic}, nil) // id-format v1 and no position-topic: reads no v2 id
		g.waitReady(t)
		invalid(t, g, evs[at(n/2)].ID, "invalid-id", "no position topic")
	})
	t.Run("checkpoint gone", func(t *testing.T) {
		id := evs[at(n/4)].ID // never resolved by small: not in its cache
		ends, err := kafkatest.Admin(t).ListEndOffsets(ctx, pt)
		if err != nil {
			t.Fatal(err)
		}
		var os kadm.Offsets
		ends.Each(func(o kadm.ListedOffset) { os.Add(kadm.Offset{Topic: pt, Partition: o.Partition, At: o.Offset}) })
		if _, err := kafkatest.Admin(t).DeleteRecords(ctx, os); err != nil {
			t.Fatal(err)
		}
		invalid(t, small, id, "retention", "no longer stored")
	})
}

// waitFirstCheckpoint waits until g has a checkpoint of topic acknowledged: until then its frames get v1 ids.
func waitFirstCheckpoint(t *testing.T, g *gateway, topic string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for metricValue(t, g, "ssegate_checkpoint_writes_total", `topic="`+topic+`"`, `result="acked"`) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint acknowledged in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCompactIDsNeedPositionTopic: a gateway without a position topic (id-format v1, none given) answers a
// well-formed v2 id invalid at once, without Kafka; one with a position topic, whatever its id-format, reads
// the checkpoint (here from a Kafka that is not there). No Kafka is needed.
func TestCompactIDsNeedPositionTopic(t *testing.T) {
	id, _ := position.AppendCompact(nil, position.Ref{Offset: 7}, position.MustParse("v1:0-1"), position.MustParse("v1:0-2"), 64)
	for _, tc := range []struct {
		name, idFormat, positionTopic string
		invalid                       bool
	}{
		{"v1 without position-topic", "v1", "", true},
		{"v1 with position-topic", "v1", "positions", false},
		{"v2", "v2", "positions", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Kafka.Brokers = []string{"127.0.0.1:1"} // nothing listens there
			cfg.Topics, cfg.DemoTopic = []string{"t"}, "t"
			cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
			cfg.IDFormat, cfg.PositionTopic = tc.idFormat, tc.positionTopic
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			a, err := New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer a.release()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err = a.streamTopics["t"].Resolve(ctx, string(id), [16]byte{})
			if got := errors.Is(err, checkpoint.ErrInvalid); got != tc.invalid || err == nil {
				t.Fatalf("Resolve = %v, want invalid %v", err, tc.invalid)
			}
			if tc.invalid && ctx.Err() != nil {
				t.Fatal("an id this gateway cannot read waited for Kafka")
			}
		})
	}
}

// TestCompactIDsWithoutPositionTopic: when checkpoints cannot be written, no frame names one: every id is
// v1, and exact.
func TestCompactIDsWithoutPositionTopic(t *testing.T) {
	topic := kafkatest.NewTopic(t, 8, nil)
	a := startGateway(t, []string{topic}, func(c *Config) { c.IDFormat, c.PositionTopic = "v2", "no/such topic" })
	a.waitReady(t)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := connect(t, ctx, a.url+"/streams/"+topic)
	for range 4 {
		produceSpread(t, cl, 25, 8, 10)
		time.Sleep(50 * time.Millisecond) // room for a checkpoint write to be (not) acknowledged
	}
	evs := readN(t, c.p, 100)
	for i, ev := range evs {
		if !strings.HasPrefix(ev.ID, "v1:") {
			t.Fatalf("event %d: id %q names a checkpoint that was never written", i, ev.ID)
		}
	}
	checkEvents(t, c.initialID, evs, byOffset(kafkatest.ReadAll(t, topic)))
}

// TestCompactIDRecreatedTopic: a compact id of a topic that was deleted and created again since resyncs
// (invalid-id) instead of being applied to the new topic's offsets.
func TestCompactIDRecreatedTopic(t *testing.T) {
	topic := kafkatest.NewTopic(t, 4, nil)
	pt := kafkatest.NewTopic(t, 1, nil)
	a := startGateway(t, []string{topic}, func(c *Config) { c.IDFormat, c.PositionTopic = "v2", pt })
	a.waitReady(t)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := connect(t, ctx, a.url+"/streams/"+topic)
	var id string
	for i := 0; id == "" && i < 50; i++ {
		produceSpread(t, cl, 5, 4, 10)
		for _, ev := range readN(t, c.p, 5) {
			if position.IsCompact(ev.ID) {
				id = ev.ID
			}
		}
	}
	if id == "" {
		t.Fatal("no compact id after 250 records")
	}
	recreateTopic(t, ctx, topic, 4)
	cl2 := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSpread(t, cl2, 20, 4, 10)
	invalidOnNewGateway(t, ctx, topic, pt, id, "deleted and created again")
}

// invalidOnNewGateway starts a gateway of topic with position topic pt, and checks that it answers id with
// an invalid-id resync whose error has errHas.
func invalidOnNewGateway(t *testing.T, ctx context.Context, topic, pt, id, errHas string) {
	t.Helper()
	b := startGateway(t, []string{topic}, func(c *Config) { c.PositionTopic = pt })
	b.waitReady(t)
	_, p, body, err := openStream(ctx, b.url+"/streams/"+topic, id)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = body.Close() }()
	if d, _ := resyncOf(t, p); d.Reason != "invalid-id" || !strings.Contains(d.Error, errHas) {
		t.Fatalf("resync = %+v, want invalid-id with %q", d, errHas)
	}
}

// TestCompactIDsPositionTopicRecreated: the position topic is deleted and created again, and other
// checkpoints of the same data topic take the offsets the old ones had. An id made before names an offset
// that now holds another checkpoint: a gateway answers it with an invalid-id resync, never with the other
// checkpoint's position.
func TestCompactIDsPositionTopicRecreated(t *testing.T) {
	topic := kafkatest.NewTopic(t, 4, nil)
	pt := kafkatest.NewTopic(t, 1, nil)
	a := startGateway(t, []string{topic}, func(c *Config) { c.IDFormat, c.PositionTopic = "v2", pt })
	a.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := connect(t, ctx, a.url+"/streams/"+topic)
	waitFirstCheckpoint(t, a, topic)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSpread(t, cl, 20, 4, 10)
	evs := readN(t, c.p, 20)
	id := evs[len(evs)-1].ID
	cpt, err := position.ParseCompact(id)
	if err != nil {
		t.Fatalf("last id %q: %v", id, err)
	}
	if cpt.Ref().Check == 0 {
		t.Fatalf("id %s has no check", id)
	}
	a.stop()
	if err := <-a.done; err != nil {
		t.Fatalf("gateway Run: %v", err)
	}
	a.done <- nil // for the cleanup, which waits for it too

	// The position topic again, from offset 0, with checkpoints of the same topic up to past the old id's
	// offset, of another position than the one the id was made against: applied to one, the id says another
	// position than the client's (here, one past the topic's end).
	td, err := kafkatest.Admin(t).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var end position.Vector
	for p := range int32(4) {
		end.Set(p, 0)
	}
	var other []byte
	for w := 0; other == nil || position.CheckpointSum(other) == cpt.Ref().Check; w++ {
		// A writer whose record's check is not the id's: with the same check (1 in 127) the id would fit it.
		other = position.AppendCheckpoint(nil, position.Checkpoint{Topic: topic, TopicID: td[topic].ID, Writer: fmt.Sprintf("another-pod-%d", w), Vector: end})
	}
	recs := make([]*kgo.Record, cpt.Ref().Offset+1)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: pt, Value: other}
	}
	recreateTopic(t, ctx, pt, 1)
	kafkatest.Produce(t, kafkatest.Client(t), recs...)

	invalidOnNewGateway(t, ctx, topic, pt, id, "not the checkpoint it was made against")
}
