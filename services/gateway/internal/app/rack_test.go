package app

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
)

// TestClientRack: on a three-broker cluster with one broker per rack and the rack-aware replica selector, a
// gateway with kafka-client-rack set to a follower's rack reads its live feed from that follower (the
// gateway's own accounting of the bytes each broker served says so, and no byte comes from the third broker).
// When that follower stops, the feed goes back to the leader, and the stream gets every record exactly once,
// in order, through it.
func TestClientRack(t *testing.T) {
	c := kafkatest.NewRackCluster(t, "zone-a", "zone-b", "zone-c")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := kafkatest.TopicName(t)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	// The follower to read from: not node 1, whose controller the cluster needs when the follower stops.
	var leader, follower int32
	kafkatest.WaitFor(t, 30*time.Second, "a leader and three in-sync replicas", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		p := md.Topics[topic].Partitions[0]
		leader = p.Leader
		for _, r := range p.ISR {
			if r != leader && r != 1 {
				follower = r
			}
		}
		return len(p.ISR) == 3 && follower != 0
	})
	g := startGatewayOn(t, c.Brokers, []string{topic}, func(cfg *Config) {
		cfg.Kafka.Rack = c.Racks[follower-1]
		cfg.Prefill = 0
	})
	g.waitReady(t)
	sc := connect(t, ctx, g.url+"/streams/"+topic)
	next := 0
	produceAndRead := func(n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(next))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", next, err)
			}
			ev := sc.next(t)
			v, err := position.Parse(ev.ID)
			off, _ := v.Offset(0)
			if ev.Data != strconv.Itoa(next) || err != nil || off != int64(next) {
				t.Fatalf("got %q with id %q, want record %d at offset %d", ev.Data, ev.ID, next, next)
			}
			next++
		}
	}
	produceAndRead(30)
	served := func(node int32) float64 {
		return metricValue(t, g, "ssegate_feed_fetch_bytes_total", fmt.Sprintf(`broker="%d"`, node))
	}
	other := 6 - leader - follower
	if served(follower) == 0 || served(other) != 0 {
		t.Fatalf("bytes served: follower %d (rack %s) %v, leader %d %v, node %d %v; want the follower's rack's replica to serve the feed",
			follower, c.Racks[follower-1], served(follower), leader, served(leader), other, served(other))
	}
	fromLeader := served(leader)
	c.Stop(t, int(follower))
	produceAndRead(30)
	if served(leader) <= fromLeader {
		t.Errorf("the leader served %v bytes before the follower stopped and %v after: the feed did not go back to it", fromLeader, served(leader))
	}
}
