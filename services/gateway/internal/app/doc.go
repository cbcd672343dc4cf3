// Package app wires the gateway together: configuration (flags, environment, YAML file), the Kafka feed, the
// HTTP routes (streams, health, readiness, metrics, dashboard), telemetry and graceful shutdown.
//
// Concurrency: New builds everything on the caller's goroutine; Run owns the feed's goroutines and the HTTP
// server's, and returns only after all of them have stopped.
package app
