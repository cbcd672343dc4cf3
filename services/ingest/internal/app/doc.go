// Package app wires the ingest service: configuration (flags, environment, YAML file with the sources
// list), one source.Source per configured source, the source leases (package lease: Redis when
// redis-addr is set, else a local manager that owns everything), the checkpoint topic and the checkpoint
// store that reads it once for every source (txn.Store), and the HTTP endpoints /healthz, /readyz,
// /metrics and /sources (the last two behind a bearer token when http-token is set).
//
// Concurrency: Run owns one goroutine per source, the checkpoint store's goroutine (started once the
// checkpoint topic exists, before the sources; it stops with them and is joined with them) and the HTTP
// server's goroutines. A source's goroutine
// acquires its lease, runs the source under a context that is canceled when the lease is lost (a watcher
// goroutine per held lease, joined before the lease is left), and goes back to acquiring after a loss.
// When Run's context ends it marks the service unready, cancels the sources (each commits or aborts its
// open transaction), releases their leases, joins them, closes the Redis client and shuts the HTTP server
// down before returning. Nothing starts after shutdown begins.
package app
