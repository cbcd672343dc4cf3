// Package lease decides which ingest replica runs a source: each source is owned by one replica at a time
// through a lease on its name.
//
// A Manager hands out leases. Acquire blocks until the caller holds the name (or its context ends); the
// returned Lease's Lost channel closes when the holder must stop using it, and Release gives it back. Two
// implementations exist:
//
//   - Local (lease_local.go): every name is always free, Acquire returns at once and the lease is never
//     lost. It is what a process without Redis uses: it owns all its sources.
//   - Redis (lease_redis.go): the lease is a key prefix+name whose value is the owner's name and a random
//     token. Acquire tries SET key value NX PX duration, and retries every duration/5 with +-25% jitter while
//     another replica holds the key. The holder renews it every duration/3 with a compare-and-PEXPIRE script
//     (only while the value is still its own) and Release deletes it with a compare-and-DEL script, so a
//     replica never extends or deletes a lease it no longer holds.
//
// Losing a lease: the holder closes Lost as soon as a renewal finds the key gone or owned by someone else,
// and also when duration*2/3 has passed since the sending of the last successful renewal (or of the SET
// that acquired it) without a newer one succeeding: Redis started the key's expiry no earlier than that
// sending, so Lost closes at least duration/3 before another replica can take the key. Each renewal's
// context carries that deadline, so a Redis that hangs cannot delay Lost. The margin is a matter of clocks
// and scheduling, not a proof: a process paused for longer than duration/3 (GC, SIGSTOP, an overloaded
// host) can still act after its lease went to another replica. Callers must therefore keep a second
// fence; ingest's is the per-source Kafka transactional id (see docs/ingest.md).
//
// Concurrency: a Manager may be used from any goroutine, and Acquire may be called concurrently for
// different names. Each Redis Lease owns one renewal goroutine, started by Acquire and stopped and joined
// by Release or Abandon; one of the two must be called exactly once per Lease (later calls do nothing).
// Lost may be read from any goroutine.
package lease
