// Package limit decides whether a new stream may start: per pod (open streams, new streams per second) and
// per identity (a client address, a token subject), counted cluster-wide in Redis or, without it, in this
// process.
//
// A Limiter admits a stream or refuses it with a *Refusal (its Kind, and how long the client should wait).
// The Lease it hands out is given back once, when the stream really ends (stream.Params.OnEnd). Identities
// are counted by a Store: Local counts this process's streams in memory; Redis counts every pod's streams
// in one sorted set per identity, whose entries expire unless their pod refreshes them, so a pod that dies
// (SIGKILL included) frees its slots within the expiry without anyone cleaning up. A Limiter always counts
// locally too, so when Redis cannot answer it can fall back to this pod's own counts (fail-open) or refuse
// (fail-closed).
//
// ClientIP finds the client's address behind trusted proxies (X-Forwarded-For, walked from the right).
//
// Concurrency: a Limiter, its Stores and Leases are safe for concurrent use. Admit may block on Redis for
// at most its timeout; Lease.Release and Store.Release never block (a Redis release is queued and sent by
// the store's own goroutine), so they can run on a writer goroutine of the stream pool. The Redis store
// owns one goroutine (releases, cancels of slots whose acquire got no answer, and refreshes), started by
// NewRedis and joined by Close.
package limit
