// Package ring holds the gateway's shared, bounded, in-memory log of SSE frames for one topic.
//
// The Kafka reader frames each record once into the exact bytes of its SSE event and publishes the frames
// in batches. Every connection that streams the topic is a cursor (a sequence number) into the ring: it reads
// every frame it has not written yet as a few contiguous byte spans, writes them in one go, and then waits on
// the channel returned by Read, which is closed when the next batch is published. There is no per-connection
// copy of a frame and no per-frame channel send per connection: one close wakes every waiting cursor.
//
// Frames are copied into large chunks, so frames published one after another are adjacent in memory and a
// cursor that is several frames behind writes them as one span. A chunk is released to the garbage collector
// when the last frame in it is evicted and no cursor still holds a span of it.
//
// The ring is bounded by the memory it holds, its capacity: the chunks its frames and keys are in, counted
// whole, its entry buffer and its per-partition index, so that a capacity is a real bound and not only the
// frames' bytes. Publishing evicts the oldest frames to stay within it, and so does SetCapacity when the
// capacity shrinks (a pod-wide budget moves memory between topics). A cursor whose next frame was evicted gets
// ErrBehind from Read and must catch up some other way (or close; the frame ids it already wrote tell its
// client where to resume). Not counted: spans a cursor still holds after their frames were evicted (at most
// one write's worth per connection), and the staging Batch of the writer (the feed publishes at most about
// 1 MiB at a time, so its batches stay that small).
//
// Split divides one budget between rings by their traffic, with a floor and fixed sizes; the feed applies it
// with SetCapacity, so rings sharing a pod's memory never hold more than the budget together.
//
// Concurrency: a Ring is safe for concurrent use. Publish is meant for a single writer (the topic's Kafka
// reader); Read, Start and the accessors may be called from any number of goroutines. Spans returned by Read
// are immutable and stay valid after the lock is released, even if their frames are evicted meanwhile.
package ring
