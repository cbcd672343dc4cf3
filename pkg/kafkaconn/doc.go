// Package kafkaconn turns the Kafka connection settings that both ssegate services share (brokers, TLS,
// SASL PLAIN, SCRAM, OAUTHBEARER and AWS_MSK_IAM) into franz-go client options. PLAIN and OAUTHBEARER,
// which send the password or the bearer token as it is, are refused without TLS unless
// SASLConfig.AllowPlaintext says otherwise.
//
// Files: the CA bundle, the client certificate and key, the SASL password file and the OAuth client secret
// file are read by Opts, to check them, and again by every new connection when they have changed (see
// package secret), so that a rotated Kubernetes Secret is used without a restart. Connections already open
// keep what they were made with.
//
// Credentials from a provider (OAUTHBEARER tokens, temporary AWS credentials) are cached and refreshed
// ahead of their expiry on a goroutine that lives for one request; a SASL handshake takes the cached
// credential without waiting while it is valid, so a slow or hanging provider never holds connections up
// (see refresher). Failed refreshes back off with jitter.
//
// The package reads the environment only for AWS_MSK_IAM, whose credentials AWS's own variables name
// (Config.Getenv); the services fill a Config from their own flags, environment and configuration file.
//
// Concurrency: a Config is a plain value; Validate and Opts may be called from any goroutine, and the options
// Opts returns may be shared by several clients.
package kafkaconn
