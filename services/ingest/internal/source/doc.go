// Package source follows one external Server-Sent Events stream and writes its events to Kafka exactly
// once, through package txn.
//
// A Source loops: check that the topics it writes to exist (creating them when its TopicCreation allows;
// otherwise it reports StateTopicMissing and checks again with a growing backoff, without connecting), open
// a transactional producer (fencing earlier ones, reading the committed checkpoint),
// then connect with Last-Event-ID set to the checkpoint's id (on the first request too, unlike a browser),
// parse the body with pkg/sse, filter by event type, map each event to a record (key rule, format) and
// commit the records with the stream's last event id every CommitInterval or CommitEvents. Every failure
// reconnects after a capped exponential backoff with jitter that honors the server's retry: field and
// Retry-After; a 204 stops the source. A Kafka failure closes the producer and starts over from the
// checkpoint, so events of a transaction that did not commit are fetched again from the server.
//
// Redirects are followed as the Spec's RedirectPolicy says (redirect.go): by default only within the origin
// (scheme, host, port) of the source's URL; never from https to http. Once a connection's redirects leave
// that origin, its requests carry none of the source's headers and credentials. A refused redirect ends
// the connection with ReasonRedirect (a *RedirectError), retried like a bad status.
//
// Concurrency: Run is called once per Source and owns two goroutines per connection: itself, which
// batches and commits, and a reader that parses the body into a buffer bounded in events and bytes (so a
// slow Kafka stops the reading of the body). The reader stops when the connection's context is canceled
// or the body ends, and is joined before the connection is left. Status, Stats and Name may be called
// from any goroutine.
package source
