// Package redistest gives tests a real Redis server: the one named by the REDIS_ADDR environment variable
// (host:port), which `make test` (pkg/kafkatest/with-services.sh) starts on loopback.
//
// Without REDIS_ADDR a test that needs Redis is skipped, except under CI=true, where it fails: CI must
// never pass by skipping the tests that matter. Tests share the server, so each should use keys under its
// own Prefix. Every helper registers its clean-up with t.Cleanup.
//
// Concurrency: the helpers may be called from parallel tests; each call makes its own client.
package redistest
