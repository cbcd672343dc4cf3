package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
)

// Config is the gateway's configuration. Every field can be set by a flag (--name), an environment variable
// (SSEGATE_NAME, with dashes as underscores; KAFKA_BROKERS for the brokers) and a key of the YAML file given
// by --config, in that order of precedence.
type Config struct {
	// Kafka is how to reach the cluster: brokers (required), TLS, SASL.
	Kafka kafkaconn.Config
	// Topics are the topics served, each at /streams/{topic}. Required.
	Topics []string
	// Listen is the HTTP listen address. Default ":8080".
	Listen string
	// RingBytes bounds each topic's in-memory ring of recent frames. Default 64 MiB; at least 64 KiB.
	RingBytes int64
	// Heartbeat is the default idle time after which a stream gets a comment (the heartbeat query parameter
	// overrides it). Default 15s; zero means no heartbeat.
	Heartbeat time.Duration
	// Retry is the reconnection delay sent to clients in the "retry:" line. Default 3s.
	Retry time.Duration
	// WriteTimeout bounds each write to a client; a client that does not take its bytes in time is
	// disconnected (it resumes from its last id). Default 10s.
	WriteTimeout time.Duration
	// Drain is the window over which open streams are closed at shutdown, each at a random moment in it.
	// Default 10s; zero closes them all at once.
	Drain time.Duration
	// MetadataInterval is how often the gateway looks for new topics and partitions. Default 10s.
	MetadataInterval time.Duration
	// Prefill is how many of each partition's latest records are read into the ring at start, before the
	// gateway reports ready, so that clients reconnecting after a deploy are served from memory (the ring's
	// size still bounds what stays). Default 10000; zero means none.
	Prefill int64
	// KeyPartitioner is how the topics' producers place keys: "murmur2" (Kafka's default partitioner; a
	// key= stream reads and lists in its ids only its keys' partitions) or "any" (every partition). Default
	// murmur2.
	KeyPartitioner string
	// ReplayReaders bounds the Kafka readers that serve resumes from positions the ring no longer holds;
	// connections wait for one (with heartbeats). Default 4.
	ReplayReaders int
	// DemoTopic is the topic the dashboard at / shows. Default: the first topic.
	DemoTopic string
	// LogLevel is the lowest level logged: debug, info, warn or error. Default info.
	LogLevel slog.Level
}

// defaults returns the configuration before any flag, variable or file is applied.
func defaults() Config {
	return Config{
		Listen:           ":8080",
		RingBytes:        64 << 20,
		Heartbeat:        15 * time.Second,
		Retry:            3 * time.Second,
		WriteTimeout:     10 * time.Second,
		Drain:            10 * time.Second,
		MetadataInterval: 10 * time.Second,
		Prefill:          10000,
		KeyPartitioner:   "murmur2",
		ReplayReaders:    4,
		LogLevel:         slog.LevelInfo,
	}
}

// setting is one configuration knob and where it can come from.
type setting struct {
	name  string
	envs  []string
	usage string
	value flag.Value
	// group names settings that write the same field (a value and its -file form): a flag for any of them
	// keeps the environment and the file from setting any of them. Empty means the setting's own name.
	group string
}

func settings(c *Config) []setting {
	env := func(name string) []string {
		return []string{"SSEGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
	}
	s := func(name, usage string, v flag.Value) setting {
		return setting{name: name, envs: env(name), usage: usage, value: v}
	}
	return []setting{
		{
			name: "kafka-brokers", envs: []string{"KAFKA_BROKERS", "SSEGATE_KAFKA_BROKERS"},
			usage: "Kafka seed brokers, host:port, comma-separated (required)", value: (*listValue)(&c.Kafka.Brokers),
		},
		s("topics", "topics to serve, comma-separated (required)", (*listValue)(&c.Topics)),
		s("listen", "HTTP listen address", (*stringValue)(&c.Listen)),
		s("ring-bytes", "size of each topic's ring of recent frames (bytes, or with KiB/MiB/GiB)", (*bytesValue)(&c.RingBytes)),
		s("heartbeat", "default idle time before a keep-alive comment; 0 means none", (*durationValue)(&c.Heartbeat)),
		s("retry", "reconnection delay sent to clients in the retry: line", (*durationValue)(&c.Retry)),
		s("write-timeout", "time a client has to take each write before it is disconnected", (*durationValue)(&c.WriteTimeout)),
		s("drain", "window over which streams are closed at shutdown; 0 closes them at once", (*durationValue)(&c.Drain)),
		s("metadata-interval", "how often to look for new topics and partitions", (*durationValue)(&c.MetadataInterval)),
		s("prefill", "latest records per partition read into the ring at start; 0 means none", (*int64Value)(&c.Prefill)),
		s("key-partitioner", "how producers place keys: murmur2 (Kafka's default) or any", (*stringValue)(&c.KeyPartitioner)),
		s("replay-readers", "Kafka readers serving resumes the ring cannot serve, at most at once", (*intValue)(&c.ReplayReaders)),
		s("demo-topic", "topic shown by the dashboard at / (default: the first topic)", (*stringValue)(&c.DemoTopic)),
		s("log-level", "lowest level logged: debug, info, warn, error", (*levelValue)(&c.LogLevel)),
		s("kafka-client-id", "client id sent to Kafka", (*stringValue)(&c.Kafka.ClientID)),
		s("kafka-tls", "connect to Kafka with TLS", (*boolValue)(&c.Kafka.TLS.Enabled)),
		s("kafka-tls-ca-file", "PEM file of CAs to trust (default: system roots); implies TLS", (*stringValue)(&c.Kafka.TLS.CAFile)),
		s("kafka-tls-cert-file", "PEM client certificate for mutual TLS; implies TLS", (*stringValue)(&c.Kafka.TLS.CertFile)),
		s("kafka-tls-key-file", "PEM key of the client certificate", (*stringValue)(&c.Kafka.TLS.KeyFile)),
		s("kafka-tls-server-name", "name to check in the brokers' certificates", (*stringValue)(&c.Kafka.TLS.ServerName)),
		s("kafka-tls-insecure-skip-verify", "do not verify broker certificates (tests only)", (*boolValue)(&c.Kafka.TLS.InsecureSkipVerify)),
		s("kafka-sasl-mechanism", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: none)", (*stringValue)(&c.Kafka.SASL.Mechanism)),
		s("kafka-sasl-username", "SASL username", (*stringValue)(&c.Kafka.SASL.Username)),
		{
			name: "kafka-sasl-password", envs: env("kafka-sasl-password"), group: "kafka-sasl-password",
			usage: "SASL password (prefer the -file form or the environment)", value: (*stringValue)(&c.Kafka.SASL.Password),
		},
		{
			name: "kafka-sasl-password-file", envs: env("kafka-sasl-password-file"), group: "kafka-sasl-password",
			usage: "file holding the SASL password (wins over kafka-sasl-password from the same source)", value: (*fileValue)(&c.Kafka.SASL.Password),
		},
	}
}

// ErrHelp is returned by Load when --help was asked for; the usage has been written.
var ErrHelp = flag.ErrHelp

// Load builds the configuration from args (without the program name), the environment (getenv) and the
// YAML file named by --config, and validates it. Usage and flag errors are written to out.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := defaults()
	ss := settings(&c)
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	configFile := fs.String("config", "", "optional YAML file of settings (keys are the flag names)")
	for _, s := range ss {
		fs.Var(s.value, s.name, s.usage+" (env "+strings.Join(s.envs, " or ")+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (settings are flags: --name=value)", fs.Arg(0))
	}
	groupOf := func(s setting) string {
		if s.group != "" {
			return s.group
		}
		return s.name
	}
	fromFlag := map[string]bool{} // by group
	fs.Visit(func(f *flag.Flag) {
		for _, s := range ss {
			if s.name == f.Name {
				fromFlag[groupOf(s)] = true
			}
		}
	})

	file := map[string]any{}
	if *configFile != "" {
		data, err := os.ReadFile(*configFile)
		if err != nil {
			return c, fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(data, &file); err != nil {
			return c, fmt.Errorf("config file %s: %w", *configFile, err)
		}
		for k := range file {
			if !slices.ContainsFunc(ss, func(s setting) bool { return s.name == k }) {
				return c, fmt.Errorf("config file %s: unknown setting %q", *configFile, k)
			}
		}
	}
	// The environment first, then the file, each skipping groups that a stronger source already set.
	fromEnv := map[string]bool{}
	for _, s := range ss {
		if fromFlag[groupOf(s)] {
			continue
		}
		if env, v := firstEnv(s.envs, getenv); env != "" {
			if err := s.value.Set(v); err != nil {
				return c, fmt.Errorf("setting %s from %s: %w", s.name, env, err)
			}
			fromEnv[groupOf(s)] = true
		}
	}
	for _, s := range ss {
		raw, ok := file[s.name]
		if !ok || fromFlag[groupOf(s)] || fromEnv[groupOf(s)] {
			continue
		}
		v, err := scalar(raw)
		if err == nil {
			err = s.value.Set(v)
		}
		if err != nil {
			return c, fmt.Errorf("setting %s from config file %s: %w", s.name, *configFile, err)
		}
	}
	if c.DemoTopic == "" && len(c.Topics) > 0 {
		c.DemoTopic = c.Topics[0]
	}
	return c, c.Validate()
}

func firstEnv(names []string, getenv func(string) string) (string, string) {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// scalar turns a YAML value into the text a flag would have held; a list becomes a comma list.
func scalar(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := scalar(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("want a single value or a list, got a map")
	default:
		return fmt.Sprint(x), nil
	}
}

// topicName is what Kafka accepts as a topic name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate checks the configuration. Its error names the setting at fault.
func (c Config) Validate() error {
	if err := c.Kafka.Validate(); err != nil {
		return fmt.Errorf("invalid kafka setting (KAFKA_BROKERS or --kafka-*): %w", err)
	}
	if len(c.Topics) == 0 {
		return errors.New("invalid setting topics (SSEGATE_TOPICS): at least one topic is required")
	}
	for _, t := range c.Topics {
		if !topicName.MatchString(t) || t == "." || t == ".." {
			return fmt.Errorf("invalid setting topics (SSEGATE_TOPICS): %q is not a valid Kafka topic name", t)
		}
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("invalid setting listen (SSEGATE_LISTEN): %q: want host:port or :port", c.Listen)
	}
	checks := []struct {
		name string
		bad  bool
		want string
	}{
		{"ring-bytes", c.RingBytes < 64<<10, "at least 64KiB"},
		{"heartbeat", c.Heartbeat < 0, "zero or positive"},
		{"retry", c.Retry < time.Millisecond, "at least 1ms"},
		{"write-timeout", c.WriteTimeout < time.Millisecond, "at least 1ms"},
		{"drain", c.Drain < 0, "zero or positive"},
		{"metadata-interval", c.MetadataInterval < 100*time.Millisecond, "at least 100ms"},
		{"prefill", c.Prefill < 0, "zero or positive"},
		{"key-partitioner", c.KeyPartitioner != "murmur2" && c.KeyPartitioner != "any", "murmur2 or any"},
		{"replay-readers", c.ReplayReaders < 1 || c.ReplayReaders > 1000, "from 1 to 1000"},
		{"demo-topic", !slices.Contains(c.Topics, c.DemoTopic), "one of the served topics"},
	}
	for _, ch := range checks {
		if ch.bad {
			env := "SSEGATE_" + strings.ToUpper(strings.ReplaceAll(ch.name, "-", "_"))
			return fmt.Errorf("invalid setting %s (%s): must be %s", ch.name, env, ch.want)
		}
	}
	return nil
}
