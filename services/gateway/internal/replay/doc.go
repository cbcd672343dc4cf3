// Package replay reads ranges of a topic's partitions back from Kafka for connections that resume from a
// position the ring no longer holds, or that fell behind it.
//
// A Pool reads in blocks of Config.BlockSize offsets per partition, shared by every connection: a block read
// recently comes from an LRU cache bounded by bytes (Config.CacheBytes, counting the blocks being read too),
// and a block being read is read from as it goes by every connection that needs it. A block keeps copies of
// its records in memory of its own, never the records a fetch decoded, which would keep the fetch's whole
// answer. A block read publishes its records as each fetch decodes them, from the offset its first reader
// needs (its first fetch asks for little, so that the first records come after one short round trip), and
// reads the part of the block before that offset once those first records are out, so that the cached block
// serves connections resuming a little earlier too. At most Config.Readers block reads run at once. Records
// of several partitions are delivered in record-timestamp order, each partition in offset order, so the first
// record needs the first fetch of every partition: those are started together.
//
// KafkaLog fetches with explicit-offset FetchRequests (read_committed) through a few long-lived clients,
// keeping no consumer state.
//
// Concurrency: a Pool is safe for concurrent use. Read calls its callback on the caller's goroutine; the
// record it gets is shared with other connections and must not be changed or kept. A block read runs on a
// goroutine of its own, ended by the context of the read that started it. The cache's lock is a leaf.
package replay
