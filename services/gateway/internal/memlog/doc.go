// Package memlog is an in-memory Kafka log for tests of the gateway's seam: topics of partitions holding
// records, transaction commit and abort markers, open transactions that hold the last stable offset back, a
// low watermark that moves (DeleteRecords, retention), partitions that appear, topics that are created late,
// and a cluster that cannot be reached. A Cluster is both the feed's feed.Cluster and the replay pool's
// replay.Log, so a whole gateway (feed, rings, replays, streams) runs against it in milliseconds.
//
// It follows Kafka's rules as a read_committed reader sees them: every record, marker and aborted record
// takes an offset; a fetch returns the committed records below the last stable offset and moves past every
// offset it covered; an offset below the low watermark is out of range.
//
// # What is checked against a real broker
//
// TestMemlogTellsTheTruth builds the same topic in memlog and in a real Kafka, and compares what a reader
// sees through feed.Cluster (feed.NewKafkaCluster) and replay.Log (replay.NewKafkaLog). Its subtests prove:
//
//   - log: the log start, last stable and end offsets, and a replay.Log fetch from every offset, after plain
//     records, a committed and an aborted transaction, two producers committing one after the other, open
//     transactions and DeleteRecords; a fetch below the log start is a *replay.OutOfRangeError; a poll from
//     the start covers the same records, First and Next.
//   - metadata: a topic's partitions and id (non-zero, the same when asked again and after partitions are
//     added); partitions added (AddPartitions; Kafka's CreatePartitions) are listed; a topic that does not
//     exist is absent from Metadata without an error, and listing its offsets fails.
//   - offsets-after: OffsetsAfter answers the first offset stamped at or after the time's millisecond, from
//     the log start, counting open and aborted transactions' records, and markers stamped when their
//     transaction ended; with none, the high watermark (kadm's answer).
//   - list-offsets: an open transaction holds the last stable offset at its first record, records after it
//     or not, until it ends; the log start after DeleteRecords, up to the high watermark; an open
//     transaction whose records DeleteRecords passed holds the last stable offset at the log start.
//   - poll: First and Next of polls from a record, a commit marker, an aborted record and an abort marker
//     (a read from an aborted record starts at the marker after it); LastStable held by an open
//     transaction; LogStart moved by DeleteRecords while the reader waits.
//   - retention: when DeleteRecords passes the offset a reader reads next (before it is assigned, after it
//     is assigned and before its first poll, after a first poll), the next poll starts at the new log start,
//     with First and LogStart past that offset and no error (franz-go resets the offset to the log start).
//   - recreation: a topic deleted is absent from Metadata, and created again under its name has a new id;
//     Reassign at the log start reads the new topic from its first offset.
//
// Not checked, as they are memlog's own controls with no broker to compare on demand: SetDown (ErrDown
// stands for an unreachable cluster), PausePolls, HideOffsets (a partition whose leader is unavailable),
// SetFetchDelay, and how reads split into fetches (memlog covers at most 100 offsets a fetch, Kafka a byte
// budget: the tests compare what polls and fetches cover, not how many there are). Nor are a partition's
// fetch errors (Fetched.Err), which memlog never reports and the feed skips, what a reader polls between a
// topic's deletion and its Reassign, or KeyPartition, which is franz-go's default partitioner itself.
//
// Concurrency: a Cluster is safe for concurrent use.
package memlog
