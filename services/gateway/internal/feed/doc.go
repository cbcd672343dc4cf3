// Package feed reads every partition of the gateway's topics from Kafka and publishes each record, framed
// once as an SSE event, into its topic's ring.
//
// There is no consumer group: partitions are assigned directly (franz-go ConsumePartitions), read_committed,
// and nothing is committed. A topic that exists when the feed starts is read from its last stable offset
// minus Config.Prefill (never before its log start), so that the ring holds recent history at once;
// a topic created later, and a partition added to a topic later, are read from their start, so that no record
// in them is missed. A metadata refresh every Config.MetadataInterval finds such topics and partitions.
//
// A frame's data is the record's value in the topic's Format (Config.Formats): by default values that are not
// safe text are base64-encoded after Base64Prefix, so that every value reaches a browser with its exact
// bytes; a schema format (Avro, Protobuf, JSON Schema) decodes values to JSON once, as they enter the ring. AppendFrame depends only on the id, the record and the format, so the stream package
// frames records it reads back from Kafka into the same bytes the feed put into the ring (for a schema
// format, once the schema's lookup has the same outcome). The fetch loop never waits for a schema lookup once
// the feed is ready: a value whose schema is not known yet is framed undecodable (schema.Pending) while the
// lookup runs in the background (Feed.awaitSchemas is the one wait, before the feed is first ready).
//
// Each topic keeps the position vector of the frames it has published (see package position): the vector
// after a frame is that frame's id, and the vector after the newest frame is what a new connection starts
// with. A partition enters the vector when it is assigned with records before the start offset (at offset
// start-1, "everything before this was passed") or when its first record arrives.
//
// Each topic has a ring of its own. Its capacity is Config.RingBytes (or the topic's TopicRingBytes), or, with a
// Config.RingBudget, the topic's share of one budget for the pod: overrides fixed, the other topics by their
// smoothed traffic, none below Config.RingFloor, never more than the budget in all (ring.Split).
//
// Retention can pass offsets the feed has not read yet (its fetches were held up); franz-go then continues at
// the log start, and the feed publishes a retention resync frame in place of the lost offsets (Topic.gap), so
// that no live stream skips them silently.
//
// Concurrency: Run owns two goroutines, the fetch loop and the metadata refresher, and a third with a ring
// budget, the balancer, the only one that changes the rings' capacities. The fetch loop publishes the frames;
// the refresher publishes too, under the same Topic.mu: a new head id with no frames when partitions are
// added (Publish of an empty batch), and Touch when a topic is created again; both trim and set the rings'
// per-partition lows. A Topic's mutex guards its partition table and position vector; it is taken by the
// fetch loop once per fetched topic and by the refresher, and is held while publishing into the ring (lock
// order: Topic.mu before the ring's own lock). Ready, Topic, Lag and Watermarks may be called from any
// goroutine. Ready, Lag and Progress take no lock: they read a view of each topic's partitions that the
// refresher replaces (never changes) under Topic.mu, and the partitions' atomic counters, so a probe or a
// scrape never waits for the fetch loop framing a poll. Readiness latches: once ready, the feed stays ready.
package feed
