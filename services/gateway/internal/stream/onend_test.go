package stream

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// endLog records the OnEnd calls of every stream of a test server, by request.
type endLog struct {
	mu    sync.Mutex
	calls map[int][]CloseReason
	next  int
	st    *Stats
	early []string // calls that came before the end was counted in Stats
}

// params returns p with an OnEnd that records the calls of a new request.
func (l *endLog) params(p Params) Params {
	l.mu.Lock()
	id := l.next
	l.next++
	l.mu.Unlock()
	p.OnEnd = func(r CloseReason) {
		counted := l.st.Closed[r].Load() > 0
		l.mu.Lock()
		defer l.mu.Unlock()
		if !counted {
			l.early = append(l.early, r.String())
		}
		l.calls[id] = append(l.calls[id], r)
	}
	return p
}

// check fails t unless every one of n streams had exactly one OnEnd call, with reason want.
func (l *endLog) check(t *testing.T, n int, want CloseReason) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.early) > 0 {
		t.Errorf("OnEnd called before the end was counted: %v", l.early)
	}
	if len(l.calls) != n {
		t.Errorf("OnEnd called for %d streams, want %d: %v", len(l.calls), n, l.calls)
	}
	for id, rs := range l.calls {
		if len(rs) != 1 || rs[0] != want {
			t.Errorf("stream %d: OnEnd calls %v, want exactly one with %s", id, rs, want)
		}
	}
}

// ended says whether n streams have had their OnEnd call.
func (l *endLog) ended(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls) == n
}

// TestOnEndOnce: OnEnd is called exactly once for every stream, with the reason it ended, on the handler's
// goroutine and from the writer pool alike (a parked stream's Serve returned long before), after the end is
// counted, and before the client can see the end.
func TestOnEndOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writers int
		cfg     Config
		p       Params
		ring    int
		streams int
		end     func(t *testing.T, srv *Server, f *feeder, cs []*client, log *endLog)
		want    CloseReason
	}{
		{
			name: "handler path, client gone", writers: 0, streams: 3, want: ReasonClientGone,
			end: func(t *testing.T, _ *Server, _ *feeder, cs []*client, _ *endLog) {
				for _, c := range cs {
					_ = c.resp.Body.Close()
				}
			},
		},
		{
			name: "parked, client gone", writers: 2, streams: 3, p: Params{Heartbeat: 50 * time.Millisecond}, want: ReasonClientGone,
			end: func(t *testing.T, _ *Server, _ *feeder, cs []*client, _ *endLog) {
				for _, c := range cs {
					_ = c.resp.Body.Close()
				}
			},
		},
		{
			name: "parked, drained", writers: 2, streams: 3, cfg: Config{Drain: 100 * time.Millisecond}, want: ReasonShutdown,
			end: func(t *testing.T, srv *Server, _ *feeder, cs []*client, log *endLog) {
				srv.Drain()
				for i, c := range cs {
					if _, err := io.ReadAll(c.br); err != nil {
						t.Errorf("client %d: %v", i, err)
					}
				}
				// Every client saw its stream's end: every OnEnd ran before.
				if !log.ended(len(cs)) {
					t.Error("a client saw its stream's end before OnEnd ran")
				}
			},
		},
		{
			name: "parked, server closed", writers: 2, streams: 3, want: ReasonShutdown,
			end: func(t *testing.T, srv *Server, _ *feeder, _ []*client, _ *endLog) { srv.Close() },
		},
		{
			name: "parked, fell behind", writers: 1, streams: 1, ring: 64 << 10, want: ReasonBehind,
			end: func(t *testing.T, _ *Server, f *feeder, cs []*client, log *endLog) {
				big := strings.Repeat("z", 20<<10)
				f.publish(big, big, big, big, big)
				if _, err := io.ReadAll(cs[0].br); err != nil {
					t.Fatal(err)
				}
				if !log.ended(1) {
					t.Error("the client saw its stream's end before OnEnd ran")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.ring
			if size == 0 {
				size = 1 << 20
			}
			f := newFeeder(t, size)
			cfg := tc.cfg
			cfg.Writers, cfg.Logger = tc.writers, discardLog
			srv := NewServer(cfg)
			st := new(Stats)
			log := &endLog{calls: map[int][]CloseReason{}, st: st}
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				srv.Serve(w, r, &Topic{Ring: f.rg}, log.params(tc.p), st)
			}))
			t.Cleanup(func() { hs.Close(); srv.Close() })
			var cs []*client
			for range tc.streams {
				cs = append(cs, dialOpen(t, hs.URL))
			}
			if tc.writers > 0 {
				waitUntil(t, "parked streams", func() bool { return st.Parked.Load() == int64(tc.streams) })
			}
			tc.end(t, srv, f, cs, log)
			waitUntil(t, "every stream to end", func() bool { return st.Open.Load() == 0 && log.ended(tc.streams) })
			srv.Close()
			hs.Close()
			log.check(t, tc.streams, tc.want)
		})
	}
}

// wrappedListener wraps each connection, as a listener that answers net/http's early errors in JSON does.
type wrappedListener struct{ net.Listener }

type wrappedConn struct{ net.Conn }

func (c wrappedConn) NetConn() net.Conn { return c.Conn }

func (l wrappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrappedConn{c}, nil
}

// TestPoolUnwrapsConn: a connection that a listener wrapped (with a NetConn method) is still parked: the
// stream writes to the connection underneath.
func TestPoolUnwrapsConn(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{})
	ps.hs.Listener = wrappedListener{ps.hs.Listener}
	ps.start(t)
	c := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	f.publish("through the wrapper")
	if ev, err := c.p.Next(); err != nil || ev.Data != "through the wrapper" {
		t.Fatalf("got %+v, %v", ev, err)
	}
}
