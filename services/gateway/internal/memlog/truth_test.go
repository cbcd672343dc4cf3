package memlog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
		if _, _, err := log.Fetch(ctx, topic, 0, v.low-1); err == nil {
			t.Errorf("a fetch below the low watermark did not fail")
		}
	}
	return v
}

// TestMemlogTellsTheTruth builds the same partition in the in-memory log and in a real Kafka (plain records,
// committed and aborted transactions, two producers committing one after the other, an open transaction,
// DeleteRecords) and checks that a reader sees the same offsets and records in both at every step.
func TestMemlogTellsTheTruth(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	plain := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	txa := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-a"))
	txb := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-b"))
	kafka, err := feed.NewKafkaCluster(kgo.SeedBrokers(kafkatest.Brokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	klog, err := replay.NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	defer klog.Close()
	mem := memlog.New()
	mem.CreateTopic(topic, 1)
	mc := mem.Client()
	ctx := kafkatest.Context(t)

	open := map[*kgo.Client]*memlog.Txn{}
	rec := func(v string) *kgo.Record { return &kgo.Record{Value: []byte(v)} }
	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"plain records", func(t *testing.T) {
			kafkatest.Produce(t, plain, rec("p0"), rec("p1"))
			mem.Produce(topic, rec("p0"))
			mem.Produce(topic, rec("p1"))
		}},
		{"a committed transaction", func(t *testing.T) {
			txn(t, ctx, txa, true, "c0", "c1")
			x := mem.Begin(topic)
			x.Produce(rec("c0"))
			x.Produce(rec("c1"))
			x.Commit()
		}},
		{"an aborted transaction", func(t *testing.T) {
			txn(t, ctx, txa, false, "a0", "a1")
			x := mem.Begin(topic)
			x.Produce(rec("a0"))
			x.Produce(rec("a1"))
			x.Abort()
		}},
		{"two open transactions", func(t *testing.T) {
			for _, cl := range []*kgo.Client{txa, txb} {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				if err := cl.ProduceSync(ctx, rec("o-"+fmt.Sprint(len(open)))).FirstErr(); err != nil {
					t.Fatal(err)
				}
				x := mem.Begin(topic)
				x.Produce(rec("o-" + fmt.Sprint(len(open))))
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
		{"records deleted", func(t *testing.T) {
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3})
			if _, err := kafkatest.Admin(t).DeleteRecords(ctx, os); err != nil {
				t.Fatal(err)
			}
			mem.DeleteRecords(topic, 0, 3)
		}},
	}
	for _, st := range steps {
		st.do(t)
		got := observe(t, mc, mem, topic)
		// Kafka writes transaction markers and moves the last stable offset a moment after
		// EndTransaction returns: compare once it has settled.
		var want view
		for deadline := time.Now().Add(10 * time.Second); ; {
			want = observe(t, kafka, klog, topic)
			if fmt.Sprint(got) == fmt.Sprint(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s:\nmemlog %+v\nkafka  %+v", st.name, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("after %s: %+v", st.name, want)
	}
	// The feed's view: what a poll from the start covers, markers included.
	polled := func(kc feed.Cluster) (recs []string, first, next int64) {
		kc.Assign(map[string]map[int32]int64{topic: {0: feed.AtLogStart}})
		first = -1
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && next < 11; {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs, _ := kc.Poll(pctx)
			cancel()
			for _, f := range fs {
				for _, r := range f.Records {
					recs = append(recs, string(r.Value))
				}
				if first < 0 {
					first = f.First
				}
				next = max(next, f.Next)
			}
		}
		return slices.Clip(recs), first, next
	}
	kr, kf, kn := polled(kafka)
	mr, mf, mn := polled(mc)
	if fmt.Sprint(kr, kf, kn) != fmt.Sprint(mr, mf, mn) {
		t.Fatalf("polls from the start: memlog %v first %d next %d, kafka %v first %d next %d", mr, mf, mn, kr, kf, kn)
	}
}

func txn(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool, values ...string) {
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
