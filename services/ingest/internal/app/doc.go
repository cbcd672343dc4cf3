// Package app wires the ingest service: configuration (flags, environment, YAML file with the sources
// list), one source.Source per configured source, the checkpoint topic, and the HTTP endpoints /healthz,
// /readyz, /metrics and /sources.
//
// Concurrency: Run owns one goroutine per source and the HTTP server's goroutines. When its context ends
// it marks the service unready, shuts the HTTP server down, cancels the sources (each commits or aborts
// its open transaction) and joins them before returning. Nothing starts after shutdown begins.
package app
