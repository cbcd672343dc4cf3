package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"regexp"
	"runtime"
	"slices"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// Config is the gateway's configuration. Every field can be set by a flag (--name), an environment variable
// (SSEGATE_NAME, with dashes as underscores; KAFKA_BROKERS for the brokers) and a key of the YAML file given
// by --config, in that order of precedence.
type Config struct {
	// Kafka is how to reach the cluster: brokers (required), TLS, SASL.
	Kafka kafkaconn.Config
	// Topics are the topics served, each at /streams/{topic}. Required.
	Topics []string
	// Listen is the HTTP listen address of the clients' port: streams and the dashboard. Default ":8080". A
	// socket passed by the service manager (LISTEN_FDS, see socket.go) replaces it.
	Listen string
	// ListenReusePort opens the clients' port with SO_REUSEPORT, so that a new gateway on the same host listens
	// beside the running one and takes every new connection once it is ready, and the old one can stop
	// without a connection ever being refused (socket.go). Linux only. Default false.
	ListenReusePort bool
	// AsyncAPIHost is the host[:port] that /asyncapi.json and `gateway asyncapi` name as the servers' address.
	// Default empty: the request's Host header (the command line: localhost and the listen port).
	AsyncAPIHost string
	// serviceSockets is how many sockets the service manager passed (LISTEN_FDS for this process); Load sets it.
	serviceSockets int
	// TLS is how the clients' port speaks TLS and HTTP/2 (tls.go).
	TLS TLSConfig
	// Publish is who may publish into which topic, and its bounds (config_publish.go).
	Publish PublishConfig
	// WSMaxMessageBytes bounds a message a WebSocket client sends (acknowledgements, its first message); a
	// larger one closes the connection (1009). Default 64KiB.
	WSMaxMessageBytes int64
	// WSCompression offers permessage-deflate on WebSockets. Default false: it costs memory and CPU per
	// connection, and the messages are small.
	WSCompression bool
	// AdminListen is the HTTP listen address of the admin port: /metrics, /healthz, /readyz and, with
	// Pprof, /debug/pprof/. Default ":9090".
	AdminListen string
	// Pprof serves Go's profiles at /debug/pprof/ on the admin port. Default false.
	Pprof bool
	// Limits are the limits on streams and where they are counted.
	Limits LimitConfig
	// RingBytes bounds the memory each topic's in-memory ring of recent frames holds (frames, keys and
	// their entries), when RingBudget is zero. Default 64 MiB; at least 64 KiB. Load refuses it given
	// together with a RingBudget.
	RingBytes int64
	// RingBudget bounds the memory all the topics' rings hold together: the topics in TopicRingBytes get
	// their own size out of it, the others share the rest by their traffic, none below RingFloor. Default
	// zero: no budget, each ring is RingBytes.
	RingBudget int64
	// RingFloor is the smallest ring of a topic sharing RingBudget. Default 1 MiB; at least 64 KiB. Load
	// refuses it given without a RingBudget.
	RingFloor int64
	// TopicRingBytes maps served topics to their own ring size (a byte size such as 256MiB): instead of
	// RingBytes without a budget, a fixed share of RingBudget with one. Default none.
	TopicRingBytes map[string]string
	// TopicSnapshotIndex maps served topics to the memory of their key index (a byte size such as 64MiB):
	// the latest record of every key, from which from=snapshot streams are served without reading the topic.
	// Such a topic is read from its start at startup. Default none.
	TopicSnapshotIndex map[string]string
	// Heartbeat is the default idle time after which a stream gets a comment (the heartbeat query parameter
	// overrides it). Default 15s; zero means no heartbeat.
	Heartbeat time.Duration
	// Retry is the reconnection delay sent to clients in the "retry:" line. Default 3s.
	Retry time.Duration
	// WriteTimeout bounds each write to a client; a client that does not take its bytes in time is
	// disconnected (it resumes from its last id). Default 10s.
	WriteTimeout time.Duration
	// Writers is the number of writer goroutines that serve idle HTTP/1.1 streams after their connections
	// are taken over from net/http; 0 keeps a goroutine per stream. Default: the number of CPUs Go uses.
	Writers int
	// PendingWriteBytes bounds, pod-wide, the bytes of writes to clients not finished yet (clients that stop
	// reading); a write past it ends its stream as write_failed, to resume elsewhere (stream.Config.PendingBytes).
	// Default 32MiB; 0 means no bound.
	PendingWriteBytes int64
	// WriteLinger is how long the writers wait after new frames arrive before writing them, so that more
	// frames go out per write: more throughput for more latency. Default 0 (write at once).
	WriteLinger time.Duration
	// Propagation is how long a stopping gateway keeps serving, unready, before its drain starts: the time
	// endpoints and proxies take to stop sending it clients. New streams meanwhile (and during the drain) get
	// a short retry and their position, and end, so that their clients reconnect to another pod. Default 0:
	// the drain starts at once (the chart sets it).
	Propagation time.Duration
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
	// ReplayCacheBytes bounds the memory of the blocks those readers read, kept for other connections resuming
	// nearby, together with the blocks being read. Default 32 MiB; at least 1 MiB.
	ReplayCacheBytes int64
	// Values is how values and keys are written into frames, and where schemas come from (config_values.go).
	Values ValuesConfig
	// TopicConflate maps served topics to the interval every stream of the topic is conflated at, at least
	// (a duration such as 250ms; a stream's conflate parameter may ask for longer). Default none.
	TopicConflate map[string]string
	// TopicSlowConflate maps served topics to the interval a stream of the topic goes on conflated at once it
	// falls behind the ring, instead of reading every record it missed from Kafka. Default none.
	TopicSlowConflate map[string]string
	// DemoTopic is the topic the dashboard at / shows. Default: the first topic.
	DemoTopic string
	// LogLevel is the lowest level logged: debug, info, warn or error. Default info.
	LogLevel slog.Level
	// Auth is who may read which topic: tokens, their keys and scopes (config_auth.go).
	Auth AuthConfig
	// CORS is which other origins' pages may read the gateway (config_auth.go).
	CORS CORSConfig
	// AllowedHosts are the Host headers the clients' port answers, against DNS rebinding (host.go): names,
	// *.example.com patterns and addresses, each with an optional port, and address ranges. Default none:
	// any host.
	AllowedHosts []string
	// IDFormat is the id format of the frames this gateway frames once for all its streams: "v1" (the whole
	// position vector) or "v2" (a compact id: a checkpoint in PositionTopic plus the partitions that moved
	// since). Every gateway with a PositionTopic reads both, whatever its own. Default v1.
	IDFormat string
	// PositionTopic is the topic of the checkpoints compact ids refer to: written by gateways with IDFormat
	// v2, read by every gateway that has one, whatever its IDFormat. Every gateway of a deployment with v2
	// ids must have the same. Default: ssegate.positions with IDFormat v2 (Load sets it); none with v1, and
	// then this gateway reads no compact id: each is invalid at once, without a Kafka read.
	PositionTopic string
	// CheckpointReaders bounds the checkpoints of compact ids read from Kafka at once; a stream whose id
	// needs a read beyond it waits for one to end (until it leaves). Default 4.
	CheckpointReaders int
	// CheckpointWriter names this gateway in the checkpoints it writes. Default: the host name.
	CheckpointWriter string
	// OTLPEndpoint is the OTLP/HTTP collector spans are exported to, as a base URL (http://collector:4318;
	// spans go to its /v1/traces). Default empty: tracing is off, with no exporter.
	OTLPEndpoint string
}

// DefaultPositionTopic is the position topic of a gateway with id-format v2 that names none.
const DefaultPositionTopic = "ssegate.positions"

// defaults returns the configuration before any flag, variable or file is applied.
func defaults() Config {
	return Config{
		Listen:            ":8080",
		AdminListen:       ":9090",
		Limits:            limitDefaults(),
		RingBytes:         64 << 20,
		RingFloor:         1 << 20,
		Heartbeat:         15 * time.Second,
		Retry:             3 * time.Second,
		WriteTimeout:      10 * time.Second,
		Writers:           runtime.GOMAXPROCS(0),
		Drain:             10 * time.Second,
		MetadataInterval:  10 * time.Second,
		Prefill:           10000,
		KeyPartitioner:    "murmur2",
		ReplayReaders:     4,
		ReplayCacheBytes:  replay.DefaultCacheBytes,
		PendingWriteBytes: 32 << 20,
		Values:            valuesDefaults(),
		IDFormat:          "v1",
		CheckpointReaders: 4,
		LogLevel:          slog.LevelInfo,
		Auth:              authDefaults(),
		Publish:           publishDefaults(),
		WSMaxMessageBytes: 64 << 10,
	}
}

// setting is a gateway setting: the flag name, its SSEGATE_ variable, usage and value.
func setting(name, usage string, v flag.Value) settings.Setting {
	return settings.Setting{Name: name, Envs: []string{settings.EnvName("SSEGATE_", name)}, Usage: usage, Value: v}
}

func settingsOf(c *Config) []settings.Setting {
	own := []settings.Setting{
		setting("topics", "topics to serve, comma-separated (required)", settings.List(&c.Topics)),
		setting("listen", "HTTP listen address of the clients' port (streams, dashboard); a socket from the service manager (LISTEN_FDS) replaces it", settings.String(&c.Listen)),
		setting("listen-reuse-port", "open the clients' port with SO_REUSEPORT: a new gateway on the same host listens beside the old one and takes the new connections once ready, so that the old one stops without a refused connection (Linux)", settings.Bool(&c.ListenReusePort)),
		setting("admin-listen", "HTTP listen address of the admin port (metrics, healthz, readyz, pprof)", settings.String(&c.AdminListen)),
		setting("pprof", "serve Go's profiles at /debug/pprof/ on the admin port", settings.Bool(&c.Pprof)),
		setting("heartbeat", "default idle time before a keep-alive comment; 0 means none", settings.Duration(&c.Heartbeat)),
		setting("retry", "reconnection delay sent to clients in the retry: line", settings.Duration(&c.Retry)),
		setting("write-timeout", "time a client has to take each write before it is disconnected", settings.Duration(&c.WriteTimeout)),
		setting("writers", "writer goroutines serving idle HTTP/1.1 streams; 0 keeps a goroutine per stream", settings.Int(&c.Writers)),
		setting("pending-write-bytes", "bound on the bytes of unfinished writes to clients, pod-wide; a write past it ends its stream (write_failed); 0 means none (bytes, or with KiB/MiB/GiB)", settings.Bytes(&c.PendingWriteBytes)),
		setting("write-linger", "wait after new frames before writing them, to batch writes; 0 writes at once", settings.Duration(&c.WriteLinger)),
		setting("endpoint-propagation", "how long a stopping gateway stays up, unready, before it drains, while endpoints and proxies drop it; new streams get a short retry and end", settings.Duration(&c.Propagation)),
		setting("drain", "window over which streams are closed at shutdown; 0 closes them at once", settings.Duration(&c.Drain)),
		setting("metadata-interval", "how often to look for new topics and partitions", settings.Duration(&c.MetadataInterval)),
		setting("prefill", "latest records per partition read into the ring at start; 0 means none", settings.Int64(&c.Prefill)),
		setting("key-partitioner", "how producers place keys: murmur2 (Kafka's default) or any", settings.String(&c.KeyPartitioner)),
		setting("replay-readers", "Kafka readers serving resumes the ring cannot serve, at most at once", settings.Int(&c.ReplayReaders)),
		setting("replay-cache-bytes", "memory of the blocks replay readers read, kept for other streams resuming nearby, with the blocks being read (bytes, or with KiB/MiB/GiB)", settings.Bytes(&c.ReplayCacheBytes)),
		setting("asyncapi-host", "host[:port] that /asyncapi.json names as the servers' address (default: the request's Host header)", settings.String(&c.AsyncAPIHost)),
		setting("demo-topic", "topic shown by the dashboard at / (default: the first topic)", settings.String(&c.DemoTopic)),
		setting("id-format", "id format of frames framed once for all streams: v1 (the whole position) or v2 (a checkpoint in position-topic plus what moved since); every gateway with a position-topic reads both", settings.String(&c.IDFormat)),
		setting("position-topic", "topic of the checkpoints v2 ids refer to, written with id-format v2 and read by every gateway that has one; the same on every gateway of a deployment (default: "+DefaultPositionTopic+" with id-format v2, none with v1: v2 ids are then invalid)", settings.String(&c.PositionTopic)),
		setting("checkpoint-readers", "Kafka reads of the checkpoints v2 ids refer to, at most at once; more wait their turn", settings.Int(&c.CheckpointReaders)),
		setting("checkpoint-writer", "name of this gateway in the checkpoints it writes (default: the host name)", settings.String(&c.CheckpointWriter)),
		setting("ws-max-message-bytes", "largest message a WebSocket client may send (acknowledgements, its first message); a larger one closes the connection with 1009", settings.Bytes(&c.WSMaxMessageBytes)),
		setting("ws-compression", "offer permessage-deflate on WebSocket streams", settings.Bool(&c.WSCompression)),
		setting("log-level", "lowest level logged: debug, info, warn, error", settings.Level(&c.LogLevel)),
	}
	own = append(own, ringSettings(c)...)
	own = append(own, otlpSetting(&c.OTLPEndpoint), hostSetting(&c.AllowedHosts))
	own = append(own, tlsSettings(&c.TLS)...)
	own = append(own, valuesSettings(&c.Values)...)
	own = append(own, setting("topic-slow-conflate", "per-topic conflation a stream of the topic falls back to once it falls behind the ring, comma-separated topic=interval pairs (prices=250ms): it catches up with each key's latest record rather than every record", settings.Map(&c.TopicSlowConflate)))
	own = append(own, setting("topic-conflate", "per-topic conflation every stream of the topic gets at least, comma-separated topic=interval pairs (prices=250ms): of each key only the latest record of each interval", settings.Map(&c.TopicConflate)))
	own = append(own, publishSettings(&c.Publish)...)
	own = append(own, limitSettings(&c.Limits)...)
	own = append(own, authSettings(&c.Auth, &c.CORS)...)
	return append(own, settings.Kafka(&c.Kafka, "SSEGATE_")...)
}

// ErrHelp is returned by Load when --help was asked for; the usage has been written.
var ErrHelp = settings.ErrHelp

// Load builds the configuration from args (without the program name), the environment (getenv) and the
// YAML file named by --config, and validates it. Usage and flag errors are written to out.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := defaults()
	ss := settingsOf(&c)
	var given ringGiven
	given.watch(ss)
	_, err := settings.Load(ss, args, getenv, settings.Options{
		Program:     "gateway",
		ConfigUsage: "optional YAML file of settings (keys are the flag names)",
		Out:         out,
	})
	if err != nil {
		return c, err
	}
	if c.serviceSockets, err = serviceSockets(getenv, os.Getpid()); err != nil {
		return c, err
	}
	if c.DemoTopic == "" && len(c.Topics) > 0 {
		c.DemoTopic = c.Topics[0]
	}
	if c.PositionTopic == "" && c.IDFormat == "v2" {
		c.PositionTopic = DefaultPositionTopic
	}
	if err := given.check(c); err != nil {
		return c, err
	}
	return c, c.Validate()
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
	if _, _, err := net.SplitHostPort(c.AdminListen); err != nil {
		return fmt.Errorf("invalid setting admin-listen (SSEGATE_ADMIN_LISTEN): %q: want host:port or :port", c.AdminListen)
	}
	if _, port, _ := net.SplitHostPort(c.Listen); c.AdminListen == c.Listen && port != "0" {
		return fmt.Errorf("invalid setting admin-listen (SSEGATE_ADMIN_LISTEN): %q is the listen address too; the admin port must be its own", c.AdminListen)
	}
	if err := c.validateSockets(); err != nil {
		return err
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	if err := c.validatePublish(); err != nil {
		return err
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if err := validateOTLP(c.OTLPEndpoint); err != nil {
		return err
	}
	checks := []struct {
		name string
		bad  bool
		want string
	}{
		{"heartbeat", c.Heartbeat < 0, "zero or positive"},
		{"retry", c.Retry < time.Millisecond, "at least 1ms"},
		{"write-timeout", c.WriteTimeout < time.Millisecond, "at least 1ms"},
		{"writers", c.Writers < 0 || c.Writers > 1024, "from 0 to 1024"},
		{"pending-write-bytes", c.PendingWriteBytes != 0 && c.PendingWriteBytes < 1<<20, "0 or at least 1MiB"},
		{"write-linger", c.WriteLinger < 0 || c.WriteLinger > time.Second, "from 0 to 1s"},
		{"endpoint-propagation", c.Propagation < 0, "zero or positive"},
		{"drain", c.Drain < 0, "zero or positive"},
		{"metadata-interval", c.MetadataInterval < 100*time.Millisecond, "at least 100ms"},
		{"prefill", c.Prefill < 0, "zero or positive"},
		{"key-partitioner", c.KeyPartitioner != "murmur2" && c.KeyPartitioner != "any", "murmur2 or any"},
		{"replay-readers", c.ReplayReaders < 1 || c.ReplayReaders > 1000, "from 1 to 1000"},
		{"replay-cache-bytes", c.ReplayCacheBytes < 1<<20, "at least 1MiB"},
		{"demo-topic", !slices.Contains(c.Topics, c.DemoTopic), "one of the served topics"},
		{"id-format", c.IDFormat != "v1" && c.IDFormat != "v2", "v1 or v2"},
		{"position-topic", c.PositionTopic != "" && slices.Contains(c.Topics, c.PositionTopic), "a topic name that is not a served topic"},
		{"position-topic", c.PositionTopic == "" && c.IDFormat == "v2", "set with id-format v2"},
		{"checkpoint-readers", c.CheckpointReaders < 1 || c.CheckpointReaders > 1000, "from 1 to 1000"},
		{"ws-max-message-bytes", c.WSMaxMessageBytes < 256 || c.WSMaxMessageBytes > 16<<20, "from 256 to 16MiB"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("invalid setting %s (%s): must be %s", ch.name, settings.EnvName("SSEGATE_", ch.name), ch.want)
		}
	}
	if err := c.validateRings(); err != nil {
		return err
	}
	if err := c.validateValues(); err != nil {
		return err
	}
	if _, err := c.topicConflate(c.TopicConflate); err != nil {
		return fmt.Errorf("invalid setting topic-conflate (SSEGATE_TOPIC_CONFLATE): %w", err)
	}
	if _, err := c.topicConflate(c.TopicSlowConflate); err != nil {
		return fmt.Errorf("invalid setting topic-slow-conflate (SSEGATE_TOPIC_SLOW_CONFLATE): %w", err)
	}
	if _, err := newHostPolicy(c.AllowedHosts); err != nil {
		return err
	}
	return c.validateAuth()
}

// perTopic calls fn with each topic and value of a per-topic setting (topic-auth, topic-ring-bytes, ...), in
// topic order, once it has checked that the topic is served; it returns the first error.
func (c Config) perTopic(m map[string]string, fn func(topic, v string) error) error {
	for _, topic := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(c.Topics, topic) {
			return fmt.Errorf("%q is not one of the served topics", topic)
		}
		if err := fn(topic, m[topic]); err != nil {
			return err
		}
	}
	return nil
}

// topicConflate parses topic-conflate or topic-slow-conflate (m): each topic served, each interval within the
// conflate parameter's bounds.
func (c Config) topicConflate(m map[string]string) (map[string]time.Duration, error) {
	out := make(map[string]time.Duration, len(m))
	err := c.perTopic(m, func(topic, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < stream.MinConflate || d > stream.MaxConflate {
			return fmt.Errorf("topic %s: want a duration from %v to %v, got %q", topic, stream.MinConflate, stream.MaxConflate, v)
		}
		out[topic] = d
		return nil
	})
	return out, err
}
