package source

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// logRecorder is a slog.Handler that keeps every record, for tests that check what was logged.
type logRecorder struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newLogRecorder() logRecorder { return logRecorder{mu: &sync.Mutex{}, recs: &[]slog.Record{}} }

func (l logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logRecorder) WithGroup(string) slog.Handler            { return l }

func (l logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	*l.recs = append(*l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}

// delays returns the "delay" attribute of every record whose "reason" attribute is reason.
func (l logRecorder) delays(reason string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, r := range *l.recs {
		var rsn, delay string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "reason":
				rsn = a.Value.String()
			case "delay":
				delay = a.Value.String()
			}
			return true
		})
		if d, err := time.ParseDuration(delay); err == nil && rsn == reason {
			out = append(out, d)
		}
	}
	return out
}

// TestMissingTopicIsReported: a destination topic that does not exist (and create-topics off) is reported
// as such, naming the topic, with a backoff that grows and without connecting to the upstream; once the
// topic exists the source runs and writes every event once.
func TestMissingTopicIsReported(t *testing.T) {
	srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 3, Hold: true}))
	rec := newLogRecorder()
	opt := testOptions(t)
	opt.BackoffMin, opt.BackoffMax = 20*time.Millisecond, 5*time.Second
	opt.Logger = slog.New(rec)
	topic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), topic) })
	r := start(t, Spec{Name: "missing", URL: srv.URL, Topic: topic, Format: FormatRaw}, opt)

	checkFor(t, 30*time.Second, "the state topic-missing", func() bool {
		st := r.src.Status()
		return st.State == StateTopicMissing && st.LastReason == ReasonTopicMissing.String()
	})
	if st := r.src.Status(); !strings.Contains(st.LastError, topic) || !strings.Contains(st.LastError, "create-topics") {
		t.Errorf("last error %q does not name the topic and the setting", st.LastError)
	}
	checkFor(t, 30*time.Second, "5 retries", func() bool { return len(rec.delays("topic-missing")) >= 5 })
	ds := rec.delays("topic-missing")
	for i := 1; i < len(ds); i++ {
		if ds[i] < ds[i-1] && ds[i-1] < opt.BackoffMax {
			t.Errorf("delays %v: the backoff shrank at %d", ds, i)
		}
	}
	if ds[4] < 8*opt.BackoffMin {
		t.Errorf("delays %v: the backoff does not grow", ds)
	}
	if n := srv.Connections(); n != 0 {
		t.Errorf("%d connections to the upstream while the topic is missing, want 0", n)
	}

	kafkatest.CreateTopic(t, topic, 1, nil)
	checkFor(t, 60*time.Second, "3 records", func() bool { return len(readCommitted(t, topic)) >= 3 })
	if got := values(readCommitted(t, topic)); !slices.Equal(got, wantLog(1, 3)) {
		t.Fatalf("records %q", got)
	}
}

func TestCreateTopics(t *testing.T) {
	tests := []struct {
		name       string
		create     TopicCreation
		deadLetter bool // the destination exists; the dead-letter topic is the missing one
		partitions int  // of the created topic; 0 means it must not be created
		errHas     string
	}{
		{name: "created with the given partitions", create: TopicCreation{Enabled: true, Partitions: 3, ReplicationFactor: 1}, partitions: 3},
		{name: "created with the broker defaults", create: TopicCreation{Enabled: true}, partitions: 1},
		{name: "creation fails", create: TopicCreation{Enabled: true, ReplicationFactor: 2}, errHas: "could not be created"},
		{name: "dead-letter topic missing", deadLetter: true, errHas: "dead-letter topic"},
		{name: "dead-letter topic created", create: TopicCreation{Enabled: true, Partitions: 2}, deadLetter: true, partitions: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 3, Hold: true}))
			opt := testOptions(t)
			missing := kafkatest.TopicName(t)
			t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), missing) })
			spec := Spec{Name: "create", URL: srv.URL, Topic: missing, Format: FormatRaw, CreateTopic: tt.create}
			if tt.deadLetter {
				spec.Topic, spec.CreateTopic = kafkatest.NewTopic(t, 1, nil), TopicCreation{}
				opt.DeadLetterTopic, opt.CreateDeadLetterTopic = missing, tt.create
			}
			r := start(t, spec, opt)
			if tt.errHas != "" {
				checkFor(t, 30*time.Second, "the state topic-missing", func() bool { return r.src.Status().State == StateTopicMissing })
				if st := r.src.Status(); !strings.Contains(st.LastError, tt.errHas) || !strings.Contains(st.LastError, missing) {
					t.Errorf("last error %q, want it to name %s and say %q", st.LastError, missing, tt.errHas)
				}
				if n := srv.Connections(); n != 0 {
					t.Errorf("%d connections to the upstream, want 0", n)
				}
				return
			}
			checkFor(t, 30*time.Second, "the topic to be created", func() bool {
				md, err := kafkatest.Admin(t).Metadata(kafkatest.Context(t), missing)
				return err == nil && md.Topics[missing].Err == nil
			})
			md, err := kafkatest.Admin(t).Metadata(kafkatest.Context(t), missing)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(md.Topics[missing].Partitions); n != tt.partitions {
				t.Errorf("created topic has %d partitions, want %d", n, tt.partitions)
			}
			var got []string
			checkFor(t, 30*time.Second, "3 records", func() bool {
				got = nil
				for _, recs := range kafkatest.ReadAll(t, spec.Topic) {
					got = append(got, values(recs)...)
				}
				return len(got) >= 3
			})
			slices.Sort(got)
			if !slices.Equal(got, wantLog(1, 3)) {
				t.Errorf("records %q", got)
			}
		})
	}
}

// TestTopicDeletedWhileRunning: a destination topic that disappears while the source streams is reported
// as missing (not as a raw Kafka error), and the source carries on once it exists again.
func TestTopicDeletedWhileRunning(t *testing.T) {
	srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Every: 20 * time.Millisecond}))
	topic := kafkatest.NewTopic(t, 1, nil)
	opt := testOptions(t)
	opt.TransactionTimeout = 3 * time.Second // also how long a produce to the vanished topic is retried
	r := start(t, Spec{Name: "deleted", URL: srv.URL, Topic: topic, Format: FormatRaw}, opt)
	checkFor(t, 30*time.Second, "some records", func() bool { return r.src.Stats().Commits.Load() >= 2 })
	if _, err := kafkatest.Admin(t).DeleteTopic(kafkatest.Context(t), topic); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 60*time.Second, "the state topic-missing", func() bool { return r.src.Status().State == StateTopicMissing })
	if st := r.src.Status(); !strings.Contains(st.LastError, topic) {
		t.Errorf("last error %q does not name the topic", st.LastError)
	}
	kafkatest.CreateTopic(t, topic, 1, nil)
	commits := r.src.Stats().Commits.Load()
	checkFor(t, 60*time.Second, "commits again", func() bool { return r.src.Stats().Commits.Load() > commits })
}
