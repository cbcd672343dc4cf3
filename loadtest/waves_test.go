package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestWavePosition(t *testing.T) {
	tests := []struct {
		name          string
		starts, ends  []int64
		behind        int
		want          string
		wantOwedTotal int64
	}{
		{"even over three partitions", []int64{0, 0, 0}, []int64{1000, 1000, 1000}, 300, "v1:0-899.1-899.2-899", 300},
		{"the remainder to the first partitions", []int64{0, 0, 0}, []int64{1000, 1000, 1000}, 302, "v1:0-898.1-898.2-899", 302},
		{"uneven heads", []int64{0, 0}, []int64{500, 2000}, 100, "v1:0-449.1-1949", 100},
		{"one partition", []int64{0}, []int64{48001}, 48000, "v1:0-0", 48000},
		{"exactly everything: from the start", []int64{0}, []int64{48000}, 48000, "v1:", 48000},
		{"a short partition from its start", []int64{0, 0}, []int64{10, 1000}, 100, "v1:1-949", 60},
		{"a short partition whose start is gone", []int64{5, 0}, []int64{10, 1000}, 100, "v1:0-4.1-949", 55},
		{"nothing written yet", []int64{0, 0}, []int64{0, 0}, 100, "v1:", 0},
		{"more partitions than records behind", []int64{0, 0, 0, 0}, []int64{10, 10, 10, 10}, 2, "v1:0-8.1-8.2-9.3-9", 2},
		{"no listing", nil, nil, 100, "v1:", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := wavePosition(tc.starts, tc.ends, tc.behind)
			if got := v.String(); got != tc.want {
				t.Fatalf("wavePosition(%v, %v, %d) = %s, want %s", tc.starts, tc.ends, tc.behind, got, tc.want)
			}
			// What the gateway owes a client at that position: per partition, the records after it (all of
			// them for a partition the id leaves out).
			var owed int64
			for p, end := range tc.ends {
				from := tc.starts[p]
				if off, ok := v.Offset(int32(p)); ok {
					from = off + 1
				}
				owed += end - from
			}
			if owed != tc.wantOwedTotal {
				t.Fatalf("the position owes %d records, want %d", owed, tc.wantOwedTotal)
			}
		})
	}
}

func TestParseConfigWaves(t *testing.T) {
	env := func(string) string { return "" }
	c, err := parseConfig(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Waves != 0 || c.WaveEvery != 20*time.Second || c.WaveBehind != 48000 || c.WaveCut != 500*time.Millisecond || c.PrefillRecords != 0 {
		t.Fatalf("defaults: waves %d every %v behind %d cut %v prefill %d", c.Waves, c.WaveEvery, c.WaveBehind, c.WaveCut, c.PrefillRecords)
	}
	c, err = parseConfig([]string{"--waves=120", "--duration=60s", "--wave-behind=1000", "--wave-cut=250ms", "--wave-every=5s", "--prefill-records=48000"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Waves != 120 || c.WaveEvery != 5*time.Second || c.WaveBehind != 1000 || c.WaveCut != 250*time.Millisecond || c.PrefillRecords != 48000 {
		t.Fatalf("parsed: %+v", c)
	}
	if _, err := parseConfig([]string{"--mode=storm", "--prefill-records=10"}, env, io.Discard); err != nil {
		t.Fatalf("a prefill before a storm: %v", err)
	}
	// Without waves, --wave-every only sets the latency windows: a cut longer than it does not matter.
	if _, err := parseConfig([]string{"--wave-every=100ms"}, env, io.Discard); err != nil {
		t.Fatalf("short windows without waves: %v", err)
	}
	for _, tc := range []struct {
		args   []string
		wantIn string
	}{
		{[]string{"--waves=-1"}, "--waves"},
		{[]string{"--waves=100001"}, "--waves"},
		{[]string{"--waves=10", "--mode=idle"}, "steady or waves mode only"},
		{[]string{"--waves=10", "--mode=storm"}, "steady or waves mode only"},
		{[]string{"--waves=10", "--proto=ws"}, "--proto=h1 only"},
		{[]string{"--waves=10", "--duration=20s"}, "less than --duration"},
		{[]string{"--wave-cut=0"}, "more than 0"},
		{[]string{"--wave-every=0"}, "more than 0"},
		{[]string{"--waves=10", "--duration=60s", "--wave-cut=20s"}, "less than --wave-every"},
		{[]string{"--waves=10", "--duration=60s", "--wave-cut=1s", "--wave-every=500ms"}, "less than --wave-every"},
		{[]string{"--wave-behind=0"}, "--wave-behind"},
		{[]string{"--prefill-records=-1"}, "--prefill-records"},
		{[]string{"--prefill-records=10", "--mode=resume"}, "--prefill-records"},
		{[]string{"--prefill-records=10", "--mode=floor"}, "--prefill-records"},
	} {
		_, err := parseConfig(tc.args, env, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.wantIn) {
			t.Errorf("parseConfig(%v) = %v, want an error saying %q", tc.args, err, tc.wantIn)
		}
	}
}

// waveServer is a gateway stand-in for wave clients on a raw listener: each connection's request is read and
// its Last-Event-ID kept, then serve answers it. It counts the connections still open and those the client
// ended with a reset.
type waveServer struct {
	ln     net.Listener
	serve  func(conn net.Conn)
	wg     sync.WaitGroup
	mu     sync.Mutex
	ids    []string
	open   atomic.Int64
	resets atomic.Int64
}

func newWaveServer(t *testing.T, serve func(conn net.Conn)) *waveServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &waveServer{ln: ln, serve: serve}
	s.wg.Go(s.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

// sentIDs returns the Last-Event-ID of every request so far.
func (s *waveServer) sentIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

func (s *waveServer) url() string { return "http://" + s.ln.Addr().String() + "/streams/t" }

func (s *waveServer) accept() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.open.Add(1)
		s.wg.Go(func() {
			defer s.open.Add(-1)
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // a test that goes wrong still ends
			req, err := http.ReadRequest(bufio.NewReader(conn))
			if err != nil {
				return
			}
			s.mu.Lock()
			s.ids = append(s.ids, req.Header.Get("Last-Event-ID"))
			s.mu.Unlock()
			s.serve(conn)
			// Wait for the client to go: a reset, or an end of stream after a plain close.
			_, err = conn.Read(make([]byte, 1))
			if errors.Is(err, syscall.ECONNRESET) {
				s.resets.Add(1)
			}
		})
	}
}

const (
	waveHead    = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
	waveOpening = "retry: 1000\nid: v1:0-100\n\n"
)

// waveFrames is the body after the opening block: n frames of partition 0 from offset 101.
func waveFrames(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "id: v1:0-%d\ndata: %s\n\n", 100+i, makeValue(time.Now().UnixNano(), int64(i), 100))
	}
	return b.String()
}

// TestWaveOnceCut: a wave client reads what the gateway sends for the cut from its dial, counts the frames
// and the body's bytes exactly, sends the id it was given, returns at the cut without an error, and hangs up
// with a reset, not a plain end of stream.
func TestWaveOnceCut(t *testing.T) {
	const frames = 37
	body := waveOpening + waveFrames(frames)
	s := newWaveServer(t, func(conn net.Conn) { _, _ = io.WriteString(conn, waveHead+body) })
	const cut = 150 * time.Millisecond
	t0 := time.Now()
	w := waveOnce(context.Background(), s.url(), "v1:0-42.1-17", cut)
	took := time.Since(t0)
	if w.err != nil || !w.opened || w.frames != frames || w.bytes != int64(len(body)) {
		t.Fatalf("read %+v, want opened, %d frames, %d bytes, no error", w, frames, len(body))
	}
	if took < cut || took > cut+2*time.Second {
		t.Fatalf("the client hung up after %v, want at the cut (%v)", took, cut)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.open.Load() != 0 || s.resets.Load() != 1 {
		t.Fatalf("open %d, resets %d: want the connection ended by a reset", s.open.Load(), s.resets.Load())
	}
	if ids := s.sentIDs(); len(ids) != 1 || ids[0] != "v1:0-42.1-17" {
		t.Fatalf("Last-Event-ID %q, want the wave's id", ids)
	}
}

// TestWaveOnceFailures: a stream that fails before the cut is an error; one the gateway has not answered by
// the cut is not, and did not open.
func TestWaveOnceFailures(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reply      string
		end        bool // the server ends the body after the reply
		wantOpened bool
		wantFrames int64
		wantErr    string
	}{
		{"an error status", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy", true, false, 0, "status 503"},
		{"the stream ends early", waveHead + waveOpening + waveFrames(3), true, true, 3, "stream"},
		{"a resync", waveHead + waveOpening + waveFrames(2) + "event: resync\ndata: {}\n\n", false, true, 2, "resync"},
		{"no answer by the cut", "", false, false, 0, ""},
		{"no opening block by the cut", waveHead + "retry: 1000\n", false, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newWaveServer(t, func(conn net.Conn) {
				_, _ = io.WriteString(conn, tc.reply)
				if tc.end {
					_ = conn.(*net.TCPConn).CloseWrite()
				}
			})
			w := waveOnce(context.Background(), s.url(), "v1:0-1", 150*time.Millisecond)
			if w.opened != tc.wantOpened || w.frames != tc.wantFrames {
				t.Fatalf("read %+v, want opened %v, %d frames", w, tc.wantOpened, tc.wantFrames)
			}
			if tc.wantErr == "" && w.err != nil {
				t.Fatalf("err = %v, want none: the cut is not the gateway's failure", w.err)
			}
			if tc.wantErr != "" && (w.err == nil || !strings.Contains(w.err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want one saying %q", w.err, tc.wantErr)
			}
		})
	}
}

// TestWaveSchedule runs three waves of three clients against a stand-in gateway: each wave must resume from
// the head its own moment gives, every client must be counted, and every connection must be gone, ended by a
// reset, once run returns.
func TestWaveSchedule(t *testing.T) {
	const frames = 11
	s := newWaveServer(t, func(conn net.Conn) { _, _ = io.WriteString(conn, waveHead+waveOpening+waveFrames(frames)) })
	var heads atomic.Int64
	sch := waveSchedule{
		count: 3, every: 80 * time.Millisecond, duration: 250 * time.Millisecond, behind: 100, cut: 40 * time.Millisecond,
		url: func(int) string { return s.url() },
		head: func(context.Context) ([]int64, []int64, error) {
			k := heads.Add(1)
			return []int64{0, 0}, []int64{1000 * k, 1000 * k}, nil
		},
	}
	t0 := time.Now()
	st := sch.run(context.Background(), t0)
	if took := time.Since(t0); took < 240*time.Millisecond+sch.cut {
		t.Fatalf("run returned after %v, before the last wave (at 240 ms) was cut", took)
	}
	if st.Waves != 3 || st.Clients != 9 || st.Opened != 9 || st.Frames != 9*frames || st.FramesP50 != frames || st.ConnErrors != 0 || st.Skipped != 0 {
		t.Fatalf("stats %+v, want 3 waves of 3 clients with %d frames each", st, frames)
	}
	if f := st.failures(); len(f) != 0 {
		t.Fatalf("failures %q", f)
	}
	if s.open.Load() != 0 && !waitZero(&s.open, 5*time.Second) {
		t.Fatalf("%d connections still open after the waves", s.open.Load())
	}
	if s.resets.Load() != 9 {
		t.Fatalf("%d of 9 connections ended with a reset", s.resets.Load())
	}
	count := map[string]int{}
	for _, id := range s.sentIDs() {
		count[id]++
	}
	for k, run := range st.Runs {
		want := fmt.Sprintf("v1:0-%d.1-%d", 1000*(k+1)-51, 1000*(k+1)-51)
		if run.ID != want || count[want] != 3 || run.Frames != 3*frames || run.Opened != 3 {
			t.Errorf("wave %d: %+v sent by %d clients, want id %s sent by 3", k+1, run, count[want], want)
		}
		if lo := float64(k+1) * 0.08; run.At < lo || run.At > lo+1 {
			t.Errorf("wave %d at %.3fs, want at %.2fs", k+1, run.At, lo)
		}
	}
}

// TestWaveScheduleFailures: a wave whose head cannot be read is skipped, a failed client counts, and either
// fails the run, as do waves that read nothing.
func TestWaveScheduleFailures(t *testing.T) {
	s := newWaveServer(t, func(conn net.Conn) {
		_, _ = io.WriteString(conn, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n")
	})
	var heads atomic.Int64
	sch := waveSchedule{
		count: 2, every: 50 * time.Millisecond, duration: 120 * time.Millisecond, behind: 10, cut: 20 * time.Millisecond,
		url: func(int) string { return s.url() },
		head: func(context.Context) ([]int64, []int64, error) {
			if heads.Add(1) == 1 {
				return nil, nil, errors.New("no leader")
			}
			return []int64{0}, []int64{100}, nil
		},
	}
	st := sch.run(context.Background(), time.Now())
	if st.Waves != 1 || st.Skipped != 1 || st.Clients != 2 || st.ConnErrors != 2 || st.Frames != 0 {
		t.Fatalf("stats %+v, want one wave skipped, one run whose 2 clients failed", st)
	}
	r := result{Mode: modeSteady, Connections: 1, Opened: 1, Waves: st}
	r.judge(config{Mode: modeSteady})
	joined := strings.Join(r.Failures, "; ")
	for _, want := range []string{"2 of 2 wave clients failed", "1 waves did not run", "read no frame"} {
		if r.OK || !strings.Contains(joined, want) {
			t.Errorf("OK %v, failures %q: want one saying %q", r.OK, joined, want)
		}
	}
	if !strings.Contains(r.summary(), " waves=1 wave_clients=2 wave_opened=0 wave_frames=0 wave_frames/client_p50=0 wave_conn_errors=2") {
		t.Errorf("summary %s", r.summary())
	}
}

// TestWaveScheduleCanceled: once the run's context ends no wave starts and run returns at once.
func TestWaveScheduleCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sch := waveSchedule{
		count: 2, every: 50 * time.Millisecond, duration: time.Hour, behind: 10, cut: 20 * time.Millisecond,
		url:  func(int) string { return "http://127.0.0.1:1/streams/t" },
		head: func(context.Context) ([]int64, []int64, error) { return []int64{0}, []int64{100}, nil },
	}
	time.AfterFunc(30*time.Millisecond, cancel)
	t0 := time.Now()
	st := sch.run(ctx, t0)
	if took := time.Since(t0); took > 5*time.Second || st.Waves != 0 {
		t.Fatalf("run took %v and ran %d waves after its context ended", took, st.Waves)
	}
}

func waitZero(n *atomic.Int64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for n.Load() != 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// TestLatencyWindows: frames record into the current window, the total is every window's, and the summary
// has each window's p99.
func TestLatencyWindows(t *testing.T) {
	var sh shared
	w := newLatencyWindows(&sh, 20*time.Second, 60*time.Second)
	if len(w.hs) != 3 || sh.hist.Load() != w.hs[0] {
		t.Fatalf("%d windows, the first current: %v; want 3", len(w.hs), sh.hist.Load() == w.hs[0])
	}
	for k, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		w.advance(k)
		for range 100 {
			sh.hist.Load().Record(d)
		}
	}
	tot := w.total()
	if tot.Count() != 300 || tot.Max() != 100*time.Millisecond || w.hs[1].Count() != 100 {
		t.Fatalf("total %d values, max %v; window 1 has %d", tot.Count(), tot.Max(), w.hs[1].Count())
	}
	ls := w.latencies()
	for k, want := range []float64{1, 10, 100} {
		if got := ls[k].P99; got < want*0.97 || got > want {
			t.Fatalf("window %d: p99 %.2f ms, want %.0f ms", k, got, want)
		}
	}
	r := result{Mode: modeSteady, Latency: latencyOf(tot), LatencyWindows: ls}
	want := fmt.Sprintf(" p99/window=%.2f,%.2f,%.2fms", ls[0].P99, ls[1].P99, ls[2].P99)
	if s := r.summary(); !strings.Contains(s, want) {
		t.Fatalf("summary %s, want %q", s, want)
	}
	// A run of one window, or of too many, keeps one and reports none.
	for _, d := range []time.Duration{10 * time.Second, 20 * time.Second, time.Duration(maxWindows+1) * 20 * time.Second} {
		if w := newLatencyWindows(&sh, 20*time.Second, d); len(w.hs) != 1 || w.latencies() != nil {
			t.Errorf("duration %v: %d windows", d, len(w.hs))
		}
	}
	if w := newLatencyWindows(&sh, 20*time.Second, 61*time.Second); len(w.hs) != 4 {
		t.Errorf("61 s in windows of 20 s: %d windows, want 4 (the last short)", len(w.hs))
	}
}

// TestLatencyWindowsStart: the windows move on at their times from t0.
func TestLatencyWindowsStart(t *testing.T) {
	var sh shared
	w := newLatencyWindows(&sh, 40*time.Millisecond, 100*time.Millisecond)
	wait := w.start(context.Background(), time.Now())
	wait()
	if sh.hist.Load() != w.hs[2] {
		t.Fatal("after the last window's start, frames do not record into it")
	}
}

func TestPrefillValue(t *testing.T) {
	v := prefillValue(48000, 200)
	if len(v) != 200 || !strings.HasPrefix(string(v), `{"prefill":48000,"pad":"x`) || !strings.HasSuffix(string(v), `x"}`) {
		t.Fatalf("prefillValue = %s (%d bytes)", v, len(v))
	}
	if _, ok := sendTime(string(v)); ok {
		t.Fatal("a prefill record's value has a send time: its age would count as latency")
	}
}
