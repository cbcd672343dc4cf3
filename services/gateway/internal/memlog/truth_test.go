package memlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// view is what a reader can observe of one partition: the three listed offsets, and for every offset from the
// low watermark on, the values a read from there gets up to the last stable offset, and whether that read
// passes it (the log's next offset reaches the last stable offset).
type view struct {
	low, stable, end int64
	reads            map[int64][]string
}

// observe reads a partition through the seam's interfaces, as the gateway does.
func observe(t *testing.T, kc feed.Cluster, log replay.Log, topic string) view {
	t.Helper()
	ctx := kafkatest.Context(t)
	list := func(kind feed.OffsetKind) int64 {
		m, err := kc.ListOffsets(ctx, kind, topic)
		if err != nil {
			t.Fatal(err)
		}
		return m[topic][0]
	}
	v := view{low: list(feed.LogStart), stable: list(feed.LastStable), end: list(feed.LogEnd), reads: map[int64][]string{}}
	for from := v.low; from <= v.stable; from++ {
		var got []string
		off := from
		for deadline := time.Now().Add(5 * time.Second); off < v.stable; {
			recs, next, err := log.Fetch(ctx, topic, 0, off)
			if err != nil {
				t.Fatalf("fetch at %d: %v", off, err)
			}
			for _, r := range recs {
				if r.Offset >= off && r.Offset < v.stable {
					got = append(got, string(r.Value))
				}
			}
			off = max(off, next)
			if time.Now().After(deadline) {
				t.Fatalf("a read from %d never passed the last stable offset %d (at %d)", from, v.stable, off)
			}
		}
		v.reads[from] = got
	}
	if v.low > 0 {
		var oor *replay.OutOfRangeError
		if _, _, err := log.Fetch(ctx, topic, 0, v.low-1); !errors.As(err, &oor) {
			t.Errorf("a fetch below the low watermark answered %v, not a *replay.OutOfRangeError", err)
		}
	}
	return v
}

// TestMemlogTellsTheTruth proves against a real Kafka each behavior of memlog the seam tests rely on: every
// subtest builds the same topic in memlog and in Kafka and compares what a reader sees of both through the
// seam's interfaces (feed.Cluster, replay.Log). Kafka is feed.NewKafkaCluster and replay.NewKafkaLog, as the
// gateway builds them.
func TestMemlogTellsTheTruth(t *testing.T) {
	kafkatest.Brokers(t) // skip at once without a Kafka
	for _, c := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"log", truthLog},                    // list offsets and fetches at every offset, step by step
		{"metadata", truthMetadata},          // truth_metadata_test.go
		{"offsets-after", truthOffsetsAfter}, // truth_offsets_test.go
		{"list-offsets", truthListOffsets},   // truth_offsets_test.go
		{"poll", truthPoll},                  // truth_poll_test.go
		{"retention", truthRetention},        // truth_retention_test.go
		{"recreation", truthRecreation},      // truth_metadata_test.go
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

// truthLog builds the same partition in the in-memory log and in a real Kafka (plain records, committed and
// aborted transactions, two producers committing one after the other, an open transaction, DeleteRecords)
// and checks that a reader sees the same offsets and records in both at every step (list offsets of the
// three kinds, a replay.Log fetch from every offset, a fetch below the log start failing), and that a poll
// from the start covers the same records, first and next offsets.
func truthLog(t *testing.T) {
	p := newPair(t, 1)
	topic, mem, ctx := p.topic, p.mem, p.ctx
	txa := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-a"))
	txb := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-b"))
	klog, err := replay.NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	defer klog.Close()

	open := map[*kgo.Client]*memlog.Txn{}
	val := func(v string) *kgo.Record { return &kgo.Record{Value: []byte(v)} }
	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"plain records", func(t *testing.T) { p.produce(t, 0, time.Time{}, "p0", "p1") }},
		{"a committed transaction", func(t *testing.T) {
			produceTxn(t, ctx, txa, true, "c0", "c1")
			x := mem.Begin(topic)
			x.Produce(val("c0"))
			x.Produce(val("c1"))
			x.Commit()
		}},
		{"an aborted transaction", func(t *testing.T) {
			produceTxn(t, ctx, txa, false, "a0", "a1")
			x := mem.Begin(topic)
			x.Produce(val("a0"))
			x.Produce(val("a1"))
			x.Abort()
		}},
		{"two open transactions", func(t *testing.T) {
			for _, cl := range []*kgo.Client{txa, txb} {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				if err := cl.ProduceSync(ctx, val("o-"+fmt.Sprint(len(open)))).FirstErr(); err != nil {
					t.Fatal(err)
				}
				x := mem.Begin(topic)
				x.Produce(val("o-" + fmt.Sprint(len(open))))
				open[cl] = x
			}
		}},
		{"committed one after the other", func(t *testing.T) {
			for _, cl := range []*kgo.Client{txa, txb} {
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
				open[cl].Commit()
			}
		}},
		{"records deleted", func(t *testing.T) { p.deleteRecords(t, 0, 3) }},
	}
	for _, st := range steps {
		st.do(t)
		sameView(t, st.name, observe(t, p.mc, mem, topic), func() view { return observe(t, p.kc, klog, topic) })
	}
	// The feed's view: what a poll from the start covers, markers included.
	p.mc.Assign(map[string]map[int32]int64{topic: {0: feed.AtLogStart}})
	p.kc.Assign(map[string]map[int32]int64{topic: {0: feed.AtLogStart}})
	want := pollUntil(t, ctx, p.kc, 0, 11)
	if got := pollUntil(t, ctx, p.mc, 0, 11); got.String() != want.String() {
		t.Fatalf("polls from the start:\nmemlog %v\nkafka  %v", got, want)
	}
}

// sameView checks that Kafka's view of the partition (kafka) is mem after step. Kafka writes transaction
// markers and moves the last stable offset a moment after EndTransaction returns: it compares once Kafka's
// view has settled, for up to 10s.
func sameView(t *testing.T, step string, mem view, kafka func() view) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		want := kafka()
		if fmt.Sprint(mem) == fmt.Sprint(want) {
			t.Logf("after %s: %+v", step, want)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s:\nmemlog %+v\nkafka  %+v", step, mem, want)
		}
	}
}

func produceTxn(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}
