// Package memlog is an in-memory Kafka log for tests of the gateway's seam: topics of partitions holding
// records, transaction commit and abort markers, open transactions that hold the last stable offset back, a
// low watermark that moves (DeleteRecords, retention), partitions that appear, topics that are created late,
// and a cluster that cannot be reached. A Cluster is both the feed's feed.Cluster and the replay pool's
// replay.Log, so a whole gateway (feed, rings, replays, streams) runs against it in milliseconds.
//
// It follows Kafka's rules as a read_committed reader sees them: every record, marker and aborted record
// takes an offset; a fetch returns the committed records below the last stable offset and moves past every
// offset it covered; an offset below the low watermark is out of range. The gateway's tests against a real
// broker prove the same behaviors, so the fake is checked against the truth.
//
// Concurrency: a Cluster is safe for concurrent use.
package memlog
