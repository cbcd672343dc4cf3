package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadFullSource(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := writeConfig(t, `
commit-interval: 250ms
dead-letter-topic: ingest-dlq
sources:
  - name: wiki
    url: https://stream.example.com/v2/recentchange
    topic: wiki.changes
    headers:
      User-Agent: ssegate-test
      X-Tenant: acme
    auth:
      type: basic
      username: ann
      password_env: WIKI_PASSWORD
    events: [edit, new]
    key: json:meta
    format: cloudevents
    start: id:1234
  - name: ticker
    url: http://127.0.0.1:9999/ticks
    topic: ticks
    auth: {type: bearer, token_file: `+tokenFile+`}
`)
	c, err := Load([]string{"--config", p, "--commit-events", "50"},
		env(map[string]string{"KAFKA_BROKERS": "k1:9092,k2:9092", "WIKI_PASSWORD": "pw", "SSEGATE_INGEST_COMMIT_INTERVAL": "300ms"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CommitInterval != 300*time.Millisecond || c.CommitEvents != 50 || c.DeadLetterTopic != "ingest-dlq" {
		t.Errorf("settings: interval %v events %d dlq %q (want env over file, flag over default)", c.CommitInterval, c.CommitEvents, c.DeadLetterTopic)
	}
	if len(c.Sources) != 2 {
		t.Fatalf("%d sources", len(c.Sources))
	}
	w := c.Sources[0]
	if w.Name != "wiki" || w.Topic != "wiki.changes" || w.Header.Get("X-Tenant") != "acme" || w.Header.Get("User-Agent") != "ssegate-test" {
		t.Errorf("wiki: %+v", w)
	}
	if w.Key != (source.Key{Kind: source.KeyJSON, Field: "meta"}) || w.Format != source.FormatCloudEvents || !w.StartSet || w.StartID != "1234" {
		t.Errorf("wiki rules: %+v", w)
	}
	if len(w.Events) != 2 || w.Events[0] != "edit" {
		t.Errorf("wiki events %v", w.Events)
	}
	if pw, _ := w.Auth.Secret.Get(); w.Auth.Kind != source.AuthBasic || w.Auth.Username != "ann" || pw != "pw" {
		t.Errorf("wiki auth kind %v user %q", w.Auth.Kind, w.Auth.Username)
	}
	if tok, _ := c.Sources[1].Auth.Secret.Get(); c.Sources[1].Auth.Kind != source.AuthBearer || tok != "tok" {
		t.Errorf("ticker auth %v", c.Sources[1].Auth.Kind)
	}
	if c.Sources[1].Format != source.FormatEnvelope || c.Sources[1].Key.Kind != source.KeyNone || c.Sources[1].StartSet {
		t.Errorf("ticker defaults: %+v", c.Sources[1])
	}
}

func TestLoadErrorsNameSourceAndSetting(t *testing.T) {
	base := "sources:\n  - name: s1\n    url: http://up/stream\n    topic: out\n"
	tests := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string
	}{
		{"no brokers", base, map[string]string{}, nil, "KAFKA_BROKERS"},
		{"no sources", "commit-events: 5\n", nil, nil, "setting sources"},
		{"unknown top-level key", base + "frobnicate: 1\n", nil, nil, `unknown setting "frobnicate"`},
		{"missing name", "sources:\n  - url: http://up\n    topic: out\n", nil, nil, "sources[0]: setting name"},
		{"bad name", "sources:\n  - name: a b\n    url: http://up\n    topic: out\n", nil, nil, `"a b" (sources[0]): setting name`},
		{"duplicate name", base + "  - name: s1\n    url: http://up\n    topic: out\n", nil, nil, `"s1" (sources[1]): setting name`},
		{"bad url", "sources:\n  - name: s1\n    url: ftp://up\n    topic: out\n", nil, nil, `"s1" (sources[0]): setting url`},
		{"bad topic", "sources:\n  - name: s1\n    url: http://up\n    topic: a/b\n", nil, nil, "setting topic"},
		{"unknown source key", base + "    color: red\n", nil, nil, "setting color: unknown setting"},
		{"bad key rule", base + "    key: offset\n", nil, nil, "setting key"},
		{"bad format", base + "    format: avro\n", nil, nil, "setting format"},
		{"bad start", base + "    start: earliest\n", nil, nil, "setting start"},
		{"bad follow-redirects", base + "    follow-redirects: always\n", nil, nil, `setting follow-redirects: "always": want same-origin, any or none`},
		{"follow-redirects not a string", base + "    follow-redirects: true\n", nil, nil, "setting follow-redirects: want a string"},
		{"last-event-id header", base + "    headers: {Last-Event-ID: \"5\"}\n", nil, nil, "setting headers: Last-Event-ID"},
		{"header with LF", base + "    headers: {X-A: \"a\\nb\"}\n", nil, nil, "setting headers"},
		{"auth unknown type", base + "    auth: {type: digest}\n", nil, nil, "setting auth: type"},
		{"basic without secret", base + "    auth: {type: basic, username: u}\n", nil, nil, "password_env or password_file is required"},
		{"secret env unset", base + "    auth: {type: bearer, token_env: NOPE}\n", nil, nil, "NOPE is empty or unset"},
		{"secret file missing", base + "    auth: {type: bearer, token_file: /nonexistent/tok}\n", nil, nil, "setting auth: token_file"},
		{"both secret forms", base + "    auth: {type: bearer, token_env: T, token_file: /x}\n", nil, nil, "not both"},
		{"authorization twice", base + "    headers: {Authorization: x}\n    auth: {type: bearer, token_env: T}\n", map[string]string{"T": "t"}, nil, "Authorization is set by auth"},
		{"zero commit interval", base, nil, []string{"--commit-interval", "0s"}, "setting commit-interval (SSEGATE_INGEST_COMMIT_INTERVAL)"},
		{"backoff max below min", base, nil, []string{"--backoff-min", "2s", "--backoff-max", "1s"}, "setting backoff-max"},
		{"bad dead-letter topic", base, nil, []string{"--dead-letter-topic", "a b"}, "setting dead-letter-topic"},
		{"bad redis addr", base, map[string]string{"REDIS_ADDR": "nohost"}, nil, "setting redis-addr (REDIS_ADDR"},
		{"short lease", base, nil, []string{"--lease-duration", "10ms"}, "setting lease-duration"},
		{"negative redis db", base + "redis-db: -1\n", nil, nil, "setting redis-db"},
		{"zero buffer bytes", base, nil, []string{"--buffer-bytes", "0"}, "setting buffer-bytes (SSEGATE_INGEST_BUFFER_BYTES)"},
		{"bad buffer bytes", base, nil, []string{"--buffer-bytes", "lots"}, "buffer-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env
			if e == nil {
				e = map[string]string{}
			}
			if _, ok := e["KAFKA_BROKERS"]; !ok && tt.name != "no brokers" {
				e["KAFKA_BROKERS"] = "k:9092"
			}
			args := append([]string{"--config", writeConfig(t, tt.file)}, tt.args...)
			_, err := Load(args, env(e), io.Discard)
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", tt.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line mentioning %q", msg, tt.want)
			}
		})
	}
}

func TestLoadFollowRedirects(t *testing.T) {
	tests := []struct {
		name, line string
		want       source.RedirectPolicy
	}{
		{"absent means same-origin", "", source.RedirectSameOrigin},
		{"same-origin", "    follow-redirects: same-origin\n", source.RedirectSameOrigin},
		{"any", "    follow-redirects: any\n", source.RedirectAny},
		{"none", "    follow-redirects: none\n", source.RedirectNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, "sources:\n  - name: s1\n    url: http://up/stream\n    topic: out\n"+tt.line)
			c, err := Load([]string{"--config", p}, env(map[string]string{"KAFKA_BROKERS": "k:9092"}), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Sources[0].Redirects; got != tt.want {
				t.Fatalf("follow-redirects: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSecretsAreNotPrinted(t *testing.T) {
	p := writeConfig(t, "sources:\n  - name: s\n    url: http://up\n    topic: out\n    auth: {type: bearer, token_env: TOK}\n")
	c, err := Load([]string{"--config", p}, env(map[string]string{
		"KAFKA_BROKERS": "k:9092", "TOK": "very-secret", "REDIS_ADDR": "r:6379", "SSEGATE_INGEST_REDIS_PASSWORD": "very-secret",
		"SSEGATE_INGEST_HTTP_TOKEN": "very-secret-http-token",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"%v", "%+v", "%#v"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, "very-secret") {
			t.Fatalf("%s of the config shows the token", f)
		}
	}
}

func TestLoadRedisSettings(t *testing.T) {
	p := writeConfig(t, "lease-duration: 3s\nredis-db: 2\nsources:\n  - name: s\n    url: http://up\n    topic: out\n")
	c, err := Load([]string{"--config", p, "--lease-key-prefix", "x:"}, env(map[string]string{
		"KAFKA_BROKERS": "k:9092", "REDIS_ADDR": "r:6379",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.Addr != "r:6379" || c.Redis.DB != 2 || c.LeaseDuration != 3*time.Second || c.LeaseKeyPrefix != "x:" {
		t.Fatalf("redis settings %v lease %v %q", c.Redis, c.LeaseDuration, c.LeaseKeyPrefix)
	}
	c, err = Load([]string{"--config", p}, env(map[string]string{"KAFKA_BROKERS": "k:9092"}), io.Discard)
	if err != nil || c.Redis.Addr != "" || c.LeaseKeyPrefix != "ssegate:ingest:lease:" {
		t.Fatalf("without REDIS_ADDR: %v %v %q", err, c.Redis, c.LeaseKeyPrefix)
	}
}

func TestLoadBufferBytes(t *testing.T) {
	src := "sources:\n  - name: s\n    url: http://up\n    topic: out\n"
	tests := []struct {
		name, file string
		env        map[string]string
		want       int64
	}{
		{"default", src, nil, 4 << 20},
		{"file", "buffer-bytes: 512KiB\n" + src, nil, 512 << 10},
		{"env over file", "buffer-bytes: 512KiB\n" + src, map[string]string{"SSEGATE_INGEST_BUFFER_BYTES": "1MiB"}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"KAFKA_BROKERS": "k:9092"}
			for k, v := range tt.env {
				e[k] = v
			}
			c, err := Load([]string{"--config", writeConfig(t, tt.file)}, env(e), io.Discard)
			if err != nil || c.BufferBytes != tt.want {
				t.Fatalf("buffer-bytes %d, %v; want %d", c.BufferBytes, err, tt.want)
			}
		})
	}
}
