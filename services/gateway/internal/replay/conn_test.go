package replay

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// cutDialer dials the broker and keeps every connection, so that a test can cut them all, as a broker
// restart, an idle timeout in a load balancer or a reset on the network would.
type cutDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	// resetReads makes the next read on every connection fail with a reset and close it: a request is
	// written, and its answer never comes.
	resetReads atomic.Bool
}

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	rc := &resetConn{Conn: c, d: d}
	d.mu.Lock()
	d.conns = append(d.conns, rc)
	d.mu.Unlock()
	return rc, nil
}

type resetConn struct {
	net.Conn
	d *cutDialer
}

func (c *resetConn) Read(b []byte) (int, error) {
	if c.d.resetReads.CompareAndSwap(true, false) {
		_ = c.Close()
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return c.Conn.Read(b)
}

// cut closes every connection made so far and reports how many there were.
func (d *cutDialer) cut() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.conns)
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
	return n
}

// cutLog returns a one-partition topic holding records "r-0" to "r-19", and a KafkaLog of the test cluster
// whose connections d can cut.
func cutLog(t *testing.T) (topic string, d *cutDialer, l *KafkaLog) {
	t.Helper()
	topic = kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for i := range 20 {
		kafkatest.Produce(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "r-%d", i)})
	}
	d = new(cutDialer)
	l, err := NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.Dialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return topic, d, l
}

// TestFetchAfterConnectionsCut: a fetch whose connection to the broker was cut since the last one is made
// again on a new connection, not reported to the stream as a failed replay (which would end it with
// replay_failed and send the client back to reconnect).
func TestFetchAfterConnectionsCut(t *testing.T) {
	topic, d, l := cutLog(t)
	for round := range 3 {
		recs, next, err := l.Fetch(t.Context(), topic, 0, 5)
		if err != nil {
			t.Fatalf("round %d: fetch: %v", round, err)
		}
		if len(recs) != 15 || string(recs[0].Value) != "r-5" || next != 20 {
			t.Fatalf("round %d: fetch gave %d records from %q, next %d; want 15 from r-5, next 20", round, len(recs), recs[0].Value, next)
		}
		if n := d.cut(); n == 0 {
			t.Fatalf("round %d: no connection to cut", round)
		}
	}
}

// TestFetchAfterReset: a fetch whose answer is lost to a reset after the request went out is sent again on a
// new connection (a fetch changes nothing on the broker), rather than failing the stream's replay.
func TestFetchAfterReset(t *testing.T) {
	topic, d, l := cutLog(t)
	if _, _, err := l.Fetch(t.Context(), topic, 0, 0); err != nil { // connections and metadata in place
		t.Fatal(err)
	}
	d.resetReads.Store(true)
	recs, next, err := l.Fetch(t.Context(), topic, 0, 5)
	if err != nil {
		t.Fatalf("fetch after a reset: %v", err)
	}
	if d.resetReads.Load() {
		t.Fatal("no read was reset: the test tests nothing")
	}
	if len(recs) != 15 || string(recs[0].Value) != "r-5" || next != 20 {
		t.Fatalf("fetch gave %d records, next %d; want 15 from r-5, next 20", len(recs), next)
	}
}
