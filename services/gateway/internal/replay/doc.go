// Package replay reads ranges of a topic's partitions back from Kafka for connections that resume from a
// position the ring no longer holds, or that fell behind it.
//
// A Pool bounds how many replay readers run at once: a connection waits for a slot (its caller keeps it
// alive with heartbeats meanwhile), reads its ranges with a short-lived, seek-based, read_committed reader,
// and gives the slot back. Records of several partitions are delivered in record-timestamp order, each
// partition in offset order.
//
// Concurrency: a Pool is safe for concurrent use. Read calls its callback on the caller's goroutine.
package replay
