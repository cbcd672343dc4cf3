// Command loadtest is ssegate's load tool: it opens many SSE connections (or WebSocket streams) to one or
// more gateways on loopback, produces keyed records to Kafka, and reports throughput, end-to-end latency, loss and
// duplication per connection, and the gateways' CPU time and memory per connection.
//
// Modes (--mode): steady (N connections, records at a rate for a duration; with --waves, waves of clients
// that resume from far back and hang up in the middle of their catch-up come meanwhile), idle (N connections with no
// traffic and no heartbeats; RSS per connection, then a few records every connection must get), storm (all clients disconnect, records keep coming, all
// reconnect within a window with their last ids; each must get exactly what it missed) and slow (a fraction
// of the connections stop reading; the others' latency before and after, and what the gateway did to the
// slow ones), resume (the time to the first frame of resumes from Kafka), floor (no gateway and no Kafka:
// the same clients read loadtest/floor, a bare loop writing every frame to every connection with a write of
// its own, whose CPU time per frame is the floor the gateway's deliveries per CPU-second are judged against)
// and waves (steady's resume waves alone, without readers or producing: what steady --waves-process runs).
// loadtest/README.md has every flag, the commands for each scenario and what the numbers mean.
//
// # Checks
//
// Loss and duplication are found from the position ids alone (see tracker): the producer is not
// transactional, so a complete stream moves its id by exactly one offset in one partition per frame, and
// ends level with the topic's end offsets. Latency is the receive time minus the send time written into
// each value ({"ts":<unix nanos>,"seq":<n>,"pad":"..."}), on one clock, which is one reason the tool
// refuses any gateway URL or broker that is not on loopback (the other: it is a load generator, and must not
// be pointed at someone else's service by mistake).
//
// The exit status is 0 when every check passed, 1 when a check failed (a record lost or duplicated, a
// connection that failed, a storm client not served, an idle connection that missed the probe records) or the run could not be done, 2 for bad flags.
//
// # Concurrency
//
// Each connection is one goroutine reading its socket through a 4 KiB buffer and a pkg/sse Parser; it owns
// its client and tracker while the stream runs. With --proto=h2c or h2 (h2.go) the streams share HTTP/2
// connections, --streams-per-conn to one, and each stream's goroutine reads its response body through the
// same buffer, Parser and checks. With --proto=ws (ws.go) each stream is a WebSocket on a TCP connection of
// its own, read by its goroutine through coder/websocket; every JSON message is mapped to the event an event
// stream would carry (wsEvent) and goes through the same checks (client.begin and client.event). The coordinator (run and the mode functions) reads
// trackers only through their mutex, and a client's other fields only after its group has been joined
// (group.stop). The latency histogram is shared and lock-free (atomic counters). The producers (--producers,
// producers.go) run on a goroutine each, started and joined by startProducer. Steady's wave clients (waves.go) are goroutines of their
// own, outside the readers' clients and counters, each bounded by --wave-cut and all joined before the run
// waits for the readers to catch up; they count frames without parsing them (framecount.go). With
// --waves-process they run in a child process instead (this tool in --mode=waves, under nice; wavesproc.go),
// which steady starts when producing starts and waits for at the same point.
package main
