// Package otlptest is an OTLP/HTTP trace receiver for tests, like net/http/httptest: a server that accepts
// what an OTLP exporter posts to /v1/traces (protobuf, plain or gzip) and keeps the spans for the test to
// look at.
//
// A Receiver is safe for concurrent use: the exporter posts from its own goroutine while the test reads.
package otlptest
