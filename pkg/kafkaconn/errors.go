package kafkaconn

import "errors"

// Sentinel errors returned by Config.Validate, wrapped with the offending setting.
var (
	ErrNoBrokers  = errors.New("kafkaconn: no brokers")
	ErrBadBroker  = errors.New("kafkaconn: broker address must be host:port")
	ErrMechanism  = errors.New("kafkaconn: unknown SASL mechanism")
	ErrNoUsername = errors.New("kafkaconn: SASL needs a username")
	ErrTLSPair    = errors.New("kafkaconn: TLS client certificate and key go together")
	// ErrPlainWithoutTLS is SASL PLAIN over a plaintext connection without SASLConfig.AllowPlaintext.
	ErrPlainWithoutTLS = errors.New("kafkaconn: SASL PLAIN without TLS")
	// ErrOAuthWithoutTLS is SASL OAUTHBEARER over a plaintext connection without SASLConfig.AllowPlaintext.
	ErrOAuthWithoutTLS = errors.New("kafkaconn: SASL OAUTHBEARER without TLS")
	// ErrOAuthConfig is an OAUTHBEARER configuration without a usable token endpoint or client credentials.
	ErrOAuthConfig = errors.New("kafkaconn: OAUTHBEARER needs a token endpoint, a client id and a client secret")
	// ErrOAuthToken is a token endpoint that refused the client or gave no token.
	ErrOAuthToken = errors.New("kafkaconn: no OAuth token")
	// ErrAWSCredentials is AWS_MSK_IAM without credentials: none named by the environment, or none given.
	ErrAWSCredentials = errors.New("kafkaconn: no AWS credentials")
	// ErrAWSWithoutTLS is AWS_MSK_IAM without TLS: MSK's IAM listener takes TLS only.
	ErrAWSWithoutTLS = errors.New("kafkaconn: AWS_MSK_IAM needs TLS")
)
