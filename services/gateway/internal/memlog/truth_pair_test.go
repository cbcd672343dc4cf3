package memlog_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// pair is one topic built the same way in memlog and in the real Kafka, with a reader of each through
// feed.Cluster. Every change goes to both, so a test compares what the two readers see.
type pair struct {
	owner *testing.T // the test newPair was given: clients that outlive a subtest are its
	topic string
	mem   *memlog.Cluster
	mc    feed.Cluster // memlog's reader
	kc    feed.Cluster // Kafka's reader: feed.NewKafkaCluster, as the gateway builds it
	prod  *kgo.Client  // produces outside transactions, to the partition a record names
	adm   *kadm.Client
	ctx   context.Context
}

// newPair creates a topic of n partitions in both.
func newPair(t *testing.T, n int32) *pair {
	t.Helper()
	p := &pair{owner: t, topic: kafkatest.NewTopic(t, n, nil), mem: memlog.New(), adm: kafkatest.Admin(t), ctx: kafkatest.Context(t)}
	p.mem.CreateTopic(p.topic, int(n))
	p.mc = p.mem.Client()
	p.kc = p.kafkaReader(t)
	p.prod = kafkatest.Client(t, p.prodOpts()...)
	return p
}

// prodOpts are the options of a client producing to the topic, to the partition a record names.
func (p *pair) prodOpts() []kgo.Opt {
	return []kgo.Opt{kgo.DefaultProduceTopic(p.topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}
}

// kafkaReader returns a new reader of the real Kafka, closed when the test ends. Its fetches wait at most
// 100ms for records, so that a test sees quickly what a fetch answers (the gateway's wait is longer; what a
// fetch answers is the same).
func (p *pair) kafkaReader(t *testing.T, opts ...kgo.Opt) feed.Cluster {
	t.Helper()
	kc, err := feed.NewKafkaCluster(append([]kgo.Opt{kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc
}

// rec is a record of a partition; a zero ts leaves the timestamp to the producer (now).
func rec(partition int32, ts time.Time, value string) *kgo.Record {
	return &kgo.Record{Partition: partition, Timestamp: ts, Value: []byte(value)}
}

// produce writes values, outside any transaction, to a partition of both, stamped ts (zero: now), and checks
// that they get the same offsets.
func (p *pair) produce(t *testing.T, partition int32, ts time.Time, values ...string) {
	t.Helper()
	for _, v := range values {
		kr := kafkatest.Produce(t, p.prod, rec(partition, ts, v))[0]
		if off := p.mem.Produce(p.topic, rec(partition, ts, v)); off != kr.Offset {
			t.Fatalf("%s went to offset %d in memlog, %d in kafka", v, off, kr.Offset)
		}
	}
}

// deleteRecords moves a partition's log start to before in both.
func (p *pair) deleteRecords(t *testing.T, partition int32, before int64) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: p.topic, Partition: partition, At: before})
	resp, err := p.adm.DeleteRecords(p.ctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %d before %d: %v", partition, before, err)
	}
	p.mem.DeleteRecords(p.topic, partition, before)
}

// txn is one transaction open in both.
type txn struct {
	p   *pair
	cl  *kgo.Client
	mem *memlog.Txn
}

// begin opens a transaction in both; name tells the producers apart. The transaction's Kafka client lives
// as long as the pair, so that a later subtest can end it.
func (p *pair) begin(t *testing.T, name string) *txn {
	t.Helper()
	cl := kafkatest.Client(p.owner, append(p.prodOpts(), kgo.TransactionalID(p.topic+"-"+name))...)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return &txn{p: p, cl: cl, mem: p.mem.Begin(p.topic)}
}

// produce writes values of the transaction to a partition of both.
func (x *txn) produce(t *testing.T, partition int32, ts time.Time, values ...string) {
	t.Helper()
	for _, v := range values {
		kr := kafkatest.Produce(t, x.cl, rec(partition, ts, v))[0]
		if off := x.mem.Produce(rec(partition, ts, v)); off != kr.Offset {
			t.Fatalf("%s went to offset %d in memlog, %d in kafka", v, off, kr.Offset)
		}
	}
}

// end commits or aborts the transaction in both, and waits until Kafka has written its markers (they are
// written a moment after EndTransaction returns): the two logs' end offsets are the same again, and a record
// produced next gets the same offset in both.
func (x *txn) end(t *testing.T, commit bool) {
	t.Helper()
	if err := x.cl.EndTransaction(x.p.ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
	if commit {
		x.mem.Commit()
	} else {
		x.mem.Abort()
	}
	mem, err := x.p.mc.ListOffsets(x.p.ctx, feed.LogEnd, x.p.topic)
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "the transaction markers", func() bool {
		kafka, err := x.p.kc.ListOffsets(x.p.ctx, feed.LogEnd, x.p.topic)
		return err == nil && fmt.Sprint(kafka) == fmt.Sprint(mem)
	})
}

// agree checks that memlog and Kafka answer the same to see. Kafka's answer may take a moment to settle
// (partitions added, a topic deleted): memlog's answer is
// taken once, and Kafka's until it is the same or 10s have passed.
func (p *pair) agree(t *testing.T, what string, see func(kc feed.Cluster) string) {
	t.Helper()
	mem := see(p.mc)
	var kafka string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if kafka = see(p.kc); kafka == mem {
			t.Logf("%s: %s", what, kafka)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\nmemlog %s\nkafka  %s", what, mem, kafka)
		}
	}
}

// polled is what a reader's polls covered of one partition, fetch after fetch.
type polled struct {
	values []string
	// first is the First of the first fetch; next the Next of the last; stable and start the LastStable and
	// LogStart of the last fetch.
	first, next, stable, start int64
}

func (r polled) String() string {
	return fmt.Sprintf("values [%s] first %d next %d last-stable %d log-start %d",
		strings.Join(r.values, " "), r.first, r.next, r.stable, r.start)
}

// pollUntil polls kc until its fetches of partition reach offset until (Next), and returns what they covered.
// Fetches that carry an error are left out, as the feed leaves them out.
func pollUntil(t *testing.T, ctx context.Context, kc feed.Cluster, partition int32, until int64) polled {
	t.Helper()
	r := polled{first: -1, next: -1, stable: -1, start: -1}
	for deadline := time.Now().Add(15 * time.Second); r.next < until; {
		if time.Now().After(deadline) {
			t.Fatalf("polls never reached offset %d: %v", until, r)
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs, err := kc.Poll(pctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Err != nil {
				t.Logf("poll: %s/%d: %v", f.Topic, f.Partition, f.Err)
				continue
			}
			if f.Partition != partition {
				continue
			}
			for _, rec := range f.Records {
				r.values = append(r.values, string(rec.Value))
			}
			if r.first < 0 {
				r.first = f.First
			}
			r.next = max(r.next, f.Next)
			r.stable, r.start = f.LastStable, f.LogStart
		}
	}
	return r
}

// fetchCounter is a franz-go hook that counts the fetch requests a client wrote: a test waits for one to
// know that the client reads a partition from the offset it was given.
type fetchCounter struct{ n atomic.Int64 }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (f *fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 1 && err == nil { // 1 is Fetch
		f.n.Add(1)
	}
}

// waitFetches waits until the client has written n more fetch requests than it had when called.
func (f *fetchCounter) waitFetches(t *testing.T, n int64) {
	t.Helper()
	want := f.n.Load() + n
	kafkatest.WaitFor(t, 10*time.Second, "the reader's fetches", func() bool { return f.n.Load() >= want })
}

// logSaw is a franz-go logger that remembers whether a message containing a string was logged.
type logSaw struct {
	want string
	saw  atomic.Bool
}

// Level implements kgo.Logger.
func (l *logSaw) Level() kgo.LogLevel { return kgo.LogLevelInfo }

// Log implements kgo.Logger.
func (l *logSaw) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.Contains(msg, l.want) {
		l.saw.Store(true)
	}
}
