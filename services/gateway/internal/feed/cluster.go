package feed

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is what a Feed reads: Kafka through franz-go (NewKafkaCluster), or an in-memory log in tests
// (package memlog). It is the feed's seam: everything the feed knows of partitions, watermarks and records
// comes through it.
type Cluster interface {
	// Metadata returns each of topics that exists. A topic that does not exist is absent from the map; an
	// error means the cluster could not say.
	Metadata(ctx context.Context, topics []string) (map[string]TopicMeta, error)
	// ListOffsets returns, per topic and partition, the offsets of the given kind.
	ListOffsets(ctx context.Context, kind OffsetKind, topics ...string) (map[string]map[int32]int64, error)
	// OffsetsAfter returns, per partition of topic, the offset of the first record with a timestamp at or
	// after t, or the partition's high watermark (the offset the next record will get) when there is none
	// yet, as kadm's ListOffsetsAfterMilli answers.
	OffsetsAfter(ctx context.Context, topic string, t time.Time) (map[int32]int64, error)
	// Assign starts reading partitions, each from an offset (AtLogStart: from the partition's start).
	Assign(parts map[string]map[int32]int64)
	// Reassign stops reading partitions and starts reading them again from the given offsets (a topic that
	// was deleted and created again).
	Reassign(parts map[string]map[int32]int64)
	// Poll waits for records of the assigned partitions and returns them, read_committed. It returns
	// ErrClosed once the cluster is closed, or ctx's error.
	Poll(ctx context.Context) ([]Fetched, error)
	// Close stops reading.
	Close()
}

// TopicMeta is what Metadata says of a topic.
type TopicMeta struct {
	// ID is the topic's id, which changes when the topic is deleted and created again.
	ID [16]byte
	// Partitions are the topic's partitions, ascending.
	Partitions []int32
}

// OffsetKind names the offsets ListOffsets returns.
type OffsetKind int

// Offset kinds.
const (
	// LogStart is the low watermark: the oldest offset still stored.
	LogStart OffsetKind = iota
	// LastStable is the last stable offset: where a read_committed reader stops (the start of the oldest
	// open transaction, else the high watermark).
	LastStable
	// LogEnd is the high watermark: the offset the next record will get.
	LogEnd
)

// AtLogStart is the offset Assign takes for "from the partition's start".
const AtLogStart int64 = -2

// Fetched is what one poll brought of one partition.
type Fetched struct {
	Topic     string
	Partition int32
	// Records are the committed records, in offset order, without transaction markers.
	Records []*kgo.Record
	// First is the first offset the fetch covered, record or transaction marker; -1 when it covered none.
	First int64
	// Next is the offset after the last record or transaction marker the fetch covered; -1 when it covered
	// none. It can be past the last record's offset + 1, when markers follow it.
	Next int64
	// LastStable is the partition's last stable offset when the broker answered; -1 when unknown.
	LastStable int64
	// LogStart is the partition's low watermark when the broker answered; -1 when unknown.
	LogStart int64
	// Err is a fetch error of this partition.
	Err error
}
