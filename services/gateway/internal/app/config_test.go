package app

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/secret"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// configEnv turns a map into the getenv func Load takes; a missing name reads as "".
func configEnv(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// writeConfigFile writes content to a file in a fresh temporary directory and returns its path.
func writeConfigFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadConfig runs Load with args, env and, when yamlText is not empty, a config file holding it.
func loadConfig(t *testing.T, args []string, env map[string]string, yamlText string) (Config, error) {
	t.Helper()
	if yamlText != "" {
		args = append([]string{"--config=" + writeConfigFile(t, "gateway.yaml", yamlText)}, args...)
	}
	var out bytes.Buffer
	return Load(args, configEnv(env), &out)
}

// minimalEnv is the least a valid configuration needs.
var minimalEnv = map[string]string{"KAFKA_BROKERS": "k:9092", "SSEGATE_TOPICS": "orders"}

// withEnv returns minimalEnv with extra added (an empty value removes a name).
func withEnv(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range minimalEnv {
		m[k] = v
	}
	for k, v := range extra {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// TestLoadDefaults spells every default out, so that changing one is a deliberate act.
func TestLoadDefaults(t *testing.T) {
	got, err := loadConfig(t, nil, minimalEnv, "")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var want Config
	want.Kafka.Brokers = []string{"k:9092"}
	want.Topics = []string{"orders"}
	want.Listen = ":8080"
	want.AdminListen = ":9090"
	want.Limits.QuotaKeyPrefix = "ssegate:gateway:quota:"
	want.Limits.QuotaExpiry = 30 * time.Second
	want.Limits.QuotaTimeout = time.Second
	want.Limits.QuotaFailure = "open"
	want.Limits.MaxTopicsPerStream = 10
	want.RingBytes = 64 << 20
	want.RingFloor = 1 << 20
	want.Heartbeat = 15 * time.Second
	want.Retry = 3 * time.Second
	want.WriteTimeout = 10 * time.Second
	want.Writers = runtime.GOMAXPROCS(0)
	want.PendingWriteBytes = 32 << 20
	want.Drain = 10 * time.Second
	want.MetadataInterval = 10 * time.Second
	want.Prefill = 10000
	want.KeyPartitioner = "murmur2"
	want.ReplayReaders = 4
	want.ReplayCacheBytes = 32 << 20
	want.Values.Format = "auto"
	want.Values.ValidateJSON = true
	want.Values.Registry.Timeout = 5 * time.Second
	want.IDFormat = "v1"
	want.CheckpointReaders = 4
	want.DemoTopic = "orders"
	want.LogLevel = slog.LevelInfo
	want.Auth.KeyRefresh = time.Minute
	want.Auth.Claim = "ssegate"
	want.Auth.Cookie = "ssegate_token"
	want.Auth.ExpiryNotice = time.Minute
	want.Auth.Hook = HookConfig{Timeout: 2 * time.Second, TTL: time.Minute, CacheEntries: 10000}
	want.Publish = publishDefaults()
	want.WSMaxMessageBytes = 64 << 10
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load with only the required settings\n got: %+v\nwant: %+v", got, want)
	}
}

func TestLoadSources(t *testing.T) {
	// base is the configuration minimalEnv gives; each case says how its result differs from it.
	base := func() Config {
		c := defaults()
		c.Kafka.Brokers = []string{"k:9092"}
		c.Topics = []string{"orders"}
		c.DemoTopic = "orders"
		return c
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		yaml string
		want func(c *Config)
	}{
		{
			name: "env comma lists are trimmed and skip empty items",
			env: map[string]string{
				"KAFKA_BROKERS": " k1:9092, k2:9092 ,", "SSEGATE_TOPICS": "orders,,payments ",
				"SSEGATE_LISTEN": "127.0.0.1:9000",
			},
			want: func(c *Config) {
				c.Kafka.Brokers = []string{"k1:9092", "k2:9092"}
				c.Topics = []string{"orders", "payments"}
				c.Listen = "127.0.0.1:9000"
			},
		},
		{
			name: "SSEGATE_KAFKA_BROKERS is an alias of KAFKA_BROKERS",
			env:  map[string]string{"SSEGATE_KAFKA_BROKERS": "alias:9092", "SSEGATE_TOPICS": "orders"},
			want: func(c *Config) { c.Kafka.Brokers = []string{"alias:9092"} },
		},
		{
			name: "KAFKA_BROKERS wins over SSEGATE_KAFKA_BROKERS",
			env:  withEnv(map[string]string{"SSEGATE_KAFKA_BROKERS": "alias:9092"}),
			want: func(*Config) {},
		},
		{
			name: "every setting as a flag",
			args: []string{
				"--kafka-brokers=f1:1,f2:2", "--topics=a,b", "--listen=:9999", "--ring-bytes=1GiB",
				"--heartbeat=0", "--retry=1500ms", "--write-timeout=2s", "--writers=0", "--write-linger=2ms", "--drain=0", "--metadata-interval=1m",
				"--demo-topic=b", "--log-level=debug", "--kafka-client-id=gw", "--kafka-tls",
				"--value-format=base64", "--topic-value-format=a=text",
				"--kafka-tls-ca-file=/ca.pem", "--kafka-tls-cert-file=/c.pem", "--kafka-tls-key-file=/k.pem",
				"--kafka-tls-server-name=kafka.local", "--kafka-tls-insecure-skip-verify=true",
				"--kafka-sasl-mechanism=SCRAM-SHA-512", "--kafka-sasl-username=u",
				"--kafka-sasl-allow-plaintext",
			},
			env: map[string]string{},
			want: func(c *Config) {
				c.Kafka.Brokers = []string{"f1:1", "f2:2"}
				c.Topics = []string{"a", "b"}
				c.Listen = ":9999"
				c.RingBytes = 1 << 30
				c.Heartbeat = 0
				c.Retry = 1500 * time.Millisecond
				c.WriteTimeout = 2 * time.Second
				c.Writers = 0
				c.WriteLinger = 2 * time.Millisecond
				c.Drain = 0
				c.MetadataInterval = time.Minute
				c.DemoTopic = "b"
				c.Values.Format = "base64"
				c.Values.TopicFormats = map[string]string{"a": "text"}
				c.LogLevel = slog.LevelDebug
				c.Kafka.ClientID = "gw"
				c.Kafka.TLS.Enabled = true
				c.Kafka.TLS.CAFile, c.Kafka.TLS.CertFile, c.Kafka.TLS.KeyFile = "/ca.pem", "/c.pem", "/k.pem"
				c.Kafka.TLS.ServerName = "kafka.local"
				c.Kafka.TLS.InsecureSkipVerify = true
				c.Kafka.SASL.Mechanism, c.Kafka.SASL.Username = "SCRAM-SHA-512", "u"
				c.Kafka.SASL.AllowPlaintext = true
			},
		},
		{
			name: "the admin port and the limits as flags",
			args: []string{
				"--admin-listen=127.0.0.1:9191", "--pprof", "--max-streams=5000", "--stream-rate=200", "--stream-burst=400",
				"--max-streams-per-ip=20", "--max-streams-per-subject=5", "--trusted-proxies=10.0.0.0/8, 192.0.2.1",
				"--redis-addr=redis:6379", "--redis-username=gw", "--redis-db=2",
				"--quota-key-prefix=q:", "--quota-expiry=1m", "--quota-timeout=250ms", "--quota-failure=closed",
				"--max-topics-per-stream=3",
			},
			env: minimalEnv,
			want: func(c *Config) {
				c.AdminListen, c.Pprof = "127.0.0.1:9191", true
				c.Limits = LimitConfig{
					MaxStreams: 5000, StreamRate: 200, StreamBurst: 400, MaxPerIP: 20, MaxPerSubject: 5, MaxTopicsPerStream: 3,
					TrustedProxies: []string{"10.0.0.0/8", "192.0.2.1"},
					Redis:          RedisConfig{Addr: "redis:6379", Username: "gw", DB: 2},
					QuotaKeyPrefix: "q:", QuotaExpiry: time.Minute, QuotaTimeout: 250 * time.Millisecond, QuotaFailure: "closed",
				}
			},
		},
		{
			name: "the admin port and the limits as variables",
			env: withEnv(map[string]string{
				"SSEGATE_ADMIN_LISTEN": ":9999", "SSEGATE_MAX_STREAMS_PER_IP": "3", "REDIS_ADDR": "r:6379",
				"SSEGATE_TRUSTED_PROXIES": "fd00::/8", "SSEGATE_QUOTA_EXPIRY": "10s",
			}),
			want: func(c *Config) {
				c.AdminListen = ":9999"
				c.Limits.MaxPerIP, c.Limits.Redis.Addr = 3, "r:6379"
				c.Limits.TrustedProxies, c.Limits.QuotaExpiry = []string{"fd00::/8"}, 10*time.Second
			},
		},
		{
			name: "single-dash flags work too",
			args: []string{"-listen", ":7000", "-topics", "x"},
			env:  minimalEnv,
			want: func(c *Config) { c.Listen, c.Topics, c.DemoTopic = ":7000", []string{"x"}, "x" },
		},
		{
			name: "every setting kind as SSEGATE_ variables",
			env: withEnv(map[string]string{
				"SSEGATE_RING_BYTES": "65536", "SSEGATE_HEARTBEAT": "250ms", "SSEGATE_DRAIN": "1m30s",
				"SSEGATE_LOG_LEVEL": "WARN", "SSEGATE_KAFKA_TLS": "true", "SSEGATE_DEMO_TOPIC": "orders",
				"SSEGATE_KAFKA_SASL_MECHANISM": "PLAIN", "SSEGATE_KAFKA_SASL_USERNAME": "u",
				"SSEGATE_KAFKA_SASL_PASSWORD": "pw", "SSEGATE_VALUE_FORMAT": "text",
				"SSEGATE_TOPIC_VALUE_FORMAT": " orders = base64 ",
			}),
			want: func(c *Config) {
				c.RingBytes = 65536
				c.Heartbeat = 250 * time.Millisecond
				c.Drain = 90 * time.Second
				c.LogLevel = slog.LevelWarn
				c.Kafka.TLS.Enabled = true
				c.Kafka.SASL.Mechanism, c.Kafka.SASL.Username, c.Kafka.SASL.Password = "PLAIN", "u", "pw"
				c.Values.Format = "text"
				c.Values.TopicFormats = map[string]string{"orders": "base64"}
			},
		},
		{
			name: "SASL PLAIN without TLS, allowed in the file",
			env:  withEnv(map[string]string{"SSEGATE_KAFKA_SASL_MECHANISM": "PLAIN", "SSEGATE_KAFKA_SASL_USERNAME": "u"}),
			yaml: "kafka-sasl-allow-plaintext: true\n",
			want: func(c *Config) {
				c.Kafka.SASL.Mechanism, c.Kafka.SASL.Username, c.Kafka.SASL.AllowPlaintext = "PLAIN", "u", true
			},
		},
		{
			name: "SCRAM without TLS needs no allowance",
			env:  withEnv(map[string]string{"SSEGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "SSEGATE_KAFKA_SASL_USERNAME": "u"}),
			want: func(c *Config) { c.Kafka.SASL.Mechanism, c.Kafka.SASL.Username = "SCRAM-SHA-256", "u" },
		},
		{
			name: "YAML map of topic value formats",
			env:  map[string]string{"KAFKA_BROKERS": "k:9092"},
			yaml: "topics: [orders, logs, raw]\nvalue-format: base64\ntopic-value-format:\n  logs: text\n  raw: auto\n",
			want: func(c *Config) {
				c.Topics = []string{"orders", "logs", "raw"}
				c.Values.Format = "base64"
				c.Values.TopicFormats = map[string]string{"logs": "text", "raw": "auto"}
			},
		},
		{
			name: "YAML list of topic value formats",
			env:  minimalEnv,
			yaml: "topic-value-format: [orders=text]\n",
			want: func(c *Config) { c.Values.TopicFormats = map[string]string{"orders": "text"} },
		},
		{
			name: "YAML lists, numbers, booleans and strings",
			env:  map[string]string{},
			yaml: "kafka-brokers:\n  - y1:9092\n  - y2:9092\n" +
				"topics: [a, b, c]\n" +
				"listen: \"127.0.0.1:8081\"\n" +
				"ring-bytes: 131072\n" +
				"heartbeat: 5s\n" +
				"metadata-interval: 500ms\n" +
				"kafka-tls: true\n" +
				"log-level: error\n",
			want: func(c *Config) {
				c.Kafka.Brokers = []string{"y1:9092", "y2:9092"}
				c.Topics, c.DemoTopic = []string{"a", "b", "c"}, "a"
				c.Listen = "127.0.0.1:8081"
				c.RingBytes = 128 << 10
				c.Heartbeat = 5 * time.Second
				c.MetadataInterval = 500 * time.Millisecond
				c.Kafka.TLS.Enabled = true
				c.LogLevel = slog.LevelError
			},
		},
		{
			name: "YAML comma list in a string",
			env:  map[string]string{"KAFKA_BROKERS": "k:9092"},
			yaml: "topics: \"orders, payments\"\nring-bytes: 64MiB\n",
			want: func(c *Config) { c.Topics = []string{"orders", "payments"} },
		},
		{
			name: "empty YAML file changes nothing",
			env:  minimalEnv,
			yaml: "# nothing here\n",
			want: func(*Config) {},
		},
		{
			name: "demo topic defaults to the first topic, not the alphabetically first",
			env:  withEnv(map[string]string{"SSEGATE_TOPICS": "zeta,alpha"}),
			want: func(c *Config) { c.Topics, c.DemoTopic = []string{"zeta", "alpha"}, "zeta" },
		},
		{
			name: "explicit demo topic is kept",
			env:  withEnv(map[string]string{"SSEGATE_TOPICS": "zeta,alpha", "SSEGATE_DEMO_TOPIC": "alpha"}),
			want: func(c *Config) { c.Topics, c.DemoTopic = []string{"zeta", "alpha"}, "alpha" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadConfig(t, tc.args, tc.env, tc.yaml)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := base()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Load\n got: %+v\nwant: %+v", got, want)
			}
		})
	}
}

func TestLoadPrecedence(t *testing.T) {
	const file = "listen: \":3\"\nheartbeat: 3s\ntopics: [file]\n"
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		yaml      string
		listen    string
		heartbeat time.Duration
		topics    string
	}{
		{
			name: "flag beats env and file",
			args: []string{"--listen=:1", "--heartbeat=1s", "--topics=flag"},
			env:  withEnv(map[string]string{"SSEGATE_LISTEN": ":2", "SSEGATE_HEARTBEAT": "2s", "SSEGATE_TOPICS": "env"}),
			yaml: file, listen: ":1", heartbeat: time.Second, topics: "flag",
		},
		{
			name: "env beats file",
			env:  withEnv(map[string]string{"SSEGATE_LISTEN": ":2", "SSEGATE_HEARTBEAT": "2s", "SSEGATE_TOPICS": "env"}),
			yaml: file, listen: ":2", heartbeat: 2 * time.Second, topics: "env",
		},
		{
			name: "file beats default",
			env:  withEnv(map[string]string{"SSEGATE_TOPICS": ""}),
			yaml: file, listen: ":3", heartbeat: 3 * time.Second, topics: "file",
		},
		{
			name: "default when nobody says",
			env:  minimalEnv, listen: ":8080", heartbeat: 15 * time.Second, topics: "orders",
		},
		{
			name: "flag equal to the default still beats env and file",
			args: []string{"--listen=:8080", "--heartbeat=15s"},
			env:  withEnv(map[string]string{"SSEGATE_LISTEN": ":2", "SSEGATE_HEARTBEAT": "2s"}),
			yaml: file, listen: ":8080", heartbeat: 15 * time.Second, topics: "orders",
		},
		{
			name:   "flag zero beats env",
			args:   []string{"--heartbeat=0"},
			env:    withEnv(map[string]string{"SSEGATE_HEARTBEAT": "2s"}),
			listen: ":8080", heartbeat: 0, topics: "orders",
		},
		{
			name: "empty env variable counts as unset",
			env:  withEnv(map[string]string{"SSEGATE_LISTEN": ""}),
			yaml: file, listen: ":3", heartbeat: 3 * time.Second, topics: "orders",
		},
		{
			name:   "flag list replaces the env list instead of adding to it",
			args:   []string{"--topics=a"},
			env:    withEnv(map[string]string{"SSEGATE_TOPICS": "b,c"}),
			listen: ":8080", heartbeat: 15 * time.Second, topics: "a",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args, tc.env, tc.yaml)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Listen != tc.listen || c.Heartbeat != tc.heartbeat || strings.Join(c.Topics, ",") != tc.topics {
				t.Fatalf("listen %q heartbeat %v topics %q, want %q %v %q",
					c.Listen, c.Heartbeat, strings.Join(c.Topics, ","), tc.listen, tc.heartbeat, tc.topics)
			}
		})
	}
}

func TestLoadByteSizes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"65536", 65536},
		{"64KiB", 64 << 10},
		{"64MiB", 64 << 20},
		{"2GiB", 2 << 30},
		{"100KB", 100_000},
		{"5MB", 5_000_000},
		{"1GB", 1_000_000_000},
		{"70000B", 70000},
		{" 64 MiB ", 64 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			for _, src := range []struct {
				name string
				args []string
				env  map[string]string
				yaml string
			}{
				{name: "flag", args: []string{"--ring-bytes=" + tc.in}, env: minimalEnv},
				{name: "env", env: withEnv(map[string]string{"SSEGATE_RING_BYTES": tc.in})},
				{name: "file", env: minimalEnv, yaml: "ring-bytes: \"" + tc.in + "\"\n"},
			} {
				c, err := loadConfig(t, src.args, src.env, src.yaml)
				if err != nil {
					t.Fatalf("%s: Load: %v", src.name, err)
				}
				if c.RingBytes != tc.want {
					t.Errorf("%s: RingBytes = %d, want %d", src.name, c.RingBytes, tc.want)
				}
			}
		})
	}
}

func TestLoadPasswordFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"newline stripped", "s3cret\n", "s3cret"},
		{"crlf stripped", "s3cret\r\n", "s3cret"},
		{"no newline", "s3cret", "s3cret"},
		{"inner spaces kept", " a b \n\n", " a b "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfigFile(t, "password", tc.content)
			sasl := map[string]string{"SSEGATE_KAFKA_SASL_MECHANISM": "PLAIN", "SSEGATE_KAFKA_SASL_USERNAME": "u", "SSEGATE_KAFKA_SASL_ALLOW_PLAINTEXT": "true"}
			for _, src := range []struct {
				name string
				args []string
				env  map[string]string
				yaml string
			}{
				{name: "flag", args: []string{"--kafka-sasl-password-file=" + path}, env: withEnv(sasl)},
				{name: "env", env: withEnv(map[string]string{
					"SSEGATE_KAFKA_SASL_MECHANISM": "PLAIN", "SSEGATE_KAFKA_SASL_USERNAME": "u",
					"SSEGATE_KAFKA_SASL_PASSWORD_FILE": path, "SSEGATE_KAFKA_SASL_ALLOW_PLAINTEXT": "true",
				})},
				{name: "file", env: withEnv(sasl), yaml: "kafka-sasl-password-file: " + path + "\n"},
			} {
				c, err := loadConfig(t, src.args, src.env, src.yaml)
				if err != nil {
					t.Fatalf("%s: Load: %v", src.name, err)
				}
				if pw := saslPassword(t, c); pw != tc.want {
					t.Errorf("%s: password = %q, want %q", src.name, pw, tc.want)
				}
			}
		})
	}
}

func TestLoadInvalid(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		yaml string
		want []string // substrings the error must contain
	}{
		{name: "no brokers", env: map[string]string{"SSEGATE_TOPICS": "orders"}, want: []string{"kafka", "KAFKA_BROKERS"}},
		{name: "broker without port", env: withEnv(map[string]string{"KAFKA_BROKERS": "localhost"}), want: []string{"kafka", "localhost"}},
		{name: "unknown SASL mechanism", env: withEnv(map[string]string{"SSEGATE_KAFKA_SASL_MECHANISM": "GSSAPI"}), want: []string{"kafka", "GSSAPI"}},
		{name: "SASL without username", args: []string{"--kafka-sasl-mechanism=PLAIN"}, env: minimalEnv, want: []string{"kafka", "username"}},
		{name: "SASL PLAIN without TLS", args: []string{"--kafka-sasl-mechanism=PLAIN", "--kafka-sasl-username=u"}, env: minimalEnv, want: []string{"kafka-sasl-allow-plaintext", "kafka-tls"}},
		{name: "SASL PLAIN without TLS, allowance false", args: []string{"--kafka-sasl-mechanism=PLAIN", "--kafka-sasl-username=u"}, env: withEnv(map[string]string{"SSEGATE_KAFKA_SASL_ALLOW_PLAINTEXT": "false"}), want: []string{"kafka-sasl-allow-plaintext"}},
		{name: "TLS cert without key", args: []string{"--kafka-tls-cert-file=/c.pem"}, env: minimalEnv, want: []string{"kafka"}},
		{name: "no topics", env: map[string]string{"KAFKA_BROKERS": "k:9092"}, want: []string{"topics", "SSEGATE_TOPICS"}},
		{name: "only commas for topics", env: withEnv(map[string]string{"SSEGATE_TOPICS": " , ,"}), want: []string{"topics"}},
		{name: "topic with a space", args: []string{"--topics=a b"}, env: minimalEnv, want: []string{"topics", `"a b"`}},
		{name: "topic ..", args: []string{"--topics=.."}, env: minimalEnv, want: []string{"topics", `".."`}},
		{name: "topic too long", args: []string{"--topics=" + strings.Repeat("t", 250)}, env: minimalEnv, want: []string{"topics"}},
		{name: "listen without port", env: withEnv(map[string]string{"SSEGATE_LISTEN": "localhost"}), want: []string{"listen", "SSEGATE_LISTEN"}},
		{name: "listen from null YAML", env: minimalEnv, yaml: "listen:\n", want: []string{"listen"}},
		{name: "admin-listen without port", args: []string{"--admin-listen=localhost"}, env: minimalEnv, want: []string{"admin-listen", "SSEGATE_ADMIN_LISTEN"}},
		{name: "admin-listen is listen", args: []string{"--admin-listen=:8080"}, env: minimalEnv, want: []string{"admin-listen", "its own"}},
		{name: "id-format v3", args: []string{"--id-format=v3"}, env: minimalEnv, want: []string{"id-format", "SSEGATE_ID_FORMAT", "v1 or v2"}},
		{name: "position-topic served", args: []string{"--position-topic=orders"}, env: minimalEnv, want: []string{"position-topic", "SSEGATE_POSITION_TOPIC"}},
		{name: "checkpoint-readers zero", args: []string{"--checkpoint-readers=0"}, env: minimalEnv, want: []string{"checkpoint-readers", "SSEGATE_CHECKPOINT_READERS", "from 1 to 1000"}},
		{name: "max-streams negative", args: []string{"--max-streams=-1"}, env: minimalEnv, want: []string{"max-streams", "SSEGATE_MAX_STREAMS"}},
		{name: "stream-rate negative", args: []string{"--stream-rate=-5"}, env: minimalEnv, want: []string{"stream-rate"}},
		{name: "max-streams-per-ip negative", args: []string{"--max-streams-per-ip=-1"}, env: minimalEnv, want: []string{"max-streams-per-ip"}},
		{name: "trusted-proxies not a range", args: []string{"--trusted-proxies=10.0.0.0/8,proxy.local"}, env: minimalEnv, want: []string{"trusted-proxies", "proxy.local"}},
		{name: "redis-addr without port", env: withEnv(map[string]string{"REDIS_ADDR": "redis"}), want: []string{"redis-addr", "REDIS_ADDR"}},
		{name: "quota-expiry too short", args: []string{"--quota-expiry=500ms"}, env: minimalEnv, want: []string{"quota-expiry", "at least 1s"}},
		{name: "quota-timeout too long", args: []string{"--quota-expiry=3s", "--quota-timeout=1s"}, env: minimalEnv, want: []string{"quota-timeout", "third"}},
		{name: "quota-failure unknown", args: []string{"--quota-failure=maybe"}, env: minimalEnv, want: []string{"quota-failure", "open or closed"}},
		{name: "max-topics-per-stream zero", args: []string{"--max-topics-per-stream=0"}, env: minimalEnv, want: []string{"max-topics-per-stream", "at least 1"}},
		{name: "ring-bytes bad unit flag", args: []string{"--ring-bytes=12XB"}, env: minimalEnv, want: []string{"ring-bytes", "12XB"}},
		{name: "ring-bytes bad unit env", env: withEnv(map[string]string{"SSEGATE_RING_BYTES": "12XB"}), want: []string{"ring-bytes", "SSEGATE_RING_BYTES", "12XB"}},
		{name: "ring-bytes bad unit file", env: minimalEnv, yaml: "ring-bytes: 12XB\n", want: []string{"ring-bytes", "config file", "12XB"}},
		{name: "ring-bytes negative", args: []string{"--ring-bytes=-1"}, env: minimalEnv, want: []string{"ring-bytes"}},
		{name: "ring-bytes overflow", args: []string{"--ring-bytes=9999999999GiB"}, env: minimalEnv, want: []string{"ring-bytes"}},
		{name: "ring-bytes below 64KiB", args: []string{"--ring-bytes=65535"}, env: minimalEnv, want: []string{"ring-bytes", "64KiB"}},
		{name: "heartbeat negative", args: []string{"--heartbeat=-1s"}, env: minimalEnv, want: []string{"heartbeat"}},
		{name: "heartbeat without unit", env: withEnv(map[string]string{"SSEGATE_HEARTBEAT": "15"}), want: []string{"heartbeat", "SSEGATE_HEARTBEAT"}},
		{name: "heartbeat not a duration in file", env: minimalEnv, yaml: "heartbeat: soon\n", want: []string{"heartbeat", "soon"}},
		{name: "retry zero", args: []string{"--retry=0"}, env: minimalEnv, want: []string{"retry"}},
		{name: "write-timeout zero", env: withEnv(map[string]string{"SSEGATE_WRITE_TIMEOUT": "0s"}), want: []string{"write-timeout"}},
		{name: "drain negative", args: []string{"--drain=-1s"}, env: minimalEnv, want: []string{"drain"}},
		{name: "writers negative", args: []string{"--writers=-1"}, env: minimalEnv, want: []string{"writers", "SSEGATE_WRITERS", "from 0 to 1024"}},
		{name: "writers not a number", env: withEnv(map[string]string{"SSEGATE_WRITERS": "two"}), want: []string{"writers", "SSEGATE_WRITERS", "two"}},
		{name: "write-linger above 1s", args: []string{"--write-linger=2s"}, env: minimalEnv, want: []string{"write-linger", "from 0 to 1s"}},
		{name: "metadata-interval too short", args: []string{"--metadata-interval=10ms"}, env: minimalEnv, want: []string{"metadata-interval"}},
		{name: "demo-topic not served", args: []string{"--demo-topic=other"}, env: minimalEnv, want: []string{"demo-topic"}},
		{name: "log-level unknown", env: withEnv(map[string]string{"SSEGATE_LOG_LEVEL": "loud"}), want: []string{"log-level", "loud"}},
		{name: "kafka-tls not a bool", env: withEnv(map[string]string{"SSEGATE_KAFKA_TLS": "maybe"}), want: []string{"kafka-tls", "maybe"}},
		{name: "password file missing", args: []string{"--kafka-sasl-password-file=/nonexistent/pw"}, env: minimalEnv, want: []string{"kafka-sasl-password-file"}},
		{name: "password file missing env", env: withEnv(map[string]string{"SSEGATE_KAFKA_SASL_PASSWORD_FILE": "/nonexistent/pw"}), want: []string{"kafka-sasl-password-file"}},
		{name: "unknown YAML key", env: minimalEnv, yaml: "listen: \":1\"\nheartbeats: 5s\n", want: []string{"unknown setting", `"heartbeats"`}},
		{name: "bad YAML", env: minimalEnv, yaml: "topics: [a, b\n", want: []string{"config file"}},
		{name: "YAML not a mapping", env: minimalEnv, yaml: "- a\n- b\n", want: []string{"config file"}},
		{name: "YAML map value", env: minimalEnv, yaml: "listen:\n  host: a\n", want: []string{"listen", "map"}},
		{name: "missing config file", args: []string{"--config=/nonexistent/gateway.yaml"}, env: minimalEnv, want: []string{"config file"}},
		{name: "positional argument", args: []string{"--listen=:1", "serve"}, env: minimalEnv, want: []string{"unexpected argument", `"serve"`}},
		{name: "unknown flag", args: []string{"--nope=1"}, env: minimalEnv, want: []string{"nope"}},
		{name: "value-format unknown", args: []string{"--value-format=b64"}, env: minimalEnv, want: []string{"value-format", "SSEGATE_VALUE_FORMAT", `"b64"`, "auto, text, base64, avro, protobuf or json-schema"}},
		{name: "value-format in upper case", env: withEnv(map[string]string{"SSEGATE_VALUE_FORMAT": "BASE64"}), want: []string{"value-format", `"BASE64"`}},
		{name: "value-format empty in file", env: minimalEnv, yaml: "value-format: \"\"\n", want: []string{"value-format", `""`}},
		{name: "topic-value-format unknown format", args: []string{"--topic-value-format=orders=hex"}, env: minimalEnv, want: []string{"topic-value-format", "SSEGATE_TOPIC_VALUE_FORMAT", "orders", `"hex"`}},
		{name: "topic-value-format empty format", env: withEnv(map[string]string{"SSEGATE_TOPIC_VALUE_FORMAT": "orders="}), want: []string{"topic-value-format", "orders", `got ""`}},
		{name: "topic-conflate too short", args: []string{"--topic-conflate=orders=5ms"}, env: minimalEnv, want: []string{"topic-conflate", "SSEGATE_TOPIC_CONFLATE", "orders", `"5ms"`}},
		{name: "topic-conflate topic not served", args: []string{"--topic-conflate=payments=1s"}, env: minimalEnv, want: []string{"topic-conflate", `"payments"`, "not one of the served topics"}},
		{name: "topic-slow-conflate too long", args: []string{"--topic-slow-conflate=orders=2m"}, env: minimalEnv, want: []string{"topic-slow-conflate", "SSEGATE_TOPIC_SLOW_CONFLATE", "orders", `"2m"`}},
		{name: "topic-value-format topic not served", args: []string{"--topic-value-format=payments=text"}, env: minimalEnv, want: []string{"topic-value-format", `"payments"`, "not one of the served topics"}},
		{name: "topic-value-format not a pair", args: []string{"--topic-value-format=base64"}, env: minimalEnv, want: []string{"topic-value-format", `"base64"`}},
		{name: "topic-value-format pair not a pair in env", env: withEnv(map[string]string{"SSEGATE_TOPIC_VALUE_FORMAT": "orders:text"}), want: []string{"topic-value-format", "SSEGATE_TOPIC_VALUE_FORMAT", `"orders:text"`}},
		{name: "topic-value-format topic twice", args: []string{"--topic-value-format=orders=text,orders=auto"}, env: minimalEnv, want: []string{"topic-value-format", "more than once"}},
		{name: "topic-value-format bad format in YAML map", env: minimalEnv, yaml: "topic-value-format:\n  orders: Text\n", want: []string{"topic-value-format", "orders", `"Text"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(t, tc.args, tc.env, tc.yaml)
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if errors.Is(err, ErrHelp) {
				t.Errorf("error %q is ErrHelp", err)
			}
		})
	}
}

func TestLoadHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var out bytes.Buffer
			// No brokers, no topics: help must not be held up by validation.
			_, err := Load([]string{arg}, configEnv(nil), &out)
			if !errors.Is(err, ErrHelp) {
				t.Fatalf("Load(%s) error = %v, want ErrHelp", arg, err)
			}
			for _, w := range []string{"-kafka-brokers", "KAFKA_BROKERS", "-topics", "SSEGATE_TOPICS", "-config", "-ring-bytes"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("usage does not mention %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestValidateNamesSetting(t *testing.T) {
	valid := func() Config {
		c := defaults()
		c.Kafka.Brokers = []string{"k:9092"}
		c.Topics = []string{"orders"}
		c.DemoTopic = "orders"
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"heartbeat zero is fine", func(c *Config) { c.Heartbeat = 0 }, ""},
		{"drain zero is fine", func(c *Config) { c.Drain = 0 }, ""},
		{"writers zero is fine", func(c *Config) { c.Writers = 0 }, ""},
		{"write-linger 1s is fine", func(c *Config) { c.WriteLinger = time.Second }, ""},
		{"write-linger negative", func(c *Config) { c.WriteLinger = -time.Millisecond }, "write-linger"},
		{"ring-bytes exactly 64KiB is fine", func(c *Config) { c.RingBytes = 64 << 10 }, ""},
		{"metadata-interval exactly 100ms is fine", func(c *Config) { c.MetadataInterval = 100 * time.Millisecond }, ""},
		{"retry 1ms is fine", func(c *Config) { c.Retry = time.Millisecond }, ""},
		{"empty demo topic", func(c *Config) { c.DemoTopic = "" }, "demo-topic"},
		{"retry below 1ms", func(c *Config) { c.Retry = time.Millisecond - 1 }, "retry"},
		{"write-timeout negative", func(c *Config) { c.WriteTimeout = -time.Second }, "write-timeout"},
		{"topic .", func(c *Config) { c.Topics = []string{"."}; c.DemoTopic = "." }, "topics"},
		{"value-format text is fine", func(c *Config) { c.Values.Format = "text" }, ""},
		{"value-format empty", func(c *Config) { c.Values.Format = "" }, "value-format"},
		{"topic-value-format is fine", func(c *Config) { c.Values.TopicFormats = map[string]string{"orders": "base64"} }, ""},
		{"topic-value-format of an unserved topic", func(c *Config) { c.Values.TopicFormats = map[string]string{"x": "text"} }, "topic-value-format"},
		{"no position-topic with id-format v1 is fine", func(c *Config) { c.PositionTopic = "" }, ""},
		{"no position-topic with id-format v2", func(c *Config) { c.IDFormat, c.PositionTopic = "v2", "" }, "position-topic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestLoadPositionTopic: a gateway has the default position topic only with id-format v2; with v1 it has
// the one given, or none (and then reads no compact id).
func TestLoadPositionTopic(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		yaml string
		want string
	}{
		{name: "v1", want: ""},
		{name: "v1, given", args: []string{"--position-topic=p"}, want: "p"},
		{name: "v2", args: []string{"--id-format=v2"}, want: "ssegate.positions"},
		{name: "v2, given", args: []string{"--id-format=v2", "--position-topic=p"}, want: "p"},
		{name: "v2, given empty", args: []string{"--id-format=v2"}, yaml: "position-topic: \"\"\n", want: "ssegate.positions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args, minimalEnv, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			if c.PositionTopic != tc.want {
				t.Fatalf("position topic %q, want %q", c.PositionTopic, tc.want)
			}
		})
	}
}

// saslPassword is the SASL password c gives: its file's contents, or the password as it is.
func saslPassword(t *testing.T, c Config) string {
	t.Helper()
	pw, err := secret.Pick(c.Kafka.SASL.Password, "kafka-sasl-password-file", c.Kafka.SASL.PasswordFile).Get()
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// TestLoadPasswordGroup: kafka-sasl-password and kafka-sasl-password-file set one password; the strongest
// source of either wins for both. The password itself is never a flag.
func TestLoadPasswordGroup(t *testing.T) {
	path := writeConfigFile(t, "pw", "fromfile\n")
	base := map[string]string{"SSEGATE_KAFKA_SASL_MECHANISM": "PLAIN", "SSEGATE_KAFKA_SASL_USERNAME": "u", "SSEGATE_KAFKA_SASL_ALLOW_PLAINTEXT": "true"}
	env := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return withEnv(m)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		yaml string
		want string
	}{
		{"file flag beats env password", []string{"--kafka-sasl-password-file=" + path}, env("SSEGATE_KAFKA_SASL_PASSWORD", "fromenv"), "", "fromfile"},
		{"file flag beats yaml password", []string{"--kafka-sasl-password-file=" + path}, env(), "kafka-sasl-password: fromyaml\n", "fromfile"},
		{"no password flag", []string{"--kafka-sasl-password=fromflag"}, env("SSEGATE_KAFKA_SASL_PASSWORD_FILE", path), "", "error: set SSEGATE_KAFKA_SASL_PASSWORD"},
		{"env password beats yaml file", nil, env("SSEGATE_KAFKA_SASL_PASSWORD", "fromenv"), "kafka-sasl-password-file: " + path + "\n", "fromenv"},
		{"yaml file alone", nil, env(), "kafka-sasl-password-file: " + path + "\n", "fromfile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args, tc.env, tc.yaml)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "fromflag") {
					t.Fatalf("Load: %v, want an error saying %q without the password", err, want)
				}
				return
			}
			if err != nil || saslPassword(t, c) != tc.want {
				t.Fatalf("password = %q, %v; want %q", saslPassword(t, c), err, tc.want)
			}
		})
	}
}

// TestValueFormats: a topic's own format wins over value-format, which every other topic gets; keys follow
// the value format unless that is a schema format (then auto), and key-format and topic-key-format override.
func TestValueFormats(t *testing.T) {
	c := defaults()
	c.Kafka.Brokers = []string{"k:9092"}
	c.Topics = []string{"orders", "logs", "raw", "trades", "users"}
	c.DemoTopic = "orders"
	c.Values.Format = "base64"
	c.Values.TopicFormats = map[string]string{"logs": "text", "raw": "auto", "trades": "avro", "users": "protobuf"}
	c.Values.TopicKeyFormats = map[string]string{"users": "avro"}
	c.Values.Files = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]feed.ValueFormat{
		"orders": {feed.ValueBase64, feed.ValueBase64}, "logs": {feed.ValueText, feed.ValueText},
		"raw": {feed.ValueAuto, feed.ValueAuto}, "trades": {feed.ValueAvro, feed.ValueAuto},
		"users": {feed.ValueProtobuf, feed.ValueAvro},
	}
	for topic, w := range want {
		value, key, err := c.Values.topicFormats(topic)
		if err != nil || value != w[0] || key != w[1] {
			t.Errorf("topic %s: value %v key %v (%v), want %v", topic, value, key, err, w)
		}
	}
	c.Values.KeyFormat = "text"
	if _, key, _ := c.Values.topicFormats("trades"); key != feed.ValueText {
		t.Errorf("key-format text: trades key %v", key)
	}
	c.Values.Files = ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "schema-registry-url or schema-files") {
		t.Errorf("schema formats without a source of schemas: %v", err)
	}
	c.Values.Files, c.Values.Registry.URLs = "x", []string{"http://r:8081"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("registry and files: %v", err)
	}
	c.Values.Files, c.Values.Registry.URLs = "", []string{"r:8081"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "schema-registry-url") {
		t.Errorf("registry URL without a scheme: %v", err)
	}
}
