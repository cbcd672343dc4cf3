package app

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

func TestLoadFlagSource(t *testing.T) {
	base := map[string]string{"KAFKA_BROKERS": "k:9092", "TOK": "s3cret"}
	tests := []struct {
		name string
		args []string
		want source.Spec
	}{
		{
			name: "minimal, name from host and path",
			args: []string{"--url", "http://127.0.0.1:9999/streams/ticks?token=x", "--topic", "t"},
			want: source.Spec{Name: "127.0.0.1-9999-streams-ticks", URL: "http://127.0.0.1:9999/streams/ticks?token=x", Topic: "t"},
		},
		{
			name: "host only",
			args: []string{"--url", "https://stream.example.com/", "--topic", "t"},
			want: source.Spec{Name: "stream.example.com", URL: "https://stream.example.com/", Topic: "t"},
		},
		{
			name: "every flag",
			args: []string{
				"--url", "https://api.example.com/v2/feed", "--topic", "feed.events", "--name", "feed",
				"--format", "cloudevents", "--key", "json:user", "--header", "User-Agent: ssegate",
				"--header", "Accept-Language: en, fr", "--bearer-token-env", "TOK",
			},
			want: source.Spec{
				Name: "feed", URL: "https://api.example.com/v2/feed", Topic: "feed.events",
				Format: source.FormatCloudEvents, Key: source.Key{Kind: source.KeyJSON, Field: "user"},
				Header: http.Header{"User-Agent": {"ssegate"}, "Accept-Language": {"en, fr"}},
				Auth:   source.Auth{Kind: source.AuthBearer, Secret: source.SecretValue("s3cret")},
			},
		},
		{
			name: "raw, key id, repeated header",
			args: []string{"--url", "http://h/x", "--topic", "t", "--format", "raw", "--key", "id", "--header", "X-A: 1", "--header", "x-a: 2"},
			want: source.Spec{
				Name: "h-x", URL: "http://h/x", Topic: "t", Format: source.FormatRaw, Key: source.Key{Kind: source.KeyID},
				Header: http.Header{"X-A": {"1", "2"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.args, env(base), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Sources) != 1 {
				t.Fatalf("got %d sources, want 1", len(c.Sources))
			}
			if got := c.Sources[0]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("spec\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestLoadFlagSourceErrors(t *testing.T) {
	base := map[string]string{"KAFKA_BROKERS": "k:9092"}
	file := writeConfig(t, "sources:\n  - {name: a, url: http://h/a, topic: t}\n")
	tests := []struct {
		name string
		args []string
		want string // substring of the error
	}{
		{"topic without url", []string{"--topic", "t"}, "invalid flag --url: required"},
		{"ftp url", []string{"--url", "ftp://h/x", "--topic", "t"}, "invalid flag --url: want an http or https URL"},
		{"no host", []string{"--url", "http:///x", "--topic", "t"}, "invalid flag --url"},
		{"missing topic", []string{"--url", "http://h/x"}, "invalid flag --topic"},
		{"bad topic", []string{"--url", "http://h/x", "--topic", "a b"}, "invalid flag --topic"},
		{"bad name", []string{"--url", "http://h/x", "--topic", "t", "--name", "a/b"}, "invalid flag --name"},
		{"bad format", []string{"--url", "http://h/x", "--topic", "t", "--format", "xml"}, "invalid flag --format"},
		{"bad key", []string{"--url", "http://h/x", "--topic", "t", "--key", "json:"}, "invalid flag --key"},
		{"header without colon", []string{"--url", "http://h/x", "--topic", "t", "--header", "X-A"}, "invalid flag --header: want 'Name: value'"},
		{"header name with space", []string{"--url", "http://h/x", "--topic", "t", "--header", "X A: 1"}, "invalid flag --header"},
		{"last-event-id header", []string{"--url", "http://h/x", "--topic", "t", "--header", "Last-Event-ID: 3"}, "invalid flag --header: Last-Event-ID"},
		{
			name: "authorization and bearer",
			args: []string{"--url", "http://h/x", "--topic", "t", "--header", "Authorization: x", "--bearer-token-env", "TOK"},
			want: "invalid flag --header: Authorization",
		},
		{"empty token env", []string{"--url", "http://h/x", "--topic", "t", "--bearer-token-env", "NOPE"}, "invalid flag --bearer-token-env: the environment variable NOPE"},
		{"flag and file", []string{"--config", file, "--url", "http://h/x", "--topic", "t"}, "not both"},
		{"neither", nil, "at least one source is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.args, env(base), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestSourceFlagsAreFlagOnly(t *testing.T) {
	base := map[string]string{"KAFKA_BROKERS": "k:9092", "SSEGATE_INGEST_URL": "http://h/x", "SSEGATE_INGEST_TOPIC": "t"}
	if _, err := Load(nil, env(base), io.Discard); err == nil || !strings.Contains(err.Error(), "at least one source") {
		t.Errorf("environment set a flag source: error %v", err)
	}
	p := writeConfig(t, "url: http://h/x\ntopic: t\n")
	if _, err := Load([]string{"--config", p}, env(base), io.Discard); err == nil || !strings.Contains(err.Error(), `unknown setting "`) {
		t.Errorf("file set a flag source: error %v", err)
	}
}

func TestNameFromURLIsSafe(t *testing.T) {
	for _, u := range []string{"http://h", "http://[::1]:80/a/b", "http://h/" + strings.Repeat("x/", 300), "http://h/%20\u00e9?q=1#f", "http://.../"} {
		c, err := Load([]string{"--url", u, "--topic", "t"}, env(map[string]string{"KAFKA_BROKERS": "k:9092"}), io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if n := c.Sources[0].Name; !sourceName.MatchString(n) {
			t.Errorf("%s: name %q is not a safe source name", u, n)
		}
	}
}

func TestFlagSourceWithSettingsOnlyFile(t *testing.T) {
	p := writeConfig(t, "commit-events: 7\n")
	c, err := Load([]string{"--config", p, "--url", "http://h/x", "--topic", "t"}, env(map[string]string{"KAFKA_BROKERS": "k:9092"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CommitEvents != 7 || len(c.Sources) != 1 || c.Sources[0].Name != "h-x" {
		t.Errorf("commit-events %d, sources %+v: want 7 and one source h-x", c.CommitEvents, c.Sources)
	}
}
