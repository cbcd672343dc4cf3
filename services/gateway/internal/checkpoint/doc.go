// Package checkpoint stores and reads back the checkpoints that compact (v2) position ids refer to.
//
// A gateway with compact ids on writes its feed's position vector of a topic, now and then, as a record of
// the position topic (Writer); a frame's id then names the newest checkpoint Kafka has acknowledged and the
// few partitions that moved since. Any gateway resolves such an id (Resolver): it reads the checkpoint by
// explicit offset, checks that it is a checkpoint of the same topic (name and Kafka topic id), and applies
// the id's entries to it. Kafka records are immutable, so every pod that reads the record gets the same
// vector: no coordination between pods.
//
// # Concurrency
//
// A Writer and a Resolver are safe for concurrent use. A Writer's done callbacks run on the Kafka client's
// producer goroutine, one at a time, and must not block. Resolver keeps resolved checkpoints in a bounded LRU
// and reads a checkpoint that several callers want at once only once.
package checkpoint
