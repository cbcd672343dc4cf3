package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// The black-box tests of the defects a review found from outside, against the built gateway binary: every
// request gets an answer whatever Kafka does, a client that leaves gives its slot back at once, and random
// compact ids cost the gateway nothing it cannot afford. (Retention passing the gateway, the redirects of
// ingest and the proxies in front have tests of their own: the feed's and stream's seam tests, ingest's
// source tests, the nginx tier.)

// blackBoxGateway starts the gateway binary on free loopback ports with args and returns the clients' and
// the admin addresses, once the admin port answers.
func blackBoxGateway(t *testing.T, brokers string, args ...string) (clients, admin string) {
	t.Helper()
	clients, admin = proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "gateway", gatewayBinary(t), brokers, append([]string{"--listen", clients, "--admin-listen", admin}, args...)...)
	kafkatest.WaitFor(t, 30*time.Second, "the gateway's admin port", func() bool {
		resp, err := http.Get("http://" + admin + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return clients, admin
}

// openRaw sends a stream request on a connection of its own and returns the status line and the connection,
// reading with a deadline of within.
func openRaw(t *testing.T, addr, target, lastID string, within time.Duration) (string, *bufio.Reader, net.Conn) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	req := "GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n"
	if lastID != "" {
		req += "Last-Event-ID: " + lastID + "\r\n"
	}
	if _, err := io.WriteString(nc, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(within))
	br := bufio.NewReader(nc)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("GET %s: no status line within %v: %v", target, within, err)
	}
	return strings.TrimSpace(status), br, nc
}

// bodyStart skips a response's headers and returns its body's first line (a chunked body: the chunk size line
// comes first on the writer pool; net/http's too).
func bodyStart(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		if line == "\r\n" {
			break
		}
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the body: %v", err)
		}
		if strings.HasPrefix(line, "retry:") || strings.HasPrefix(line, "id:") || strings.HasPrefix(line, "event:") {
			return strings.TrimSpace(line)
		}
	}
}

// TestBlackBoxAnswersWhenKafkaFails: every kind of stream request (a new stream, a start by time, a resume
// the ring cannot serve, a compact id) gets 200, the SSE headers and its retry: line within a second, on the
// writer pool and on a goroutine per stream, when Kafka cannot answer what the stream asks: no Kafka at all,
// or a topic deleted behind the gateway's back (its next metadata refresh is an hour away, so it still serves
// the topic and its watermark and time look-ups fail). Before, the writer pool closed a stream whose first
// Kafka call failed without a status line (a proxy's 502, which an EventSource never retries).
func TestBlackBoxAnswersWhenKafkaFails(t *testing.T) {
	requests := []struct{ target, lastID string }{
		{"/streams/%s", ""},
		{"/streams/%s?from=2020-01-01T00:00:00Z", ""},
		{"/streams/%s", "v1:0-5"},
		{"/streams/%s", "v2:AAA"},
	}
	check := func(t *testing.T, clients, topic string) {
		t.Helper()
		for _, req := range requests {
			target := fmt.Sprintf(req.target, topic)
			status, br, _ := openRaw(t, clients, target, req.lastID, time.Second)
			if status != "HTTP/1.1 200 OK" {
				t.Fatalf("GET %s (Last-Event-ID %q): %s, want 200", target, req.lastID, status)
			}
			if first := bodyStart(t, br); !strings.HasPrefix(first, "retry: ") {
				t.Fatalf("GET %s (Last-Event-ID %q): body starts %q, want the retry line", target, req.lastID, first)
			}
		}
	}
	for _, writers := range []string{"2", "0"} {
		t.Run("no-kafka-writers-"+writers, func(t *testing.T) {
			nobody := proctest.FreeAddr(t) // no broker listens there
			clients, _ := blackBoxGateway(t, nobody, "--topics", "orders", "--writers", writers)
			check(t, clients, "orders")
		})
		t.Run("topic-deleted-writers-"+writers, func(t *testing.T) {
			brokers := strings.Join(kafkatest.Brokers(t), ",")
			topic := kafkatest.NewTopic(t, 1, nil)
			cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
			for i := range 50 {
				kafkatest.Produce(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)})
			}
			clients, admin := blackBoxGateway(t, brokers, "--topics", topic, "--writers", writers,
				"--prefill", "0", "--metadata-interval", "1h")
			waitReady(t, "gateway", "http://"+admin+"/readyz")
			if _, err := kafkatest.Admin(t).DeleteTopic(t.Context(), topic); err != nil {
				t.Fatal(err)
			}
			check(t, clients, topic)
		})
	}
}

// TestBlackBoxSlotsComeBack: a page that closes its two streams and opens two new ones right away, against a
// gateway allowing two streams per address with no heartbeat, gets them within a second: the slots of the
// streams it closed are given back as it closes them. Before, a stream the writer pool served held its slot until a write
// failed (with heartbeat=0, never), and the reopened streams got 429, which an EventSource treats as final.
func TestBlackBoxSlotsComeBack(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 1, nil)
	clients, admin := blackBoxGateway(t, brokers, "--topics", topic, "--max-streams-per-ip", "2", "--heartbeat", "0")
	waitReady(t, "gateway", "http://"+admin+"/readyz")
	for round := range 3 {
		var conns []net.Conn
		for range 2 {
			// The gateway learns of a close as it happens, not at once: a page reopening in the same
			// millisecond may be refused; within a second it must not be.
			deadline := time.Now().Add(time.Second)
			for {
				status, _, nc := openRaw(t, clients, "/streams/"+topic, "", 2*time.Second)
				if status == "HTTP/1.1 200 OK" {
					conns = append(conns, nc)
					break
				}
				_ = nc.Close()
				if time.Now().After(deadline) {
					t.Fatalf("round %d: a stream a second after the page closed its earlier ones: %s, want 200", round, status)
				}
				time.Sleep(20 * time.Millisecond) // as an impatient page retrying
			}
		}
		kafkatest.WaitFor(t, 5*time.Second, "both streams parked in the writer pool", func() bool {
			return metricSum(t, admin, "ssegate_connections_parked") == 2
		})
		for _, nc := range conns {
			_ = nc.Close()
		}
	}
}

// TestBlackBoxRandomCompactIDs: a burst of random compact ids, as anyone may send to a public topic, each gets
// an invalid-id resync at once from a gateway that has no position topic (it reads nothing from Kafka for
// them), and the gateway serves ordinary streams all along.
func TestBlackBoxRandomCompactIDs(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 1, nil)
	clients, admin := blackBoxGateway(t, brokers, "--topics", topic)
	waitReady(t, "gateway", "http://"+admin+"/readyz")
	const n = 100
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for range n {
		var b [24]byte
		_, _ = rand.Read(b[:])
		id := "v2:" + base64.RawURLEncoding.EncodeToString(b[:])
		wg.Go(func() {
			resp, err := http.Get("http://" + clients + "/streams/" + topic + "?lastEventId=" + id)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer func() { _ = resp.Body.Close() }()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					if !strings.Contains(sc.Text(), `"reason":"invalid-id"`) {
						errs <- "id " + id + ": " + sc.Text()
					}
					return
				}
			}
			errs <- "id " + id + ": the stream ended without a resync"
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("%d random compact ids took %v to answer", n, took)
	}
	status, br, _ := openRaw(t, clients, "/streams/"+topic, "", 2*time.Second)
	if status != "HTTP/1.1 200 OK" || !strings.HasPrefix(bodyStart(t, br), "retry: ") {
		t.Fatalf("an ordinary stream after the burst: %s", status)
	}
}

// metricSum returns the sum of a metric's series on the admin port.
func metricSum(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
