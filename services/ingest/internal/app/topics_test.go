package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// TestMissingTopicShowsInReadyzAndSources: a source whose destination topic does not exist (create-topics
// off) makes /readyz answer 503 naming the source and the topic, and /sources shows the state
// topic-missing with the error; once the topic exists, /readyz is 200 again. A source that turns
// create-topics on for itself gets its topic created with its partition count.
func TestMissingTopicShowsInReadyzAndSources(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	up := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 3, Hold: true}))
	good := kafkatest.NewTopic(t, 1, nil)
	missing, made, cpTopic := kafkatest.TopicName(t), kafkatest.TopicName(t), kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopics(context.Background(), cpTopic, missing, made) })
	cfg, err := Load([]string{"--config", writeConfig(t, `
commit-interval: 20ms
backoff-min: 50ms
backoff-max: 500ms
sources:
  - {name: good, url: `+up.URL+`/a, topic: `+good+`}
  - {name: lost, url: `+up.URL+`/b, topic: `+missing+`}
  - {name: made, url: `+up.URL+`/c, topic: `+made+`, create-topics: true, create-topics-partitions: 2}
`), "--listen", "127.0.0.1:0", "--checkpoint-topic", cpTopic},
		env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + a.Addr().String()

	var body string
	kafkatest.WaitFor(t, 30*time.Second, "readyz 503 naming the missing topic", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, missing)
	})
	if !strings.Contains(body, "lost") || !strings.Contains(body, "create-topics") {
		t.Errorf("readyz %s: want the source name and the setting", body)
	}
	var st struct {
		Sources []struct {
			Name, State string
			LastError   string `json:"last_error"`
		}
	}
	_, body = get(t, base+"/sources")
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Sources) != 3 {
		t.Fatalf("/sources %s: %v", body, err)
	}
	if s := st.Sources[1]; s.State != "topic-missing" || !strings.Contains(s.LastError, missing) {
		t.Errorf("/sources entry of the source without topic: %+v", s)
	}
	for _, i := range []int{0, 2} {
		if s := st.Sources[i]; s.State == "topic-missing" {
			t.Errorf("/sources entry of a source with a topic: %+v", s)
		}
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic of the create-topics source", func() bool {
		md, err := kafkatest.Admin(t).Metadata(kafkatest.Context(t), made)
		return err == nil && md.Topics[made].Err == nil
	})
	if md, err := kafkatest.Admin(t).Metadata(kafkatest.Context(t), made); err != nil || len(md.Topics[made].Partitions) != 2 {
		t.Errorf("topic of the create-topics source: %v %+v, want 2 partitions", err, md.Topics[made])
	}

	kafkatest.CreateTopic(t, missing, 1, nil)
	kafkatest.WaitFor(t, 30*time.Second, "readyz 200 once the topic exists", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == http.StatusOK
	})
	if recs := readTopic(t, missing, 3); len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
}

func TestLoadCreateTopics(t *testing.T) {
	file := `
create-topics-partitions: 6
sources:
  - {name: a, url: "http://up/a", topic: a}
  - {name: b, url: "http://up/b", topic: b, create-topics: false}
  - {name: c, url: "http://up/c", topic: c, create-topics: true, create-topics-partitions: 2, create-topics-replication-factor: 1}
`
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want [3]string // per source: "enabled/partitions/replication factor"
	}{
		{"default off", nil, nil, [3]string{"false/6/0", "false/6/0", "true/2/1"}},
		{"flag on", []string{"--create-topics", "--create-topics-replication-factor", "3"}, nil, [3]string{"true/6/3", "false/6/3", "true/2/1"}},
		{"env on", nil, map[string]string{"SSEGATE_INGEST_CREATE_TOPICS": "true"}, [3]string{"true/6/0", "false/6/0", "true/2/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"KAFKA_BROKERS": "k:9092"}
			for k, v := range tt.env {
				e[k] = v
			}
			c, err := Load(append([]string{"--config", writeConfig(t, file)}, tt.args...), env(e), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				tc := c.Sources[i].CreateTopic
				if got := fmt.Sprintf("%v/%d/%d", tc.Enabled, tc.Partitions, tc.ReplicationFactor); got != want {
					t.Errorf("source %d: %s, want %s", i, got, want)
				}
			}
		})
	}
	c, err := Load([]string{"--url", "http://up/x", "--topic", "x", "--create-topics"}, env(map[string]string{"KAFKA_BROKERS": "k:9092"}), io.Discard)
	if err != nil || !c.Sources[0].CreateTopic.Enabled {
		t.Errorf("--url source with --create-topics: %v %+v", err, c.Sources)
	}
}

func TestLoadCreateTopicsErrors(t *testing.T) {
	base := "sources:\n  - name: s1\n    url: http://up/stream\n    topic: out\n"
	tests := []struct {
		name, file string
		args       []string
		want       string
	}{
		{"negative partitions", base, []string{"--create-topics-partitions", "-1"}, "setting create-topics-partitions (SSEGATE_INGEST_CREATE_TOPICS_PARTITIONS)"},
		{"replication factor too large", base, []string{"--create-topics-replication-factor", "40000"}, "setting create-topics-replication-factor"},
		{"source create-topics not a bool", base + "    create-topics: maybe\n", nil, `"s1" (sources[0]): setting create-topics`},
		{"source partitions not a number", base + "    create-topics-partitions: many\n", nil, `"s1" (sources[0]): setting create-topics-partitions`},
		{"source negative replication factor", base + "    create-topics-replication-factor: -2\n", nil, "setting create-topics-replication-factor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(append([]string{"--config", writeConfig(t, tt.file)}, tt.args...), env(map[string]string{"KAFKA_BROKERS": "k:9092"}), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
