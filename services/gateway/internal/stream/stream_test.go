package stream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

var discardLog = slog.New(slog.DiscardHandler)

const keepAlive = ": keep-alive\n\n"

// memWriter is an in-memory http.ResponseWriter that supports Flush and SetWriteDeadline (through
// http.ResponseController), for use inside synctest bubbles, which cannot hold real network I/O.
type memWriter struct {
	mu        sync.Mutex
	header    http.Header
	code      int
	buf       bytes.Buffer
	writes    int
	flushes   int
	deadline  time.Time
	cleared   bool
	hold      chan struct{} // when set, every Write waits until it is closed
	failAfter int           // writes that succeed before every further one fails; negative means never
}

func newMemWriter() *memWriter { return &memWriter{header: http.Header{}, failAfter: -1} }

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) { w.locked(func() { w.code = code }) }

func (w *memWriter) Flush() { w.locked(func() { w.flushes++ }) }

// SetWriteDeadline keeps the last deadline that bounded a write in deadline, and whether it was cleared
// since in cleared.
func (w *memWriter) SetWriteDeadline(d time.Time) error {
	w.locked(func() {
		if d.IsZero() {
			w.cleared = true
			return
		}
		w.deadline, w.cleared = d, false
	})
	return nil
}

func (w *memWriter) String() (s string) {
	w.locked(func() { s = w.buf.String() })
	return s
}

func (w *memWriter) locked(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn()
}

func (w *memWriter) Write(p []byte) (int, error) {
	var hold chan struct{}
	w.locked(func() { hold = w.hold })
	if hold != nil {
		<-hold
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failAfter >= 0 && w.writes >= w.failAfter {
		return 0, errors.New("memWriter: broken pipe")
	}
	w.writes++
	return w.buf.Write(p)
}

// feeder publishes frames with ids v1:0-<offset> into a ring, one Publish per call.
type feeder struct {
	rg     *ring.Ring
	b      ring.Batch
	offset int64
}

func newFeeder(t testing.TB, maxBytes int) *feeder {
	t.Helper()
	rg, err := ring.New(maxBytes, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &feeder{rg: rg}
}

func (f *feeder) id() string { return fmt.Sprintf("v1:0-%d", f.offset-1) }

// publish publishes one frame per datum, all in one batch.
func (f *feeder) publish(data ...string) {
	f.b.Reset()
	for _, d := range data {
		f.offset++
		f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), "", []byte(d)), 0, f.offset-1, nil)
	}
	f.rg.Publish(&f.b, []byte(f.id()))
}

// serveMem runs Serve on w in a new goroutine and returns the reason channel and the request's cancel func.
func serveMem(t *testing.T, s *Server, w http.ResponseWriter, rg *ring.Ring, p Params, st *Stats) (<-chan CloseReason, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/streams/t", nil)
	done := make(chan CloseReason, 1)
	go func() { done <- s.Serve(w, r, &Topic{Ring: rg}, p, st).Reason }()
	return done, cancel
}

// closed returns the reason the stream ended with, failing t when it is still open.
func closed(t *testing.T, done <-chan CloseReason) CloseReason {
	t.Helper()
	select {
	case r := <-done:
		return r
	default:
		t.Fatal("stream is still open")
		return 0
	}
}

// events parses a stream's bytes with the project's WHATWG parser.
func events(t *testing.T, stream string) ([]sse.Event, *sse.Parser) {
	t.Helper()
	p := sse.NewParser(strings.NewReader(stream))
	var evs []sse.Event
	for {
		ev, err := p.Next()
		if errors.Is(err, io.EOF) {
			return evs, p
		}
		if err != nil {
			t.Fatalf("parsing %q: %v", stream, err)
		}
		evs = append(evs, ev)
	}
}

// checkHeaders checks the response headers every stream gets.
func checkHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for name, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
}

func TestServeHello(t *testing.T) {
	tests := []struct {
		name  string
		retry time.Duration
		setup func(f *feeder)
		want  string
	}{
		{name: "fresh ring", setup: func(*feeder) {}, want: "retry: 3000\nid: v1:\n\n"},
		{
			name: "after frames", retry: 1500 * time.Millisecond, setup: func(f *feeder) { f.publish("a", "b") },
			want: "retry: 1500\nid: v1:0-1\n\n",
		},
		{name: "position-only publish", setup: func(f *feeder) {
			f.publish("a")
			f.rg.Publish(&ring.Batch{}, []byte("v1:0-0.1-99"))
		}, want: "retry: 3000\nid: v1:0-0.1-99\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFeeder(t, 1<<20)
				tc.setup(f)
				w := newMemWriter()
				var st Stats
				done, cancel := serveMem(t, NewServer(Config{Retry: tc.retry, Logger: discardLog}), w, f.rg, Params{}, &st)
				synctest.Wait()
				if got := w.String(); got != tc.want {
					t.Fatalf("first bytes = %q, want %q", got, tc.want)
				}
				var code, flushes int
				w.locked(func() { code, flushes = w.code, w.flushes })
				if code != http.StatusOK || flushes != 1 {
					t.Errorf("status %d, flushes %d; want 200 and the hello flushed once", code, flushes)
				}
				checkHeaders(t, w.Header())
				cancel()
				synctest.Wait()
				if r := closed(t, done); r != ReasonClientGone {
					t.Fatalf("reason = %v, want client_gone", r)
				}
			})
		})
	}
}

// TestServeHTTP streams over a real connection: headers, the opening bytes, live start, order and
// exactly-once delivery, and the client going away.
func TestServeHTTP(t *testing.T) {
	f := newFeeder(t, 1<<20)
	f.publish("before-1", "before-2")
	srv := NewServer(Config{Retry: 2 * time.Second, Logger: discardLog})
	var st Stats
	reasons := make(chan CloseReason, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reasons <- srv.Serve(w, r, &Topic{Ring: f.rg}, Params{}, &st).Reason
	}))
	defer hs.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL, nil)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	checkHeaders(t, resp.Header)
	br := bufio.NewReader(resp.Body)
	want := "retry: 2000\nid: v1:0-1\n\n"
	hello := make([]byte, len(want))
	if _, err := io.ReadFull(br, hello); err != nil || string(hello) != want {
		t.Fatalf("first bytes = %q, %v; want %q", hello, err, want)
	}
	if n := st.Open.Load(); n != 1 {
		t.Errorf("Open = %d while streaming, want 1", n)
	}

	// The cursor is in place once the hello arrived: everything from here on must arrive, once, in order.
	const n = 50
	for i := 0; i < n; i += 5 {
		var batch []string
		for j := i; j < i+5; j++ {
			batch = append(batch, fmt.Sprintf("after-%d", j))
		}
		f.publish(batch...)
	}
	p := sse.NewParser(br)
	for i := range n {
		ev, err := p.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		wantData, wantID := fmt.Sprintf("after-%d", i), fmt.Sprintf("v1:0-%d", i+2)
		if ev.Data != wantData || ev.ID != wantID || ev.Type != "message" {
			t.Fatalf("event %d = %+v, want data %q id %q (frames published before connect must not arrive)",
				i, ev, wantData, wantID)
		}
	}
	f.publish("sentinel")
	if ev, err := p.Next(); err != nil || ev.Data != "sentinel" {
		t.Fatalf("after %d events got %+v, %v; want the sentinel (a frame was sent twice)", n, ev, err)
	}

	cancel() // the client goes away
	select {
	case r := <-reasons:
		if r != ReasonClientGone {
			t.Fatalf("reason = %v, want client_gone", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end within 10s of the client leaving")
	}
	if got := st.Frames.Load(); got != n+1 {
		t.Errorf("Frames = %d, want %d", got, n+1)
	}
	if o, c := st.Open.Load(), st.Closed[ReasonClientGone].Load(); o != 0 || c != 1 {
		t.Errorf("Open = %d, Closed[client_gone] = %d; want 0 and 1", o, c)
	}
}

func TestHeartbeat(t *testing.T) {
	type step struct {
		sleep   time.Duration // time to let pass first
		publish int           // frames to publish after that
		want    int           // keep-alive comments written so far
	}
	tests := []struct {
		name      string
		heartbeat time.Duration
		steps     []step
	}{
		{name: "idle", heartbeat: time.Second, steps: []step{
			{sleep: 999 * time.Millisecond, want: 0},
			{sleep: time.Millisecond, want: 1},
			{sleep: 999 * time.Millisecond, want: 1},
			{sleep: time.Millisecond, want: 2},
			{sleep: 8 * time.Second, want: 10},
		}},
		{name: "reset by frames", heartbeat: time.Second, steps: []step{
			{sleep: 600 * time.Millisecond, publish: 1, want: 0},
			{sleep: 600 * time.Millisecond, want: 0}, // 1.2s after the start, 0.6s after the frame
			{sleep: 399 * time.Millisecond, want: 0},
			{sleep: time.Millisecond, want: 1}, // 1s after the frame
			{sleep: 900 * time.Millisecond, publish: 3, want: 1},
			{sleep: 999 * time.Millisecond, want: 1},
			{sleep: time.Millisecond, want: 2},
		}},
		{name: "steady frames keep it quiet", heartbeat: 100 * time.Millisecond, steps: []step{
			{sleep: 90 * time.Millisecond, publish: 1},
			{sleep: 90 * time.Millisecond, publish: 1},
			{sleep: 90 * time.Millisecond, publish: 1},
			{sleep: 90 * time.Millisecond, publish: 1, want: 0},
			{sleep: 100 * time.Millisecond, want: 1},
		}},
		{name: "zero means none", heartbeat: 0, steps: []step{
			{sleep: time.Hour, want: 0},
			{sleep: time.Second, publish: 1, want: 0},
			{sleep: 24 * time.Hour, want: 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFeeder(t, 1<<20)
				w := newMemWriter()
				var st Stats
				done, cancel := serveMem(t, NewServer(Config{Logger: discardLog}), w, f.rg, Params{Heartbeat: tc.heartbeat}, &st)
				start := time.Now()
				published := 0
				for i, s := range tc.steps {
					time.Sleep(s.sleep)
					for range s.publish {
						published++
						f.publish(fmt.Sprintf("frame-%d", published))
					}
					synctest.Wait()
					out := w.String()
					if got := strings.Count(out, keepAlive); got != s.want {
						t.Fatalf("step %d at %v: %d keep-alives, want %d; stream %q", i, time.Since(start), got, s.want, out)
					}
				}
				out := w.String()
				if evs, _ := events(t, out); len(evs) != published {
					t.Fatalf("%d events in %q, want %d (a keep-alive must not dispatch anything)", len(evs), out, published)
				}
				if st.Frames.Load() != int64(published) || st.Bytes.Load() != int64(len(out)) {
					t.Errorf("Frames %d Bytes %d, want %d and %d", st.Frames.Load(), st.Bytes.Load(), published, len(out))
				}
				cancel()
				synctest.Wait()
				closed(t, done)
			})
		})
	}
}

func TestParseParams(t *testing.T) {
	const def = 15 * time.Second
	tests := []struct {
		name    string
		query   string
		want    time.Duration
		wantErr bool
	}{
		{name: "missing", query: "", want: def},
		{name: "other parameters ignored", query: "_=123&from=latest", want: def},
		{name: "zero turns it off", query: "heartbeat=0", want: 0},
		{name: "minimum", query: "heartbeat=100", want: 100 * time.Millisecond},
		{name: "maximum", query: "heartbeat=3600000", want: time.Hour},
		{name: "in range", query: "heartbeat=2500", want: 2500 * time.Millisecond},
		{name: "below minimum", query: "heartbeat=99", wantErr: true},
		{name: "above maximum", query: "heartbeat=3600001", wantErr: true},
		{name: "not a number", query: "heartbeat=abc", wantErr: true},
		{name: "duration syntax", query: "heartbeat=15s", wantErr: true},
		{name: "negative", query: "heartbeat=-5", wantErr: true},
		{name: "empty", query: "heartbeat=", wantErr: true},
		{name: "huge", query: "heartbeat=99999999999999999999", wantErr: true},
		{name: "given twice", query: "heartbeat=1000&heartbeat=1000", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParseParams(q, nil, def)
			if !tc.wantErr {
				if err != nil || p.Heartbeat != tc.want {
					t.Fatalf("ParseParams(%q) = %v, %v; want %v", tc.query, p.Heartbeat, err, tc.want)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != "heartbeat" {
				t.Fatalf("ParseParams(%q) error = %v, want a *ParamError for heartbeat", tc.query, err)
			}
			if !strings.Contains(err.Error(), `"heartbeat"`) {
				t.Errorf("error %q does not name the parameter", err)
			}
		})
	}
}

// TestBehind blocks the client's write while more than the ring holds is published: the stream ends with
// ReasonBehind, after the frames it did write, whose id tells the client where to resume.
func TestBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeeder(t, 4096)
		w := newMemWriter()
		var st Stats
		done, _ := serveMem(t, NewServer(Config{Logger: discardLog}), w, f.rg, Params{}, &st)
		synctest.Wait() // the hello is written

		hold := make(chan struct{})
		w.locked(func() { w.hold = hold })
		f.publish("first")
		synctest.Wait() // the stream is stuck writing "first"
		for i := range 200 {
			f.publish(fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 64)))
		}
		if rs := f.rg.Stats(); rs.Tail <= 1 {
			t.Fatalf("ring tail = %d, the test must evict the stream's next frame", rs.Tail)
		}
		close(hold)
		synctest.Wait()
		if r := closed(t, done); r != ReasonBehind {
			t.Fatalf("reason = %v, want behind", r)
		}
		evs, p := events(t, w.String())
		if len(evs) != 1 || evs[0].Data != "first" || p.LastEventID() != "v1:0-0" {
			t.Fatalf("client got %+v, last id %q; want only \"first\" with id v1:0-0", evs, p.LastEventID())
		}
		if st.Frames.Load() != 1 || st.Closed[ReasonBehind].Load() != 1 || st.Open.Load() != 0 {
			t.Errorf("Frames %d Closed[behind] %d Open %d, want 1 1 0",
				st.Frames.Load(), st.Closed[ReasonBehind].Load(), st.Open.Load())
		}
	})
}

func TestDrain(t *testing.T) {
	tests := []struct {
		name  string
		drain time.Duration
	}{
		{name: "window", drain: 10 * time.Second},
		{name: "zero closes at once", drain: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFeeder(t, 1<<20)
				srv := NewServer(Config{Drain: tc.drain, Logger: discardLog})
				var st Stats
				type end struct {
					reason CloseReason
					at     time.Time
				}
				ends := make(chan end, 10)
				// serve opens a stream that reports when it ended.
				serve := func() {
					ctx, cancel := context.WithCancel(t.Context())
					t.Cleanup(cancel)
					r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/streams/t", nil)
					go func() {
						reason := srv.Serve(newMemWriter(), r, &Topic{Ring: f.rg}, Params{Heartbeat: time.Second}, &st).Reason
						ends <- end{reason, time.Now()}
					}()
				}
				for range 8 {
					serve()
				}
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if n := st.Open.Load(); n != 8 {
					t.Fatalf("Open = %d before draining, want 8", n)
				}
				began := time.Now()
				srv.Drain()
				srv.Drain() // a second call is harmless
				serve()     // a stream opened while draining ends too
				time.Sleep(tc.drain)
				synctest.Wait()
				if len(ends) != 9 {
					t.Fatalf("%d of 9 streams ended within the drain window %v", len(ends), tc.drain)
				}
				at := map[time.Time]bool{}
				for range 9 {
					e := <-ends
					at[e.at] = true
					if e.reason != ReasonShutdown {
						t.Errorf("reason = %v, want shutdown", e.reason)
					}
					if d := e.at.Sub(began); d < 0 || d > tc.drain || (tc.drain > 0 && d == tc.drain) {
						t.Errorf("stream ended %v after Drain, want within [0, %v)", d, tc.drain)
					}
				}
				if tc.drain > 0 && len(at) == 1 {
					t.Errorf("all streams ended at the same moment; Drain must spread them over the window")
				}
				if st.Open.Load() != 0 || st.Closed[ReasonShutdown].Load() != 9 {
					t.Errorf("Open %d Closed[shutdown] %d, want 0 and 9", st.Open.Load(), st.Closed[ReasonShutdown].Load())
				}
			})
		})
	}
}

func TestWriteFailed(t *testing.T) {
	tests := []struct {
		name      string
		failAfter int
		frames    int64
	}{
		{name: "hello fails", failAfter: 0, frames: 0},
		{name: "frame fails", failAfter: 1, frames: 0},
		{name: "heartbeat fails", failAfter: 2, frames: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFeeder(t, 1<<20)
				w := newMemWriter()
				w.failAfter = tc.failAfter
				var st Stats
				done, cancel := serveMem(t, NewServer(Config{Logger: discardLog}), w, f.rg, Params{Heartbeat: time.Second}, &st)
				defer cancel()
				synctest.Wait()
				f.publish("a")
				time.Sleep(2 * time.Second)
				synctest.Wait()
				if r := closed(t, done); r != ReasonWriteFailed {
					t.Fatalf("reason = %v, want write_failed", r)
				}
				if st.Frames.Load() != tc.frames || st.Bytes.Load() != int64(len(w.String())) {
					t.Errorf("Frames %d Bytes %d, want %d and %d", st.Frames.Load(), st.Bytes.Load(), tc.frames, len(w.String()))
				}
				if st.Closed[ReasonWriteFailed].Load() != 1 || st.Open.Load() != 0 {
					t.Errorf("Closed[write_failed] %d Open %d, want 1 and 0", st.Closed[ReasonWriteFailed].Load(), st.Open.Load())
				}
			})
		})
	}
}

// TestStats shares one Stats between two connections and checks the counters against what was written.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeeder(t, 1<<20)
		srv := NewServer(Config{WriteTimeout: 3 * time.Second, MaxWriteBytes: 1, Logger: discardLog})
		var st Stats
		w1, w2 := newMemWriter(), newMemWriter()
		done1, cancel1 := serveMem(t, srv, w1, f.rg, Params{Heartbeat: time.Second}, &st)
		synctest.Wait()
		f.publish("a", "b", "c") // MaxWriteBytes 1: one frame per write and flush
		synctest.Wait()
		done2, cancel2 := serveMem(t, srv, w2, f.rg, Params{}, &st)
		synctest.Wait()
		if n := st.Open.Load(); n != 2 {
			t.Fatalf("Open = %d, want 2", n)
		}
		f.publish("d", "e")
		time.Sleep(1500 * time.Millisecond) // one heartbeat on w1
		synctest.Wait()

		var flushes int
		var deadline time.Time
		var cleared bool
		w1.locked(func() { flushes, deadline, cleared = w1.flushes, w1.deadline, w1.cleared })
		if !cleared {
			t.Error("w1's write deadline was left set after the write")
		}
		if want := 1 + 5 + 1; flushes != want {
			t.Errorf("w1 flushes = %d, want %d (hello, one per frame, heartbeat)", flushes, want)
		}
		if want := time.Now().Add(-500 * time.Millisecond).Add(3 * time.Second); !deadline.Equal(want) {
			t.Errorf("w1 write deadline = %v, want the heartbeat's write time + WriteTimeout = %v", deadline, want)
		}
		if got, want := st.Frames.Load(), int64(5+2); got != want {
			t.Errorf("Frames = %d, want %d", got, want)
		}
		if got, want := st.Bytes.Load(), int64(len(w1.String())+len(w2.String())); got != want {
			t.Errorf("Bytes = %d, want %d", got, want)
		}
		if evs, _ := events(t, w2.String()); len(evs) != 2 || evs[0].Data != "d" || evs[1].Data != "e" {
			t.Errorf("second connection got %+v, want d and e", evs)
		}

		cancel1()
		synctest.Wait()
		closed(t, done1)
		if n := st.Open.Load(); n != 1 {
			t.Errorf("Open = %d after one close, want 1", n)
		}
		cancel2()
		synctest.Wait()
		closed(t, done2)
		if st.Open.Load() != 0 || st.Closed[ReasonClientGone].Load() != 2 {
			t.Errorf("Open %d Closed[client_gone] %d, want 0 and 2", st.Open.Load(), st.Closed[ReasonClientGone].Load())
		}
		for _, r := range []CloseReason{ReasonBehind, ReasonWriteFailed, ReasonShutdown} {
			if n := st.Closed[r].Load(); n != 0 {
				t.Errorf("Closed[%v] = %d, want 0", r, n)
			}
		}
	})
}

func TestCloseReasonString(t *testing.T) {
	tests := []struct {
		r    CloseReason
		want string
	}{
		{ReasonClientGone, "client_gone"},
		{ReasonBehind, "behind"},
		{ReasonWriteFailed, "write_failed"},
		{ReasonShutdown, "shutdown"},
		{numReasons, "unknown"},
		{parked, "unknown"},
		{CloseReason(-2), "unknown"},
		{CloseReason(99), "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.r.String(); got != tc.want {
				t.Fatalf("CloseReason(%d).String() = %q, want %q", int(tc.r), got, tc.want)
			}
		})
	}
	rs := Reasons()
	if len(rs) != int(numReasons) {
		t.Fatalf("Reasons() = %v, want %d reasons", rs, numReasons)
	}
	for i, r := range rs {
		if r != CloseReason(i) || r.String() == "unknown" {
			t.Errorf("Reasons()[%d] = %v", i, r)
		}
	}
}

type slowWriter struct{ *memWriter }

func (w slowWriter) Write(p []byte) (int, error) {
	time.Sleep(2 * time.Millisecond)
	return w.memWriter.Write(p)
}

// TestDrainBusyStream: a stream that always has frames to write still closes within the drain window.
func TestDrainBusyStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeeder(t, 1<<20)
		srv := NewServer(Config{Drain: time.Second, Logger: discardLog})
		var st Stats
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					f.publish("x")
				}
			}
		}()
		done, cancel := serveMem(t, srv, slowWriter{newMemWriter()}, f.rg, Params{}, &st)
		defer cancel()
		time.Sleep(time.Second)
		srv.Drain()
		select {
		case r := <-done:
			if r != ReasonShutdown {
				t.Errorf("reason = %v, want shutdown", r)
			}
		case <-time.After(time.Minute):
			t.Errorf("busy stream still open a minute after Drain with a 1s window")
			close(stop)
			<-stopped
			cancel()
			<-done
			return
		}
		close(stop)
		<-stopped
	})
}

func TestFrameID(t *testing.T) {
	for _, tc := range []struct{ frame, id string }{
		{"id: v1:0-1\ndata: a\n\n", "v1:0-1"},
		{"id: v1:0-2.1-0\nevent: x\ndata: b\ndata:\n\n", "v1:0-2.1-0"},
	} {
		if id := frameID([]byte(tc.frame)).String(); id != tc.id {
			t.Errorf("frameID(%q) = %s, want %s", tc.frame, id, tc.id)
		}
	}
}
