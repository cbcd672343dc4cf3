package checkpoint

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestEnsureTopicRetention (real Kafka): a position topic the gateway creates keeps checkpoints as long as
// the longest finite retention of its data topics; one that exists is left as it is, and the data topics
// that keep records longer than its checkpoints are named. A data topic that does not exist yet is left out.
func TestEnsureTopicRetention(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	ret := func(ms int64) map[string]*string {
		return map[string]*string{"retention.ms": kadm.StringPtr(strconv.FormatInt(ms, 10))}
	}
	week := kafkatest.NewTopic(t, 1, ret(7*day))
	month := kafkatest.NewTopic(t, 1, ret(30*day))
	forever := kafkatest.NewTopic(t, 1, ret(-1))
	missing := kafkatest.TopicName(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ensure := func(pt string, data ...string) (int64, map[string]int64) {
		t.Helper()
		w, err := NewWriter(pt, "test", nil, kgo.SeedBrokers(kafkatest.Brokers(t)...))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, longer, err := w.EnsureTopic(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		return r, longer
	}

	created := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopics(context.Background(), created) })
	r, longer := ensure(created, week, month, forever, missing)
	if r != 30*day {
		t.Fatalf("created with retention.ms %d, want the longest finite one, %d", r, 30*day)
	}
	if len(longer) != 1 || longer[forever] != -1 {
		t.Fatalf("topics keeping records longer: %v, want only %s (forever)", longer, forever)
	}

	existing := kafkatest.NewTopic(t, 1, ret(day))
	r, longer = ensure(existing, week, month)
	if r != day || len(longer) != 2 || longer[week] != 7*day || longer[month] != 30*day {
		t.Fatalf("existing topic: retention %d, longer %v; want %d left as it was, and both data topics", r, longer, day)
	}
}
