// Package txn writes one ingest source's records to Kafka exactly once: every batch of records goes out in
// a Kafka transaction together with the source's checkpoint (its last event id), a record keyed by the
// source name in a compacted checkpoint topic.
//
// Open builds a transactional client whose transactional id belongs to the source, fences every earlier
// producer with that id (InitProducerId aborts whatever transaction a crashed or deposed replica left open)
// and only then reads the checkpoint back with read_committed. Because the fence comes first, the
// checkpoint read is the id of the last committed batch, never of one that could still commit: the pair
// (records, checkpoint) is all or nothing, so resuming upstream after that id neither loses nor repeats an
// event in what a read_committed consumer sees.
//
// After any error from Add, Commit or Abort the outcome of the open transaction may be unknown; the caller
// closes the Producer and opens a new one, which fences and re-reads the truth from Kafka.
//
// The checkpoint is read through a CheckpointReader: a Store shared by every source of the process, which
// reads the checkpoint topic once and follows it (see Store), or, without one, a full read of the topic at
// every Open (ReadCheckpoint).
//
// Concurrency: a Producer is used by one goroutine (the source's batching loop). The franz-go client runs
// its own goroutines, which Close joins; produce promises only record the first error under a mutex. A Store
// is run by one goroutine and read by any number (see Store).
package txn
