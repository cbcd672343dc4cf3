//go:build linux

package stream

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestPoolNoticesPeerLeaving: a client that closes a stream the writer pool took over is noticed at once,
// whatever the stream is doing and with no heartbeat due: waiting for a configured topic that does not
// exist yet, waiting on a Kafka call that hangs, and parked idle in a writer. Its stream ends as client_gone
// (so its quota slots are given back); before, nothing noticed the first two until a write failed, and the
// parked one waited for the next probe, 30 s later.
func TestPoolNoticesPeerLeaving(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, kc *memlog.Cluster, pd *pod)
		// topic is created before the pod starts unless absent.
		absent bool
		lastID string
		// parked says the stream is idle in a writer when the client leaves.
		parked bool
	}{
		{name: "waiting for its topic", absent: true},
		{name: "waiting on kafka", lastID: "v1:0-5", setup: func(_ *testing.T, _ *memlog.Cluster, pd *pod) {
			pd.topic.Watermarks = func(ctx context.Context, _ time.Duration) (map[int32]feed.Watermarks, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}},
		{name: "parked", parked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := memlog.New()
			if !tc.absent {
				kc.CreateTopic("t", 1)
				for range 50 {
					produce(kc, "t", 0, "old") // not in the ring: a resume of them reads Kafka
				}
			}
			pd := startPod(t, kc, "t", podOpts{writers: 2, feed: func(c *feed.Config) { c.Prefill = 0 }})
			if !tc.absent {
				pd.waitReady(t)
			}
			if tc.setup != nil {
				tc.setup(t, kc, pd)
			}
			nc := dialStream(t, pd.hs.URL, "/?heartbeat=0", tc.lastID)
			if tc.parked {
				waitUntil(t, "the stream to be parked", func() bool { return pd.stats.Parked.Load() == 1 })
			}
			_ = nc.Close()
			// Within waitUntil's 10 s, which is less than the probe interval: only the hang-up can end it.
			waitUntil(t, "the stream to end as client_gone", func() bool {
				return pd.stats.Open.Load() == 0 && pd.stats.Closed[ReasonClientGone].Load() == 1
			})
		})
	}
}

// dialStream sends a stream request on a connection of its own and reads its answer up to the retry line.
func dialStream(t *testing.T, base, target, lastID string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	req := "GET " + target + " HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
	if lastID != "" {
		req += "Last-Event-ID: " + lastID + "\r\n"
	}
	if _, err := nc.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), "retry: ") {
		n, err := nc.Read(buf)
		if err != nil {
			t.Fatalf("reading the answer: %v (got %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 ") {
		t.Fatalf("answer %q, want 200", got)
	}
	return nc
}
