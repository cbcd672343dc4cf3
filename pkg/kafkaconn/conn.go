package kafkaconn

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ssegate/ssegate/pkg/secret"
)

// SASL mechanisms accepted in SASLConfig.Mechanism (case-insensitive).
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
	MechanismAWSMSKIAM   = "AWS_MSK_IAM"
)

// Config is how to reach a Kafka cluster.
type Config struct {
	// Brokers are the seed brokers, host:port each. Required.
	Brokers []string
	// ClientID is sent to the brokers to name this client in their logs and quotas. Empty means franz-go's
	// default ("kgo").
	ClientID string
	// TLS configures TLS to the brokers. The zero value means plaintext.
	TLS TLSConfig
	// SASL configures SASL authentication. The zero value means none.
	SASL SASLConfig
	// Getenv, when not nil, is where AWS_MSK_IAM reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// Rack is the rack (availability zone) of this client: consumers fetch from a replica in it when the
	// cluster's replica selector picks one (KIP-392, RackAwareReplicaSelector), and from the leader
	// otherwise. Empty means the leader always.
	Rack string
}

// TLSConfig configures TLS to the brokers.
type TLSConfig struct {
	// Enabled turns TLS on. It is implied by any of the other fields being set.
	Enabled bool
	// CAFile is a PEM bundle of the CAs to trust. Empty means the system roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for mutual TLS. Empty means none.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the brokers' certificates. Empty means the broker's host.
	ServerName string
	// InsecureSkipVerify turns off certificate verification. For tests only.
	InsecureSkipVerify bool
}

// SASLConfig configures SASL authentication.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM (credentials from the
	// environment, see awsSource). Empty means no SASL.
	Mechanism string
	// Username and Password are the credentials of PLAIN and SCRAM. Password is never logged.
	Username, Password string
	// PasswordFile is a file holding the password, read again when it changes (a rotated Kubernetes Secret
	// is used by the next connection); it wins over Password. Empty means Password.
	PasswordFile string
	// OAuth is where OAUTHBEARER gets its tokens.
	OAuth OAuthConfig
	// AllowPlaintext lets PLAIN run without TLS, sending the password in clear: for a network where that is
	// accepted (a local test broker's SASL_PLAINTEXT listener). False (the default) means Validate refuses
	// PLAIN without TLS. SCRAM never sends the password, and is allowed without TLS either way. OAUTHBEARER
	// sends its bearer token as it is, so it needs TLS, or this allowance, as PLAIN does; the allowance also
	// lets its token endpoint be http, which sends the client secret in clear.
	AllowPlaintext bool
}

func (c Config) getenv() func(string) string {
	if c.Getenv != nil {
		return c.Getenv
	}
	return os.Getenv
}

func (t TLSConfig) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" ||
		t.InsecureSkipVerify
}

// Validate checks the settings without touching the network or the file system. Its errors wrap the
// package's sentinels and name the setting at fault.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("brokers: %w", ErrNoBrokers)
	}
	for _, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("brokers: %q: %w", b, ErrBadBroker)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("tls cert file and key file: %w", ErrTLSPair)
	}
	switch strings.ToUpper(c.SASL.Mechanism) {
	case "":
		return nil
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
	case MechanismOAuthBearer:
		if !c.TLS.on() && !c.SASL.AllowPlaintext {
			return fmt.Errorf("sasl mechanism OAUTHBEARER without TLS would send the bearer token in clear "+
				"(turn on kafka-tls, or set kafka-sasl-allow-plaintext=true to accept that): %w", ErrOAuthWithoutTLS)
		}
		return c.SASL.OAuth.validate(c.SASL.AllowPlaintext)
	case MechanismAWSMSKIAM:
		if !c.TLS.on() {
			return fmt.Errorf("sasl mechanism AWS_MSK_IAM without TLS (MSK's IAM listener, port 9098, takes TLS only; turn on kafka-tls): %w", ErrAWSWithoutTLS)
		}
		return nil
	default:
		return fmt.Errorf("sasl mechanism %q (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM): %w", c.SASL.Mechanism, ErrMechanism)
	}
	if c.SASL.Username == "" {
		return fmt.Errorf("sasl username: %w", ErrNoUsername)
	}
	if strings.EqualFold(c.SASL.Mechanism, MechanismPlain) && !c.TLS.on() && !c.SASL.AllowPlaintext {
		return fmt.Errorf("sasl mechanism PLAIN without TLS would send the password in clear "+
			"(turn on kafka-tls, or set kafka-sasl-allow-plaintext=true to accept that): %w", ErrPlainWithoutTLS)
	}
	return nil
}

// Opts validates c, reads its TLS and secret files once to check them, and returns the franz-go options that
// connect with it. The files are read again, when they change, by every new connection (see secret.File).
func (c Config) Opts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.Rack != "" {
		opts = append(opts, kgo.Rack(c.Rack))
	}
	if c.TLS.on() {
		d, err := c.TLS.NewDialer()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer(d.DialContext))
	}
	mech, err := c.SASL.mechanism(c.TLS.CAFile, c.getenv())
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// mechanism returns the SASL mechanism of s, nil for none; caFile is the brokers' CA file, trusted by the
// OAuth token endpoint too.
func (s SASLConfig) mechanism(caFile string, getenv func(string) string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(s.Mechanism)
	switch mech {
	case "":
		return nil, nil
	case MechanismOAuthBearer:
		src, err := newTokenSource(s.OAuth, caFile)
		if err != nil {
			return nil, err
		}
		return src.mechanism(), nil
	case MechanismAWSMSKIAM:
		src, err := newAWSSource(getenv)
		if err != nil {
			return nil, err
		}
		return src.mechanism(), nil
	}
	pw := secret.Pick(s.Password, "kafka-sasl-password-file", s.PasswordFile)
	if _, err := pw.Get(); err != nil {
		return nil, err
	}
	user := s.Username
	switch mech {
	case MechanismPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := pw.Get()
			return plain.Auth{User: user, Pass: p}, err
		}), nil
	case MechanismScramSHA256:
		return scram.Sha256(func(context.Context) (scram.Auth, error) {
			p, err := pw.Get()
			return scram.Auth{User: user, Pass: p}, err
		}), nil
	default: // SCRAM-SHA-512, the last Validate accepts
		return scram.Sha512(func(context.Context) (scram.Auth, error) {
			p, err := pw.Get()
			return scram.Auth{User: user, Pass: p}, err
		}), nil
	}
}

// Logger adapts l to franz-go's logger interface, logging at level and above.
func Logger(l *slog.Logger, level kgo.LogLevel) kgo.Logger { return kgoLogger{l: l, level: level} }

type kgoLogger struct {
	l     *slog.Logger
	level kgo.LogLevel
}

func (k kgoLogger) Level() kgo.LogLevel { return k.level }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var sl slog.Level
	switch level {
	case kgo.LogLevelError:
		sl = slog.LevelError
	case kgo.LogLevelWarn:
		sl = slog.LevelWarn
	case kgo.LogLevelInfo:
		sl = slog.LevelInfo
	default:
		sl = slog.LevelDebug
	}
	k.l.Log(context.Background(), sl, msg, keyvals...)
}

// hidden stands for a secret in String: "(hidden)" when one is set, empty when none.
func hidden(s string) string {
	if s == "" {
		return ""
	}
	return "(hidden)"
}

// String describes s with its password hidden, so that a Config printed with %v or %+v (a log line, an
// error) does not show it.
func (s SASLConfig) String() string {
	type fields SASLConfig // the same fields without the methods: printed one by one
	f := fields(s)
	f.Password = hidden(f.Password)
	return fmt.Sprintf("%+v", f)
}

// GoString is String, for %#v.
func (s SASLConfig) GoString() string { return "kafkaconn.SASLConfig" + s.String() }

// String describes o with its client secret hidden.
func (o OAuthConfig) String() string {
	type fields OAuthConfig
	f := fields(o)
	f.ClientSecret = hidden(f.ClientSecret)
	return fmt.Sprintf("%+v", f)
}

// GoString is String, for %#v.
func (o OAuthConfig) GoString() string { return "kafkaconn.OAuthConfig" + o.String() }
