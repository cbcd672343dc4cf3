package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// watch notices brokers the client cannot reach, when it has a rack (nil without): see replicaWatch.
	watch *replicaWatch
}

// NewKafkaCluster returns the Cluster that kafkaOpts (brokers, TLS, SASL) reach. It does not touch the
// network.
func NewKafkaCluster(kafkaOpts ...kgo.Opt) (Cluster, error) {
	watch := &replicaWatch{}
	opts := append(slices.Clone(kafkaOpts), kgo.WithHooks(watch),
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
	k := &kafkaCluster{cl: cl, adm: kadm.NewClient(cl)}
	if rack, _ := cl.OptValue(kgo.Rack).(string); rack != "" {
		k.watch = watch
	}
	return k, nil
}

func (k *kafkaCluster) Metadata(ctx context.Context, topics []string) (map[string]TopicMeta, error) {
	md, err := k.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
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
	k.Assign(parts)
}

func (k *kafkaCluster) Assign(parts map[string]map[int32]int64) {
	add := map[string]map[int32]kgo.Offset{}
	for topic, ps := range parts {
		add[topic] = map[int32]kgo.Offset{}
		for p, off := range ps {
			if off == AtLogStart {
				add[topic][p] = kgo.NewOffset().AtStart()
			} else {
				add[topic][p] = kgo.NewOffset().At(off)
			}
		}
	}
	k.cl.AddConsumePartitions(add)
}

func (k *kafkaCluster) Poll(ctx context.Context) ([]Fetched, error) {
	var fs kgo.Fetches
	if k.watch != nil {
		fs = k.watch.poll(ctx, k.cl)
	} else {
		fs = k.cl.PollFetches(ctx)
	}
	if fs.IsClientClosed() {
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

func (k *kafkaCluster) Close() { k.cl.Close() }
