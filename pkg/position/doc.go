// Package position encodes and compares a client's position in a Kafka topic:
// the vector of the last offset seen in every partition.
//
// ssegate writes this vector into the id: field of every Server-Sent Events
// frame, and a reconnecting browser sends it back in the Last-Event-ID
// header, so a stream can resume on any pod without server-side state.
//
// # Format
//
// An id is the version prefix "v1:" followed by zero or more entries
// "<partition>-<offset>" separated by ".", partitions strictly ascending:
//
//	v1:0-5812.1-5790.2-5833
//
// The offset is the last offset delivered (or passed over by a filter) in that
// partition. A partition absent from the vector means nothing was seen there,
// so a resume reads it from its start; "v1:" alone is the valid empty vector.
//
// Numbers are plain ASCII decimal without sign, without leading zeros (the
// single digit "0" is allowed) and must fit an int32 (partition) or an int64
// (offset). Because the id comes back from the network, [Parse] is strict:
// there is exactly one accepted spelling of every vector, it is the one
// [Vector.String] produces, and anything else is rejected with a
// [*SyntaxError] that wraps one of the sentinels in errors.go. Parse runs in
// time linear in the input, refuses inputs longer than [MaxLen] before looking
// at them, allocates only the entries slice on success and never panics.
//
// # Compact ids
//
// A topic with many partitions makes v1 ids long. A compact id ("v2:", see
// [Compact], [AppendCompact], [ParseCompact]) names a checkpoint record (a
// position-topic partition and offset, [Ref]) whose vector ([Checkpoint],
// [AppendCheckpoint], [ParseCheckpoint]) someone stored in Kafka, plus the
// few entries where the position moved since. It means nothing until the
// checkpoint is read back and [Compact.Apply] gives the vector; this package
// does not read Kafka. Its parser is as strict as Parse: one spelling per
// id, bounded length ([MaxCompactLen]), never a panic.
//
// # Concurrency
//
// A [Vector] is a small value that refers to a shared, sorted slice of
// entries. Vectors returned by [Parse], [FromEntries], [Vector.Restrict] and
// [Vector.Clone] own fresh storage. Methods with value receivers only read, so
// any number of goroutines may use a Vector and its copies at the same time as
// long as nobody mutates it.
//
// [Vector.Set] and [Vector.UnmarshalText] mutate in place (that is what keeps
// Set allocation-free on the hot path). A copy made by plain assignment shares
// storage with the original, so a Set on one can be seen through the other,
// and an insert can scramble it. A Vector that will be Set must therefore be
// owned by one goroutine and not shared: hand out [Vector.Clone] copies, or the
// encoded id, instead. There is no internal locking.
package position
