// Package kafkatest gives tests a real Kafka cluster: the one named by the KAFKA_BROKERS environment
// variable, which `make test` (pkg/kafkatest/with-services.sh) starts on loopback.
//
// Without KAFKA_BROKERS a test that needs Kafka is skipped, except under CI=true, where it fails: CI must
// never pass by skipping the tests that matter. Every helper registers its clean-up with t.Cleanup.
//
// Concurrency: the helpers may be called from parallel tests; each call makes its own clients and topics.
package kafkatest
