package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/ssegate/ssegate/pkg/position"
)

// Streams of several topics (--topics N, steady): every stream is /streams/{topic},{topic}-2,...,{topic}-N,
// and the run's record seq goes to topic seq mod N. The trackers see one vector: topic j's partition p is
// partition j*topicStride+p of it, so the checks of one topic (each frame moves one partition by one offset,
// the end offsets reached) hold across all of them as they are.

// topicStride separates the topics' partitions in a tracker's vector (--partitions is at most 1000).
const topicStride = 1000

// streamTopics are the topics of the run's streams: --topic, then --topic-2 ... --topic-N.
func streamTopics(topic string, n int) []string {
	ts := []string{topic}
	for i := 2; i <= n; i++ {
		ts = append(ts, fmt.Sprintf("%s-%d", topic, i))
	}
	return ts
}

// topicsOf is the run's topics when its streams have several (--topics), else nil.
func topicsOf(c config) []string {
	if c.Topics <= 1 {
		return nil
	}
	return streamTopics(c.Topic, c.Topics)
}

// topicOfSeq is the topic record seq goes to: "" (the client's default) for one topic.
func topicOfSeq(topics []string, seq int64) string {
	if len(topics) == 0 {
		return ""
	}
	return topics[seq%int64(len(topics))]
}

// topicsVector is a several-topic id as one vector (see topicStride), its compact parts resolved through cps.
func topicsVector(id string, topics []string, cps *checkpoints) (position.Vector, error) {
	tps, err := position.ParseTopics(id)
	if err != nil {
		return position.Vector{}, err
	}
	var es []position.Entry
	for _, tp := range tps {
		j := slices.Index(topics, tp.Topic)
		if j < 0 {
			return position.Vector{}, fmt.Errorf("id %q names topic %s, not one of the stream's", id, tp.Topic)
		}
		v := tp.Pos
		if tp.Compact != "" {
			if v, err = resolveCompact(tp.Compact, cps); err != nil {
				return position.Vector{}, err
			}
		}
		for i := range v.Len() {
			e := v.At(i)
			es = append(es, position.Entry{Partition: int32(j*topicStride) + e.Partition, Offset: e.Offset})
		}
	}
	slices.SortFunc(es, func(a, b position.Entry) int { return int(a.Partition - b.Partition) })
	return position.FromEntries(es)
}

// resolveCompact is a one-topic compact id's position, its checkpoint read through cps.
func resolveCompact(id string, cps *checkpoints) (position.Vector, error) {
	if cps == nil {
		return position.Vector{}, fmt.Errorf("compact id %q without a position topic", id)
	}
	c, err := position.ParseCompact(id)
	if err != nil {
		return position.Vector{}, err
	}
	base, err := cps.base(c.Ref())
	if err != nil {
		return position.Vector{}, err
	}
	return c.Apply(base)
}

// of is k for one of the run's topics alone, on the same clients.
func (k *kafka) of(topic string) *kafka {
	return &kafka{cl: k.cl, adm: k.adm, topic: topic, topics: []string{topic}, avroID: k.avroID}
}

// allEndOffsets returns the end offsets of every topic of the run, as one vector's partitions (topicStride).
func (k *kafka) allEndOffsets(ctx context.Context) ([]int64, error) {
	var all []int64
	for j, topic := range k.topics {
		ends, err := k.of(topic).endOffsets(ctx)
		if err != nil {
			return nil, err
		}
		if j > 0 {
			all = append(all, make([]int64, j*topicStride-len(all))...)
		}
		all = append(all, ends...)
	}
	return all, nil
}
