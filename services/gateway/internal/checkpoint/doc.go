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
// producer goroutine, one at a time, and must not block. A Resolver starts no goroutine: a read runs on the
// goroutine of one of the callers that want it (its reader), under that caller's context, and the others
// wait for its answer; when the reader's context ends first, one of them reads again. At most WithReaders
// reads run at once; a reader beyond them waits for a slot with its context. Resolved checkpoints stay in a
// bounded LRU, and refs whose read was ErrInvalid or ErrGone in another, for a short time (WithFailures), so
// that a storm of one bad id costs one read. Without a position topic a Resolver reads nothing. Resolver.mu
// guards the reads in flight; it is a leaf (the LRUs' own locks are taken under it, never the reverse).
package checkpoint
