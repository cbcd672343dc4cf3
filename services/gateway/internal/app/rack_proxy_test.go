package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// TestUnreachableFollower: on a three-broker cluster that the gateway reaches through a proxy per broker, a
// gateway in the rack of node 2 reads topic a (two partitions, led by node 1, a replica on each node) from
// node 2 and topic b (led by node 1, no replica on node 2) from node 1. Node 3, which serves the gateway
// nothing, refusing the gateway's connections moves no partition. Then node 2 becomes unreachable for the
// gateway alone (its proxy drops everything, as a lost route would), while it stays in the in-sync replicas,
// so node 1 keeps naming it as the replica to read from: the gateway reads a's partitions from node 1
// within a bound, once (not again and again), b's stay where they were, and both streams get every record
// once, in order.
func TestUnreachableFollower(t *testing.T) {
	c := kafkatest.NewProxiedRackCluster(t, "zone-a", "zone-b", "zone-c")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	a, b := kafkatest.TopicName(t)+".a", kafkatest.TopicName(t)+".b"
	adm := kadm.NewClient(cl)
	createInSync(t, ctx, cl, map[string][][]int32{a: {{1, 2, 3}, {1, 2, 3}}, b: {{1, 3}}})
	g := startGatewayOn(t, c.ClientBrokers, []string{a, b}, func(cfg *Config) {
		cfg.Kafka.Rack = "zone-b"
		cfg.Prefill = 0
	})
	g.waitReady(t)
	streams := map[string]*orderedStream{a: newOrderedStream(t, ctx, g.url+"/streams/"+a), b: newOrderedStream(t, ctx, g.url+"/streams/"+b)}
	produce := func(n int, bound time.Duration) {
		t.Helper()
		produceEach(t, ctx, cl, streams, []*kgo.Record{{Topic: a, Partition: 0}, {Topic: a, Partition: 1}, {Topic: b}}, a, n, bound)
	}
	served := func(node int) float64 {
		return metricValue(t, g, "ssegate_feed_fetch_bytes_total", fmt.Sprintf(`broker="%d"`, node))
	}
	moves := func() float64 {
		return metricValue(t, g, "ssegate_feed_follower_moves_total", `to="leader"`)
	}

	produce(10, 30*time.Second)
	if served(2) == 0 || served(3) != 0 {
		t.Fatalf("bytes served: node 1 %v, node 2 %v, node 3 %v; want node 2 (the gateway's rack) to serve topic a", served(1), served(2), served(3))
	}

	// Node 3, which serves the gateway nothing, refuses it: its metadata requests and connections there fail.
	c.Proxies[2].Reset()
	refused := c.Proxies[2].Accepted()
	kafkatest.WaitFor(t, time.Minute, "the gateway's connections to node 3 refused", func() bool {
		produce(1, 30*time.Second)
		return c.Proxies[2].Accepted() >= refused+3
	})
	fromFollower := served(2)
	produce(5, 30*time.Second)
	if m := moves(); m != 0 || served(2) <= fromFollower {
		t.Fatalf("node 3 refusing the gateway moved %v partitions to their leaders, node 2 served %v bytes then %v; want none moved, node 2 serving", m, fromFollower, served(2))
	}
	c.Proxies[2].Forward()

	// Node 2 becomes unreachable for the gateway; it still replicates, so node 1 keeps naming it.
	c.Proxies[1].Blackhole()
	lost := time.Now()
	produce(1, time.Minute)
	t.Logf("records reached the streams %v after node 2 was lost", time.Since(lost).Round(time.Millisecond))
	if m := moves(); m != 2 {
		t.Errorf("partitions moved to their leaders: %v, want a's two", m)
	}
	// Past the follower's first time away (30 s), when the feed asks it whether it answers again (it does
	// not), and long past the times after which the feed used to try again (3 s) or counts a partition as
	// stalled (5 s): nothing moves again, no record waits, and node 1 serves topic a.
	fromLeader := served(1)
	for start := time.Now(); time.Since(start) < 40*time.Second; {
		produce(1, 5*time.Second)
	}
	if m := moves(); m != 2 {
		t.Errorf("partitions moved to their leaders: %v after 40 s of records, want still a's two", m)
	}
	if got := served(1) - fromLeader; got < 2*2000*10 {
		t.Errorf("node 1 served %v bytes after a's partitions moved to it, want at least a's records' %v", got, 2*2000*10)
	}
	md, err := adm.Metadata(ctx, a)
	if err != nil || len(md.Topics[a].Partitions[0].ISR) != 3 {
		t.Errorf("node 2 left the in-sync replicas (%v, %v): the test lost what it tests", md.Topics[a].Partitions, err)
	}
}

// createInSync creates the topics (createAssigned) and waits until each partition is led by its first replica
// with all its replicas in sync.
func createInSync(t *testing.T, ctx context.Context, cl *kgo.Client, topics map[string][][]int32) {
	t.Helper()
	adm := kadm.NewClient(cl)
	var names []string
	for topic, replicas := range topics {
		createAssigned(t, ctx, cl, topic, replicas)
		names = append(names, topic)
	}
	kafkatest.WaitFor(t, 30*time.Second, "every partition led by its first replica, all its replicas in sync", func() bool {
		md, err := adm.Metadata(ctx, names...)
		if err != nil {
			return false
		}
		for topic, replicas := range topics {
			ps := md.Topics[topic].Partitions
			if len(ps) != len(replicas) {
				return false
			}
			for i, rs := range replicas {
				p := ps[int32(i)]
				if p.Leader != rs[0] || len(p.ISR) != len(rs) {
					return false
				}
			}
		}
		return true
	})
}

// createAssigned creates topic with a partition per entry of replicas, each on those brokers (the first leads).
func createAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, replicas [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, rs := range replicas {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produceEach produces n records to each of the partitions of parts (their topic and partition) in turn, and
// checks that each reaches its topic's stream within bound. A record of padded is 2 KB, another a few bytes.
func produceEach(t *testing.T, ctx context.Context, cl *kgo.Client, streams map[string]*orderedStream, parts []*kgo.Record, padded string, n int, bound time.Duration) {
	t.Helper()
	pad := strings.Repeat("x", 2000)
	for range n {
		for _, p := range parts {
			s := streams[p.Topic]
			r := &kgo.Record{Topic: p.Topic, Partition: p.Partition, Value: fmt.Appendf(nil, "%d.%d", p.Partition, s.sent[p.Partition])}
			if r.Topic == padded {
				r.Value = append(r.Value, pad...)
			}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s/%d: %v", r.Topic, r.Partition, err)
			}
			s.sent[r.Partition]++
			s.expect(t, r, bound)
		}
	}
}

// orderedStream is a stream of a topic whose records the test produced itself, read in the background so
// that the test can bound how long each record takes to arrive.
type orderedStream struct {
	evs  chan sse.Event
	sent map[int32]int64 // records produced per partition
}

func newOrderedStream(t *testing.T, ctx context.Context, url string) *orderedStream {
	t.Helper()
	sc := connect(t, ctx, url)
	s := &orderedStream{evs: make(chan sse.Event, 1024), sent: map[int32]int64{}}
	go func() {
		defer close(s.evs)
		for {
			ev, err := sc.p.Next()
			if err != nil {
				return
			}
			s.evs <- ev
		}
	}()
	return s
}

// expect checks that the next event is r (its value, at its offset in its partition), within bound.
func (s *orderedStream) expect(t *testing.T, r *kgo.Record, bound time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-s.evs:
		if !ok {
			t.Fatalf("stream of %s ended", r.Topic)
		}
		v, err := position.Parse(ev.ID)
		off, _ := v.Offset(r.Partition)
		if err != nil || ev.Data != string(r.Value) || off != r.Offset {
			t.Fatalf("stream of %s: got %.20q with id %q, want %.20q at offset %d of partition %d", r.Topic, ev.Data, ev.ID, r.Value, r.Offset, r.Partition)
		}
	case <-time.After(bound):
		t.Fatalf("stream of %s: record %.20q of partition %d not there within %v", r.Topic, r.Value, r.Partition, bound)
	}
}
