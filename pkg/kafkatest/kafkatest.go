package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/proctest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Brokers returns the test cluster's brokers, or skips t (fails it under CI=true) when there is none.
func Brokers(t testing.TB) []string {
	t.Helper()
	return fromEnv(t, "KAFKA_BROKERS")
}

// SASLBrokers returns the test cluster's SASL_PLAINTEXT listener (KAFKA_SASL_BROKERS, set by
// pkg/kafkatest/kafka.sh), or skips t (fails it under CI=true) when there is none.
func SASLBrokers(t testing.TB) []string {
	t.Helper()
	return fromEnv(t, "KAFKA_SASL_BROKERS")
}

// TLSBrokers returns the test cluster's SSL listener (KAFKA_TLS_BROKERS) and the PEM file of the CA that
// signed its certificate (KAFKA_TLS_CA), both set by pkg/kafkatest/kafka.sh, or skips t (fails it under CI=true).
func TLSBrokers(t testing.TB) (brokers []string, caFile string) {
	t.Helper()
	return fromEnv(t, "KAFKA_TLS_BROKERS"), fromEnv(t, "KAFKA_TLS_CA")[0]
}

func fromEnv(t testing.TB, name string) []string {
	t.Helper()
	return strings.Split(proctest.Service(t, name, "a local Kafka"), ",")
}

// Client returns a client of the test cluster with opts added, closed when the test ends.
func Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of the test cluster, closed when the test ends.
func Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(Client(t))
}

// Context returns a context that ends with the test or after a minute, whichever is first.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TopicName returns a topic name unique to this test run.
func TopicName(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "#", "_").Replace(t.Name())
	if len(name) > 150 {
		name = name[:150]
	}
	return "t." + name + "." + hex.EncodeToString(b[:])
}

// NewTopic creates a topic with the given partitions and configs (may be nil) and deletes it when the test
// ends. It returns once the broker reports the topic's partitions.
func NewTopic(t testing.TB, partitions int32, configs map[string]*string) string {
	t.Helper()
	name := TopicName(t)
	CreateTopic(t, name, partitions, configs)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = Admin(t).DeleteTopic(ctx, name)
	})
	return name
}

// CreateTopic creates the named topic and waits until its partitions have leaders.
func CreateTopic(t testing.TB, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := Admin(t)
	ctx := Context(t)
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	WaitFor(t, 30*time.Second, "topic "+name+" to have leaders", func() bool {
		md, err := adm.Metadata(ctx, name)
		if err != nil {
			return false
		}
		td, ok := md.Topics[name]
		if !ok || td.Err != nil || len(td.Partitions) != int(partitions) {
			return false
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// Produce writes records synchronously, failing the test on any error, and returns them with their offsets.
func Produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	if err := cl.ProduceSync(Context(t), recs...).FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce: %v", err)
	}
	return recs
}

// ReadAll reads topic from its start up to its end offsets at the time of the call (read_committed), and
// returns the records in partition order, partition by partition. Transaction markers (control records)
// count towards the end offsets but are not returned, so it works on topics written by transactions.
func ReadAll(t testing.TB, topic string) map[int32][]*kgo.Record {
	t.Helper()
	ctx := Context(t)
	ends, err := Admin(t).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("kafkatest: list end offsets of %s: %v", topic, err)
	}
	out := map[int32][]*kgo.Record{}
	last := map[int32]int64{} // the last offset read per partition, control records included
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(parts) == 0 {
		return out
	}
	cl := Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	done := func() bool {
		for p, end := range want {
			if l, ok := last[p]; !ok || l < end-1 {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: reading %s back: %v (have %d partitions)", topic, ctx.Err(), len(out))
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("kafkatest: fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return
			}
			last[r.Partition] = r.Offset
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
	}
	return out
}

// WaitFor polls cond every 20ms until it is true, failing the test with what after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
