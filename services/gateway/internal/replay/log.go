package replay

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Log is where a Pool reads records: Kafka (KafkaLog), or an in-memory log in tests (package memlog).
//
// A fetch names an offset and gets back the committed records at or after it and the offset to fetch next.
// The next offset is past every record, transaction marker and aborted record the answer covered, so a
// reader knows it has passed an offset whether or not that offset held a record: a range may end on a
// commit marker, an aborted record or a "passed" mark, and the read still ends at once.
type Log interface {
	// Fetch returns committed records of the partition at or after offset, in offset order, and the offset
	// to fetch next. The answer may hold no record and leave next at offset when nothing at or after offset
	// is stable yet; Fetch may wait a short time (a Kafka fetch's max wait) for that to change. An offset
	// below the partition's low watermark is an *OutOfRangeError.
	Fetch(ctx context.Context, topic string, partition int32, offset int64) (recs []*kgo.Record, next int64, err error)
}

// OutOfRangeError is returned when a read starts below the partition's low watermark: retention or
// DeleteRecords removed records the caller asked for.
type OutOfRangeError struct {
	Partition int32
	Offset    int64
}

// Error says which partition and offset are gone.
func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("replay: partition %d offset %d is below the low watermark", e.Partition, e.Offset)
}

// sizedLog is a Log that can be asked for a short answer: the first fetch of a block asks for firstFetchBytes,
// so that a resume's first records come after one short round trip rather than a block's worth of them.
type sizedLog interface {
	Log
	// FetchMax is Fetch asking for about maxBytes of the partition (a whole record batch at least).
	FetchMax(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) (recs []*kgo.Record, next int64, err error)
}

// batchLog is a sizedLog that can send the first fetches of several partitions of a topic together, one
// request to each partition's leader: a resume of many partitions needs every partition's first records for
// its first frame, and a broker answers one request of twelve partitions sooner than twelve requests of one.
type batchLog interface {
	sizedLog
	// FetchFirsts does the fetches of fs (all of topic) as FetchMax would, each with one attempt: it sets each
	// one's Recs and Next, or its Err (a fetch that failed is done again on its own, with FetchMax's retries).
	FetchFirsts(ctx context.Context, topic string, fs []FirstFetch)
}

// FirstFetch is one partition's fetch in a FetchFirsts: what it asks for, then what it got.
type FirstFetch struct {
	Partition int32
	Offset    int64
	MaxBytes  int32

	Recs []*kgo.Record
	Next int64
	Err  error
}

// firstFetchBytes is what the first fetch of a block asks for: a few hundred small records. A read of several
// partitions asks each for its share of it, at least minFirstFetchBytes: its first record needs the first
// fetch of every partition (records go out in timestamp order), answered and decoded on the same cores, and
// what comes after it is asked for by the fetches that follow.
const (
	firstFetchBytes    = 32 << 10
	minFirstFetchBytes = 4 << 10
)

// firstBytes is what the first fetch of each block of a read of n partitions asks for.
func firstBytes(n int) int32 {
	return int32(max(firstFetchBytes/max(n, 1), minFirstFetchBytes))
}
