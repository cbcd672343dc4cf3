// Package app wires the gateway together: configuration (flags, environment, YAML file), the Kafka feed, the
// HTTP routes of its two ports (the clients' port: streams and the dashboard; the admin port: health,
// readiness, metrics and, when enabled, pprof), the stream limits, telemetry and graceful shutdown.
//
// Both ports answer every error in JSON, net/http's own early ones too (listener.go). A stream request passes
// the CORS policy (cors.go), then the gate (auth.go: the topic's auth mode, the token, its scope narrowing the
// stream's parameters), then the limiter (limits.go) with its client address and the verified token's
// subject, before it starts; its lease is released from stream.Params.OnEnd, when the stream really ends.
//
// Concurrency: New builds everything on the caller's goroutine; Run owns the feed's goroutines and the HTTP
// servers', and returns only after all of them have stopped.
package app
