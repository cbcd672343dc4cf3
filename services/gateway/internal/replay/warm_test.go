package replay

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// requestCounter counts the metadata and fetch requests and the connections of a client.
type requestCounter struct {
	metadata, fetches, dials atomic.Int64
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	switch key {
	case kmsg.Metadata.Int16():
		c.metadata.Add(1)
	case kmsg.Fetch.Int16():
		c.fetches.Add(1)
	}
}

func (c *requestCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.dials.Add(1)
	}
}

// TestWarmResumeFetchesAtOnce: after Warm, the first fetches of every partition of a topic (a resume's) ask
// for no metadata and dial no connection: they are one round trip each. Without it, the first resume of a
// topic pays both on each fetch client.
func TestWarmResumeFetchesAtOnce(t *testing.T) {
	topic := kafkatest.NewTopic(t, 8, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(8) {
		kafkatest.Produce(t, cl, &kgo.Record{Partition: p, Value: []byte("x")})
	}
	for _, warm := range []bool{false, true} {
		var c requestCounter
		l, err := NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.WithHooks(&c))
		if err != nil {
			t.Fatal(err)
		}
		if warm {
			l.Warm(t.Context(), []string{topic})
		}
		c.metadata.Store(0)
		c.dials.Store(0)
		for p := range int32(8) {
			if _, _, err := l.Fetch(t.Context(), topic, p, 0); err != nil {
				t.Fatal(err)
			}
		}
		m, d := c.metadata.Load(), c.dials.Load()
		l.Close()
		switch {
		case warm && (m != 0 || d != 0):
			t.Errorf("after Warm, the first fetches asked for metadata %d times and dialed %d connections, want 0", m, d)
		case !warm && m == 0:
			t.Errorf("without Warm the first fetches asked for no metadata: the test cannot tell")
		}
	}
}
