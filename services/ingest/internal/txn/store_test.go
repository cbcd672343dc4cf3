package txn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// rawTxn is a transactional client that writes checkpoint records the way a Producer does, but can also
// leave a transaction open (a crashed producer) or abort it.
type rawTxn struct {
	t  *testing.T
	cl *kgo.Client
}

func newRawTxn(t *testing.T, id string) *rawTxn {
	t.Helper()
	return &rawTxn{t: t, cl: kafkatest.Client(t, kgo.TransactionalID(id), kgo.TransactionTimeout(10*time.Second))}
}

// write begins a transaction and writes the checkpoint value (nil: a tombstone) for key, without ending it.
func (r *rawTxn) write(topic, key string, value []byte) {
	r.t.Helper()
	if err := r.cl.BeginTransaction(); err != nil {
		r.t.Fatal(err)
	}
	kafkatest.Produce(r.t, r.cl, &kgo.Record{Topic: topic, Key: []byte(key), Value: value})
}

func (r *rawTxn) end(commit kgo.TransactionEndTry) {
	r.t.Helper()
	if err := r.cl.EndTransaction(kafkatest.Context(r.t), commit); err != nil {
		r.t.Fatal(err)
	}
}

func cpValue(id string) []byte { return fmt.Appendf(nil, `{"id":%q}`, id) }

// TestStoreSeesLatestCommittedCheckpoint checks the checkpoint store against real Kafka: after a fence it
// answers the last committed checkpoint, including ones committed long after the store's first read (a
// lease that arrives late), never an aborted one or one of a fenced transaction, and it waits for
// transactions other sources hold open rather than answer from before them. ReadCheckpoint, which reads the
// topic from its start each time, must agree at every step.
func TestStoreSeesLatestCommittedCheckpoint(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	compact := "compact"
	// One partition, so that the other source's open transaction below holds back this source's key.
	topic := kafkatest.NewTopic(t, 1, map[string]*string{"cleanup.policy": &compact})
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	suffix := fmt.Sprintf("%x", time.Now().UnixNano())
	keyA, keyB := "a-"+suffix, "b-"+suffix
	store := NewStore(opts, topic, []string{keyA, keyB}, nil)
	ctx, cancel := context.WithCancel(kafkatest.Context(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx) }()

	check := func(step, key, want string, found bool) {
		t.Helper()
		cp, err := store.Get(kafkatest.Context(t), key)
		if err != nil || cp.ID != want || cp.Found != found {
			t.Fatalf("%s: store.Get(%s) = %+v, %v; want id %q found %v", step, key, cp, err, want, found)
		}
		ref, err := ReadCheckpoint(kafkatest.Context(t), opts, topic, key)
		if err != nil || ref != cp {
			t.Fatalf("%s: ReadCheckpoint(%s) = %+v, %v; the store said %+v", step, key, ref, err, cp)
		}
	}
	open := func() *Producer {
		t.Helper()
		p, _, err := Open(kafkatest.Context(t), Config{TransactionalID: "txn-a-" + suffix, CheckpointTopic: topic, Key: keyA, Opts: opts, Checkpoints: store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}

	check("empty topic", keyA, "", false)
	p := open()
	if err := p.Commit(kafkatest.Context(t), "1"); err != nil {
		t.Fatal(err)
	}
	check("committed after the store's first read", keyA, "1", true)

	// A transaction of the source's transactional id left open, as a crash leaves it: the next Open fences
	// it (aborts it), so its checkpoint never counts.
	p.Close()
	crashed := newRawTxn(t, "txn-a-"+suffix)
	crashed.write(topic, keyA, cpValue("2"))
	p = open()
	check("after the fence of an open transaction", keyA, "1", true)

	// Another source holds a transaction open while this one commits after it: Get must wait for it to end
	// instead of answering from before it (read_committed stops at the open transaction).
	other := newRawTxn(t, "txn-b-"+suffix)
	other.write(topic, keyB, cpValue("9"))
	if err := p.Commit(kafkatest.Context(t), "3"); err != nil {
		t.Fatal(err)
	}
	got := make(chan Checkpoint, 1)
	go func() {
		cp, err := store.Get(kafkatest.Context(t), keyA)
		if err != nil {
			t.Error(err)
		}
		got <- cp
	}()
	other.end(kgo.TryCommit)
	if cp := <-got; cp.ID != "3" {
		t.Fatalf("Get during another source's open transaction answered %+v, want id 3", cp)
	}
	check("the other source", keyB, "9", true)

	// An aborted checkpoint does not count.
	p.Close()
	aborted := newRawTxn(t, "txn-a-"+suffix)
	aborted.write(topic, keyA, cpValue("4"))
	aborted.end(kgo.TryAbort)
	check("after an aborted transaction", keyA, "3", true)

	// A tombstone resets the source.
	reset := newRawTxn(t, "txn-b-"+suffix)
	reset.write(topic, keyB, nil)
	reset.end(kgo.TryCommit)
	check("after a tombstone", keyB, "", false)

	if _, err := store.Get(kafkatest.Context(t), "not-followed"); err == nil {
		t.Error("Get of a key the store does not keep succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := store.Get(context.Background(), keyA); err == nil {
		t.Error("Get after Run returned succeeded")
	}
}

// TestStoreManyPartitions: with a checkpoint topic of several partitions, Get waits for each of them.
func TestStoreManyPartitions(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	compact := "compact"
	topic := kafkatest.NewTopic(t, 3, map[string]*string{"cleanup.policy": &compact})
	suffix := fmt.Sprintf("%x", time.Now().UnixNano())
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("k%d-%s", i, suffix))
	}
	store := NewStore([]kgo.Opt{kgo.SeedBrokers(brokers...)}, topic, keys, nil)
	ctx, cancel := context.WithCancel(kafkatest.Context(t))
	defer cancel()
	go func() { _ = store.Run(ctx) }()
	for round := range 3 {
		w := newRawTxn(t, fmt.Sprintf("txn-many-%d-%s", round, suffix))
		for i, k := range keys {
			w.write(topic, k, cpValue(fmt.Sprintf("%d.%d", round, i)))
			w.end(kgo.TryCommit)
		}
		for i, k := range keys {
			cp, err := store.Get(kafkatest.Context(t), k)
			if want := fmt.Sprintf("%d.%d", round, i); err != nil || cp.ID != want {
				t.Fatalf("round %d: Get(%s) = %+v, %v; want %s", round, k, cp, err, want)
			}
		}
	}
}

// TestEnsureTopicConfigs creates a checkpoint topic on the real broker and checks that it accepted the
// configs that let compaction run.
func TestEnsureTopicConfigs(t *testing.T) {
	adm := kafkatest.Admin(t)
	topic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = adm.DeleteTopic(context.Background(), topic) })
	ctx := kafkatest.Context(t)
	for range 2 { // the second call finds the topic and leaves it
		if err := EnsureTopic(ctx, adm, topic); err != nil {
			t.Fatal(err)
		}
	}
	// A broker answers for a topic's configs a moment after it has created the topic: until then the answer
	// can be empty, so ask until it is complete.
	got := map[string]string{}
	kafkatest.WaitFor(t, 10*time.Second, "the topic's configs to be described", func() bool {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return false
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			return false
		}
		for _, c := range rc.Configs {
			got[c.Key] = c.MaybeValue()
		}
		return got["cleanup.policy"] != ""
	})
	for k, want := range TopicConfigs {
		if got[k] != want {
			t.Errorf("config %s = %q, want %q", k, got[k], want)
		}
	}
}
