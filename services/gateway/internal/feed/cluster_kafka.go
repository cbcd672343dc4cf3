package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrClosed is returned by Cluster.Poll once the cluster is closed.
var ErrClosed = errors.New("feed: cluster closed")

// kafkaCluster is the Cluster of a real Kafka: one franz-go client that reads the assigned partitions
// directly (no consumer group), read_committed, keeping transaction markers so that the feed sees how far
// each partition's log really goes (an aborted tail or a run of commit markers holds no record, yet the feed
// has passed it).
type kafkaCluster struct {
	cl  *kgo.Client
	adm *kadm.Client
	// watch notices followers the client cannot reach, when it has a rack (nil without): see replicaWatch.
	watch *replicaWatch
	// lead, with a rack (nil without), is a client without one, which reads the partitions of the followers
	// lost from their leaders (see follow.go).
	lead *kgo.Client
	// ctx ends at Close, which waits for probes, the requests asking lost followers whether they answer.
	ctx    context.Context
	stop   context.CancelFunc
	probes sync.WaitGroup
}

// NewKafkaCluster returns the Cluster that kafkaOpts (brokers, TLS, SASL) reach. It does not touch the
// network.
func NewKafkaCluster(kafkaOpts ...kgo.Opt) (Cluster, error) {
	opts := append(slices.Clone(kafkaOpts),
		// Metadata answers (partitions, and the partitions offsets are listed for) are at most this old:
		// a partition added a moment ago is known to a resume that names it.
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("feed: kafka client: %w", err)
	}
	rack, _ := cl.OptValue(kgo.Rack).(string)
	if rack == "" {
		return &kafkaCluster{cl: cl, adm: kadm.NewClient(cl)}, nil
	}
	// With a rack: the client again, with the hook that watches its followers (only a client tells its
	// options), and one without a rack.
	cl.Close()
	watch := &replicaWatch{state: newFollowState(rack)}
	cl, err = kgo.NewClient(append(slices.Clone(opts), kgo.WithHooks(watch))...)
	if err != nil {
		return nil, fmt.Errorf("feed: kafka client: %w", err)
	}
	lead, err := kgo.NewClient(append(opts, kgo.Rack(""))...)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("feed: kafka client without a rack: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &kafkaCluster{cl: cl, adm: kadm.NewClient(cl), watch: watch, lead: lead, ctx: ctx, stop: stop}, nil
}

func (k *kafkaCluster) Metadata(ctx context.Context, topics []string) (map[string]TopicMeta, error) {
	md, err := k.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if k.watch != nil {
		k.learn(md)
	}
	out := map[string]TopicMeta{}
	for _, name := range topics {
		td, ok := md.Topics[name]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		case td.Err != nil:
			return nil, fmt.Errorf("metadata of topic %s: %w", name, td.Err)
		case len(td.Partitions) > 0:
			ps := make([]int32, 0, len(td.Partitions))
			for _, pd := range td.Partitions {
				ps = append(ps, pd.Partition)
			}
			slices.Sort(ps)
			out[name] = TopicMeta{ID: td.ID, Partitions: ps}
		}
	}
	return out, nil
}

func (k *kafkaCluster) ListOffsets(ctx context.Context, kind OffsetKind, topics ...string) (map[string]map[int32]int64, error) {
	var los kadm.ListedOffsets
	var err error
	switch kind {
	case LogStart:
		los, err = k.adm.ListStartOffsets(ctx, topics...)
	case LastStable:
		los, err = k.adm.ListCommittedOffsets(ctx, topics...)
	default:
		los, err = k.adm.ListEndOffsets(ctx, topics...)
	}
	if err == nil {
		err = los.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	out := map[string]map[int32]int64{}
	los.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, nil
}

func (k *kafkaCluster) OffsetsAfter(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	los, err := k.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	if err == nil {
		err = los.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s after %v: %w", topic, t, err)
	}
	out := map[int32]int64{}
	los.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

func (k *kafkaCluster) Reassign(parts map[string]map[int32]int64) {
	// franz-go keeps a topic's first id: a recreated topic fails with UNKNOWN_TOPIC_ID until it is purged
	// from the client, which then learns the new id.
	topics := make([]string, 0, len(parts))
	for topic := range parts {
		topics = append(topics, topic)
	}
	k.cl.PurgeTopicsFromClient(topics...)
	if k.lead != nil {
		k.lead.PurgeTopicsFromClient(topics...)
	}
	k.Assign(parts)
}

// Assign reads each partition through the client with a rack, or, when its follower was lost, through the one
// without (see follow.go).
func (k *kafkaCluster) Assign(parts map[string]map[int32]int64) {
	if k.watch == nil {
		k.cl.AddConsumePartitions(kgoOffsets(parts))
		return
	}
	follow, lead := map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for topic, ps := range parts {
		for p, off := range ps {
			to := follow
			if k.watch.state.toLeader(topic, p) {
				to = lead
			}
			if to[topic] == nil {
				to[topic] = map[int32]int64{}
			}
			to[topic][p] = off
		}
	}
	if len(follow) > 0 {
		k.cl.AddConsumePartitions(kgoOffsets(follow))
	}
	if len(lead) > 0 {
		k.lead.AddConsumePartitions(kgoOffsets(lead))
		k.watch.signal() // a poll of the client with a rack alone is under way
	}
}

func (k *kafkaCluster) Poll(ctx context.Context) ([]Fetched, error) {
	var fs kgo.Fetches
	if k.watch != nil {
		var err error
		if fs, err = k.watch.poll(ctx, k.cl, k.lead); err != nil {
			return nil, err
		}
	} else if fs = k.cl.PollFetches(ctx); fs.IsClientClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Fetched
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		f := Fetched{
			Topic: fp.Topic, Partition: fp.Partition, First: -1, Next: -1,
			LastStable: fp.LastStableOffset, LogStart: fp.LogStartOffset, Err: fp.Err,
		}
		if n := len(fp.Records); n > 0 {
			f.First, f.Next = fp.Records[0].Offset, fp.Records[n-1].Offset+1
		}
		recs := fp.Records
		for i, r := range fp.Records {
			if r.Attrs.IsControl() {
				// Copy once, only when there is a marker to drop.
				recs = slices.Clone(fp.Records[:i])
				for _, r := range fp.Records[i:] {
					if !r.Attrs.IsControl() {
						recs = append(recs, r)
					}
				}
				break
			}
		}
		f.Records = recs
		out = append(out, f)
	})
	return out, nil
}

func (k *kafkaCluster) Close() {
	if k.lead != nil {
		k.stop()
		k.probes.Wait()
		k.lead.Close()
	}
	k.cl.Close()
}

// learn tells the follow state the brokers' racks and the partitions' replicas of a metadata answer.
func (k *kafkaCluster) learn(md kadm.Metadata) {
	racks := map[int32]string{}
	for _, b := range md.Brokers {
		if b.Rack != nil {
			racks[b.NodeID] = *b.Rack
		}
	}
	topics := map[string]map[int32]partitionReplicas{}
	for name, td := range md.Topics {
		if td.Err != nil {
			continue
		}
		topics[name] = map[int32]partitionReplicas{}
		for _, pd := range td.Partitions {
			topics[name][pd.Partition] = partitionReplicas{leader: pd.Leader, replicas: pd.Replicas}
		}
	}
	k.watch.state.learn(racks, topics)
}
