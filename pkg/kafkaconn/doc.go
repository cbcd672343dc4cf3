// Package kafkaconn turns the Kafka connection settings that both ssegate services share (brokers, TLS,
// SASL PLAIN and SCRAM) into franz-go client options. PLAIN, which sends the password as it is, is refused
// without TLS unless SASLConfig.AllowPlaintext says otherwise.
//
// It reads files (CA bundle, client certificate) when Opts is called and never reads the environment: the
// services fill a Config from their own flags, environment and configuration file.
//
// Concurrency: a Config is a plain value; Validate and Opts may be called from any goroutine.
package kafkaconn
