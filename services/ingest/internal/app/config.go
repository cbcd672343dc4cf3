package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/secret"
	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/ingest/internal/lease"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// Config is the ingest service's configuration. Every field but Sources can be set by a flag (--name), an
// environment variable (SSEGATE_INGEST_NAME with dashes as underscores; KAFKA_BROKERS for the brokers) and
// a key of the YAML file given by --config, in that order of precedence. Sources come from the file's
// "sources" list, or a single source from the flags --url, --topic and friends (never both).
type Config struct {
	// Kafka is how to reach the cluster: brokers (required), TLS, SASL.
	Kafka kafkaconn.Config
	// Sources are the streams followed. At least one is required.
	Sources []source.Spec
	// Listen is the HTTP listen address of /healthz, /readyz, /metrics and /sources. Default ":8081" with
	// an HTTPToken, "127.0.0.1:8081" (loopback only) without one.
	Listen string
	// HTTPToken, when set, is the bearer token that /sources and /metrics require (Authorization: Bearer);
	// /healthz and /readyz stay open for probes. Empty (the default) requires none. It comes from the
	// environment or the config file, never from a flag, which would show it in process lists. At least 16
	// characters.
	HTTPToken Secret
	// HTTPTokenFile is a file holding the token instead, read again when it changes (a rotated Kubernetes
	// Secret is asked of the next request, within a second); it wins over HTTPToken. Empty means HTTPToken.
	HTTPTokenFile string
	// CheckpointTopic is the compacted topic of checkpoints, created if missing. Default
	// "ssegate-ingest-checkpoints".
	CheckpointTopic string
	// DeadLetterTopic receives a record per oversized event. Empty (the default) drops them and counts
	// them in a metric.
	DeadLetterTopic string
	// CreateTopics creates a destination topic (and the dead-letter topic) that does not exist, instead of
	// reporting it missing. Default false. A source may override it (and the two settings below) with the
	// keys of the same names.
	CreateTopics bool
	// CreateTopicsPartitions is the partition count of a created topic. Default 0, the broker's default
	// (num.partitions).
	CreateTopicsPartitions int
	// CreateTopicsReplicationFactor is the replication factor of a created topic. Default 0, the broker's
	// default (default.replication.factor).
	CreateTopicsReplicationFactor int
	// CommitInterval is the longest a transaction stays open. Default 100ms.
	CommitInterval time.Duration
	// CommitEvents commits once a transaction holds this many events. Default 1000.
	CommitEvents int
	// BufferEvents is how many parsed events may wait for Kafka per source before the HTTP body is no
	// longer read. Default 1000.
	BufferEvents int
	// BufferBytes bounds, per source, the bytes of the records between the HTTP body and Kafka: waiting
	// for the producer or in the open transaction. When it is reached the body is no longer read and the
	// open transaction commits early. A record larger than the bound passes alone. Default 4 MiB.
	BufferBytes int64
	// MaxEventBytes caps one event's data. Default 512 KiB, so that a record fits a broker's default 1 MiB message limit.
	MaxEventBytes int64
	// MaxLineBytes caps one line of a stream. Default 1 MiB.
	MaxLineBytes int64
	// IdleTimeout reconnects a stream that sends no byte for this long. Default 60s; zero means never.
	IdleTimeout time.Duration
	// BackoffMin is the first reconnection delay when the server sent no retry: field. Default 1s.
	BackoffMin time.Duration
	// BackoffMax caps the reconnection delay (a server's larger retry: value wins). Default 30s.
	BackoffMax time.Duration
	// TransactionTimeout is the Kafka transaction timeout: how long a crashed replica's open transaction
	// can hold back read_committed consumers. Default 10s.
	TransactionTimeout time.Duration
	// LogLevel is the lowest level logged: debug, info, warn or error. Default info.
	LogLevel slog.Level
	// OTLPEndpoint is the OTLP/HTTP collector spans are exported to, as a base URL (http://collector:4318;
	// spans go to its /v1/traces). Default empty: tracing is off, with no exporter.
	OTLPEndpoint string
	// Redis is where replicas keep their source leases. Zero (no address) means no sharing: the process
	// runs every source of its file.
	Redis RedisConfig
	// LeaseDuration is how long a source's lease lives without renewal; a source whose owner dies moves
	// to another replica within about this long. Default 10s; at least 100ms.
	LeaseDuration time.Duration
	// LeaseKeyPrefix is put before a source name to make its lease key. Default "ssegate:ingest:lease:".
	LeaseKeyPrefix string
}

// Secret is a string that is never printed: its String and GoString hide it.
type Secret string

// String returns "(hidden)", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "(hidden)"
}

// GoString is String, so that %#v does not print the secret either.
func (s Secret) GoString() string { return s.String() }

// RedisConfig is how to reach Redis (shared with the gateway: pkg/settings).
type RedisConfig = settings.Redis

// Defaults of listen: everywhere with a token, loopback only without one.
const (
	listenWithToken    = ":8081"
	listenWithoutToken = "127.0.0.1:8081"
)

func defaults() Config {
	return Config{
		CheckpointTopic:    "ssegate-ingest-checkpoints",
		CommitInterval:     100 * time.Millisecond,
		CommitEvents:       1000,
		BufferEvents:       1000,
		BufferBytes:        source.DefaultBufferBytes,
		MaxEventBytes:      512 << 10,
		MaxLineBytes:       1 << 20,
		IdleTimeout:        60 * time.Second,
		BackoffMin:         time.Second,
		BackoffMax:         30 * time.Second,
		TransactionTimeout: 10 * time.Second,
		LogLevel:           slog.LevelInfo,
		LeaseDuration:      lease.DefaultDuration,
		LeaseKeyPrefix:     lease.DefaultPrefix,
	}
}

// envPrefix starts the environment variable of every ingest setting.
const envPrefix = "SSEGATE_INGEST_"

func envName(name string) string { return settings.EnvName(envPrefix, name) }

func settingsOf(c *Config) []settings.Setting {
	s := func(name, usage string, v flag.Value) settings.Setting {
		return settings.Setting{Name: name, Envs: []string{envName(name)}, Usage: usage, Value: v}
	}
	own := []settings.Setting{
		s("listen", "HTTP listen address of /healthz, /readyz, /metrics and /sources (default :8081 with http-token, else 127.0.0.1:8081)",
			settings.String(&c.Listen)),
		{
			Name: "http-token", Envs: []string{envName("http-token")}, Group: "http-token", NoFlag: true,
			Usage: "bearer token that /sources and /metrics require", Value: settings.String((*string)(&c.HTTPToken)),
		},
		{
			Name: "http-token-file", Envs: []string{envName("http-token-file")}, Group: "http-token",
			Usage: "file holding the bearer token that /sources and /metrics require, read again when it changes", Value: settings.SecretFile(&c.HTTPTokenFile),
		},
		s("checkpoint-topic", "compacted topic of checkpoints (created if missing)", settings.String(&c.CheckpointTopic)),
		s("dead-letter-topic", "topic for oversized events; empty drops them", settings.String(&c.DeadLetterTopic)),
		s("create-topics", "create a missing destination or dead-letter topic (per source too)", settings.Bool(&c.CreateTopics)),
		s("create-topics-partitions", "partitions of a created topic; 0 means the broker's default", settings.Int(&c.CreateTopicsPartitions)),
		s("create-topics-replication-factor", "replication factor of a created topic; 0 means the broker's default",
			settings.Int(&c.CreateTopicsReplicationFactor)),
		s("commit-interval", "longest a Kafka transaction stays open", settings.Duration(&c.CommitInterval)),
		s("commit-events", "commit once a transaction holds this many events", settings.Int(&c.CommitEvents)),
		s("buffer-events", "parsed events waiting for Kafka per source before reading stops", settings.Int(&c.BufferEvents)),
		s("buffer-bytes", "bytes of records per source between the HTTP body and Kafka before reading stops (bytes, or with KiB/MiB)",
			settings.Bytes(&c.BufferBytes)),
		s("max-event-bytes", "largest event data (bytes, or with KiB/MiB)", settings.Bytes(&c.MaxEventBytes)),
		s("max-line-bytes", "longest line of a stream (bytes, or with KiB/MiB)", settings.Bytes(&c.MaxLineBytes)),
		s("idle-timeout", "reconnect a stream silent for this long; 0 means never", settings.Duration(&c.IdleTimeout)),
		s("backoff-min", "first reconnection delay when the server sent no retry:", settings.Duration(&c.BackoffMin)),
		s("backoff-max", "cap of the reconnection delay", settings.Duration(&c.BackoffMax)),
		s("transaction-timeout", "Kafka transaction timeout", settings.Duration(&c.TransactionTimeout)),
		s("log-level", "lowest level logged: debug, info, warn, error", settings.Level(&c.LogLevel)),
		otlpSetting(&c.OTLPEndpoint),
	}
	own = append(own, settings.RedisSettings(&c.Redis, envPrefix,
		"Redis host:port for sharing sources between replicas; empty runs every source here")...)
	own = append(own,
		s("lease-duration", "how long a source lease lives without renewal (with redis-addr)", settings.Duration(&c.LeaseDuration)),
		s("lease-key-prefix", "prefix of the Redis lease keys (with redis-addr)", settings.String(&c.LeaseKeyPrefix)),
	)
	return append(own, settings.Kafka(&c.Kafka, envPrefix)...)
}

// ErrHelp is returned by Load when --help was asked for; the usage has been written.
var ErrHelp = settings.ErrHelp

// Load builds the configuration from args (without the program name), the environment (getenv) and the
// YAML file named by --config, and validates it. Usage and flag errors are written to out.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := defaults()
	var fs flagSource
	file, err := settings.Load(append(settingsOf(&c), fs.settings()...), args, getenv, settings.Options{
		Program:     "ingest",
		ConfigUsage: "YAML file with the sources list and optional settings (keys are the flag names)",
		ExtraKeys:   []string{"sources"},
		Out:         out,
	})
	if err != nil {
		return c, err
	}
	if c.Listen == "" {
		c.Listen = listenWithoutToken
		if c.HTTPToken != "" || c.HTTPTokenFile != "" {
			c.Listen = listenWithToken
		}
	}
	if raw, ok := file["sources"]; ok {
		specs, err := parseSources(raw, c.topicCreation(), getenv)
		if err != nil {
			return c, err
		}
		c.Sources = specs
	}
	if fs.set() {
		if len(c.Sources) > 0 {
			return c, errFlagAndFile
		}
		spec, err := fs.spec(getenv)
		if err != nil {
			return c, err
		}
		spec.CreateTopic = c.topicCreation()
		c.Sources = []source.Spec{spec}
	}
	return c, c.Validate()
}

// topicCreation returns the global create-topics settings, which sources may override.
func (c *Config) topicCreation() source.TopicCreation {
	return source.TopicCreation{
		Enabled:           c.CreateTopics,
		Partitions:        int32(min(max(c.CreateTopicsPartitions, 0), maxPartitions)),               //nolint:gosec // clamped
		ReplicationFactor: int16(min(max(c.CreateTopicsReplicationFactor, 0), maxReplicationFactor)), //nolint:gosec // clamped
	}
}

// maxPartitions and maxReplicationFactor bound the create-topics numbers to what Kafka's CreateTopics
// request can carry.
const (
	maxPartitions        = 1<<31 - 1
	maxReplicationFactor = 1<<15 - 1
)

// topicName is what Kafka accepts as a topic name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// sourceName keeps source names safe as record keys, transactional ids and metric labels.
var sourceName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,200}$`)

func validTopic(t string) bool { return topicName.MatchString(t) && t != "." && t != ".." }

// Validate checks the configuration. Its error names the setting at fault (and the source, for a
// source's setting).
func (c Config) Validate() error {
	if err := c.Kafka.Validate(); err != nil {
		return fmt.Errorf("invalid kafka setting (KAFKA_BROKERS or --kafka-*): %w", err)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("invalid setting listen (%s): %q: want host:port or :port", envName("listen"), c.Listen)
	}
	if err := validateOTLP(c.OTLPEndpoint); err != nil {
		return err
	}
	tok, err := c.httpToken().Get()
	if err != nil {
		return fmt.Errorf("invalid setting http-token-file (%s): %w", envName("http-token-file"), err)
	}
	if err := checkHTTPToken(tok); err != nil {
		return fmt.Errorf("invalid setting http-token (%s or %s): %w", envName("http-token"), envName("http-token-file"), err)
	}
	if c.Redis.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Redis.Addr); err != nil {
			return fmt.Errorf("invalid setting redis-addr (REDIS_ADDR or %s): %q: want host:port", envName("redis-addr"), c.Redis.Addr)
		}
	}
	checks := []struct {
		name string
		bad  bool
		want string
	}{
		{"checkpoint-topic", !validTopic(c.CheckpointTopic), "a valid Kafka topic name"},
		{"dead-letter-topic", c.DeadLetterTopic != "" && !validTopic(c.DeadLetterTopic), "empty or a valid Kafka topic name"},
		{"create-topics-partitions", c.CreateTopicsPartitions < 0 || c.CreateTopicsPartitions > maxPartitions, "zero (the broker's default) or positive"},
		{
			"create-topics-replication-factor", c.CreateTopicsReplicationFactor < 0 || c.CreateTopicsReplicationFactor > maxReplicationFactor,
			"zero (the broker's default) or positive, at most 32767",
		},
		{"commit-interval", c.CommitInterval < time.Millisecond, "at least 1ms"},
		{"commit-events", c.CommitEvents < 1, "at least 1"},
		{"buffer-events", c.BufferEvents < 1, "at least 1"},
		{"buffer-bytes", c.BufferBytes < 1, "at least 1"},
		{"max-event-bytes", c.MaxEventBytes < 1, "at least 1"},
		{"max-line-bytes", c.MaxLineBytes < 1, "at least 1"},
		{"idle-timeout", c.IdleTimeout < 0, "zero or positive"},
		{"backoff-min", c.BackoffMin < time.Millisecond, "at least 1ms"},
		{"backoff-max", c.BackoffMax < c.BackoffMin, "at least backoff-min"},
		{
			"transaction-timeout", c.TransactionTimeout < time.Second || c.TransactionTimeout <= c.CommitInterval,
			"at least 1s and longer than commit-interval",
		},
		{"redis-db", c.Redis.DB < 0, "zero or positive"},
		{"lease-duration", c.LeaseDuration < 100*time.Millisecond, "at least 100ms"},
		{"lease-key-prefix", c.Redis.Addr != "" && c.LeaseKeyPrefix == "", "non-empty with redis-addr"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("invalid setting %s (%s): must be %s", ch.name, envName(ch.name), ch.want)
		}
	}
	if len(c.Sources) == 0 {
		return errors.New("invalid setting sources (config file, or --url and --topic): at least one source is required")
	}
	seen := map[string]bool{}
	for i, s := range c.Sources {
		if seen[s.Name] {
			return fmt.Errorf("invalid source %q (sources[%d]): setting name: the name is used twice", s.Name, i)
		}
		seen[s.Name] = true
	}
	return nil
}

// httpToken is the bearer token of /sources and /metrics: HTTPTokenFile's contents when it is set, else
// HTTPToken. Its zero value means none.
func (c Config) httpToken() secret.Value {
	return secret.Pick(string(c.HTTPToken), "http-token-file", c.HTTPTokenFile)
}

// checkHTTPToken refuses a token that is too short or holds blanks; an empty one means none.
func checkHTTPToken(tok string) error {
	if tok != "" && (len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n")) {
		return errors.New("must be at least 16 characters, without blanks")
	}
	return nil
}
