// Package publish publishes clients' records into Kafka for the gateway's POST /topics/{topic}/records:
// parsing and bounding what a client sends (record.go), the idempotency keys that make a retried request
// publish one record (store.go, in Redis or in memory), and the producing itself, bounded by the bytes that
// wait for Kafka (publisher.go). Authorization, rates and the HTTP answer are the app's.
package publish
