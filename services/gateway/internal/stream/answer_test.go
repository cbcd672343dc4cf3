package stream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

var errKafkaDown = errors.New("kafka down")

// TestEveryRequestAnswered: a stream whose first Kafka call fails or hangs (offsets by time for from=<time>,
// the watermarks of a resume the ring cannot serve) gets its status line, the SSE headers and "retry:"
// before that call, and then, when the call fails, the end of its body, which an EventSource retries. Before,
// the writer pool closed such a connection without a status line (a proxy's 502, which an EventSource never
// retries), and a stream on its own goroutine answered 200 with an empty body. Both sinks.
func TestEveryRequestAnswered(t *testing.T) {
	cases := []struct {
		name   string
		query  string
		lastID string
		// hang makes the Kafka call block until the request ends instead of failing.
		hang bool
	}{
		{name: "from time fails", query: "?from=2020-01-01T00:00:00Z"},
		{name: "resume from kafka fails", lastID: "v1:0-5"},
		{name: "from time hangs", query: "?from=2020-01-01T00:00:00Z", hang: true},
		{name: "resume from kafka hangs", lastID: "v1:0-5", hang: true},
	}
	for _, writers := range []int{0, 2} {
		for _, tc := range cases {
			t.Run(tc.name+sinkName(writers), func(t *testing.T) {
				kc := memlog.New()
				kc.CreateTopic("t", 1)
				for range 50 {
					produce(kc, "t", 0, "old") // before the pod starts, with no prefill: not in its ring
				}
				pd := startPod(t, kc, "t", podOpts{writers: writers, feed: func(c *feed.Config) { c.Prefill = 0 }})
				pd.waitReady(t)
				kafka := func(ctx context.Context) error {
					if tc.hang {
						<-ctx.Done()
						return ctx.Err()
					}
					return errKafkaDown
				}
				pd.topic.Watermarks = func(ctx context.Context, _ time.Duration) (map[int32]feed.Watermarks, error) {
					return nil, kafka(ctx)
				}
				pd.topic.OffsetsAfter = func(ctx context.Context, _ time.Time) (map[int32]int64, error) {
					return nil, kafka(ctx)
				}
				body := openRaw(t, pd, tc.query, tc.lastID)
				if line := readLine(t, body); !strings.HasPrefix(line, "retry: ") {
					t.Fatalf("first line %q, want the retry line", line)
				}
				if tc.hang {
					return // answered while Kafka hangs
				}
				rest, err := io.ReadAll(body)
				if err != nil {
					t.Fatalf("the body did not end cleanly after the failure: %v (read %q)", err, rest)
				}
			})
		}
	}
}

// sinkName names the path a stream is served by.
func sinkName(writers int) string {
	if writers > 0 {
		return " pool"
	}
	return " goroutine"
}

// openRaw opens a stream of the pod and checks its status line and headers; it returns the body, closed when
// the test ends.
func openRaw(t *testing.T, pd *pod, query, lastID string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, pd.hs.URL+"/"+query, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by the cleanup below
		got <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no response head within 5 s")
	}
	if a.err != nil {
		t.Fatalf("no answer: %v", a.err)
	}
	t.Cleanup(func() { _ = a.resp.Body.Close() })
	if a.resp.StatusCode != http.StatusOK || a.resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answer %d %q, want 200 text/event-stream", a.resp.StatusCode, a.resp.Header.Get("Content-Type"))
	}
	return bufio.NewReader(a.resp.Body)
}

// readLine reads one line of body, failing t after 5 s.
func readLine(t *testing.T, body *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := body.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(5 * time.Second):
		t.Fatal("no line within 5 s")
		return ""
	}
}

// TestResyncLargestOffset: an id naming the largest offset is ahead of every partition, and its resync says
// so with the largest offset as the one requested, not with the overflow of the one after it (a negative
// number).
func TestResyncLargestOffset(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	produce(kc, "t", 0, "a")
	pd := startPod(t, kc, "t", podOpts{})
	pd.waitReady(t)
	c := pd.open(t, "", "v1:0-9223372036854775807")
	d := resyncData(t, c.next(t))
	if d.Reason != ResyncAhead || len(d.Partitions) != 1 || d.Partitions[0].Requested != math.MaxInt64 {
		t.Fatalf("resync %+v, want ahead with requested %d", d, int64(math.MaxInt64))
	}
}

// TestResolveKeepsClientAlive: a stream whose compact id waits to be resolved (its checkpoint read from
// Kafka, or a turn to read it) writes keep-alives meanwhile, then tells the client what the resolver found.
func TestResolveKeepsClientAlive(t *testing.T) {
	for _, writers := range []int{0, 2} {
		t.Run(sinkName(writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 1)
			pd := startPod(t, kc, "t", podOpts{writers: writers})
			pd.waitReady(t)
			release := make(chan struct{})
			pd.topic.Resolve = func(ctx context.Context, _ string, _ [16]byte) (position.Vector, error) {
				select {
				case <-release:
					return position.Vector{}, checkpoint.ErrInvalid
				case <-ctx.Done():
					return position.Vector{}, ctx.Err()
				}
			}
			c := pd.open(t, "?heartbeat=100", "v2:AAA")
			waitUntil(t, "keep-alives while the id is resolved", func() bool { return c.keepAlives() >= 2 })
			close(release)
			if d := resyncData(t, c.next(t)); d.Reason != ResyncInvalidID {
				t.Fatalf("resync %+v, want invalid-id", d)
			}
		})
	}
}
