package memlog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// metaOf describes what Metadata says of topic and of a topic that does not exist, with the topic's id
// compared to ids (the id each cluster gave it first; the two clusters' ids differ): "same id", or "new id"
// when it changed, which it records.
func metaOf(p *pair, ids map[feed.Cluster][16]byte) func(kc feed.Cluster) string {
	missing := p.topic + ".missing"
	return func(kc feed.Cluster) string {
		md, err := kc.Metadata(p.ctx, []string{p.topic, missing})
		if err != nil {
			return "error " + err.Error()
		}
		if _, ok := md[missing]; ok {
			return "a topic that does not exist is listed"
		}
		m, ok := md[p.topic]
		if !ok {
			return "no topic"
		}
		id := "same id"
		switch old, seen := ids[kc]; {
		case m.ID == [16]byte{}:
			id = "zero id"
		case !seen:
			ids[kc] = m.ID
		case old != m.ID:
			id = "new id"
		}
		return fmt.Sprintf("partitions %v, %s", m.Partitions, id)
	}
}

// truthMetadata proves Metadata: a topic's partitions and a non-zero id, the same when asked again;
// partitions added (memlog's AddPartitions, Kafka's CreatePartitions) are listed, and the id stays; a topic
// that does not exist is absent, without an error, while listing its offsets (ListOffsets, OffsetsAfter)
// fails.
func truthMetadata(t *testing.T) {
	p := newPair(t, 2)
	ids := map[feed.Cluster][16]byte{}
	see := metaOf(p, ids)
	t.Run("partitions and id", func(t *testing.T) {
		p.agree(t, "a topic of 2 partitions", see)
		p.agree(t, "asked again", see)
	})
	t.Run("partitions added", func(t *testing.T) {
		p.mem.AddPartitions(p.topic, 1)
		resp, err := p.adm.CreatePartitions(p.ctx, 1, p.topic)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		p.agree(t, "a partition added", see)
	})
	t.Run("missing topic only", func(t *testing.T) {
		missing := p.topic + ".missing"
		p.agree(t, "a topic that does not exist", func(kc feed.Cluster) string {
			md, err := kc.Metadata(p.ctx, []string{missing})
			_, errList := kc.ListOffsets(p.ctx, feed.LogEnd, missing)
			_, errAfter := kc.OffsetsAfter(p.ctx, missing, time.Now())
			return fmt.Sprintf("metadata %d topics, error %v; list offsets fails %t; offsets after fails %t",
				len(md), err, errList != nil, errAfter != nil)
		})
	})
}

// truthRecreation proves what a topic deleted and created again under its name looks like: Metadata says
// it is gone, then gives it a new id; a reader Reassigned to the log start reads the new topic's records
// from its first offset.
func truthRecreation(t *testing.T) {
	p := newPair(t, 1)
	ids := map[feed.Cluster][16]byte{}
	see := metaOf(p, ids)
	p.agree(t, "the first topic", see)
	p.produce(t, 0, time.Time{}, "old0", "old1", "old2")
	assign := map[string]map[int32]int64{p.topic: {0: feed.AtLogStart}}
	p.mc.Assign(assign)
	p.kc.Assign(assign)
	for _, kc := range []feed.Cluster{p.mc, p.kc} {
		if got := pollUntil(t, p.ctx, kc, 0, 3); fmt.Sprint(got.values) != "[old0 old1 old2]" {
			t.Fatalf("the first topic: %v", got)
		}
	}

	t.Run("deleted", func(t *testing.T) {
		p.mem.DeleteTopic(p.topic)
		resp, err := p.adm.DeleteTopic(p.ctx, p.topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		p.agree(t, "the topic deleted", see)
	})
	t.Run("created again", func(t *testing.T) {
		p.mem.CreateTopic(p.topic, 1)
		kafkatest.CreateTopic(t, p.topic, 1, nil)
		p.agree(t, "the topic created again", see)
	})
	t.Run("reassigned", func(t *testing.T) {
		// A new producer: the first one knows the first topic's partitions.
		p.prod = kafkatest.Client(t, p.prodOpts()...)
		p.produce(t, 0, time.Time{}, "new0", "new1")
		p.mc.Reassign(assign)
		p.kc.Reassign(assign)
		want := pollUntil(t, p.ctx, p.kc, 0, 2)
		if got := pollUntil(t, p.ctx, p.mc, 0, 2); got.String() != want.String() {
			t.Fatalf("reassigned to the log start:\nmemlog %v\nkafka  %v", got, want)
		}
		t.Logf("reassigned to the log start: %v", want)
	})
}
