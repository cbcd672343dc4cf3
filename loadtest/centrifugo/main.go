// Command centrifugo is a small load client for Centrifugo (https://centrifugal.dev), to measure it next to
// ssegate's WebSocket transport the way the load tool measures the gateway: N WebSocket clients (Centrifugo's
// JSON protocol on /connection/websocket, anonymous) subscribe to one channel; records are published into it
// through Centrifugo's HTTP API at a rate; every client must receive every publication, in order (the
// publications carry the load tool's values, {"ts":<unix nanos>,"seq":<n>,"pad":"..."}: seq is checked,
// latency is the receive time minus ts). Centrifugo's CPU seconds come from /proc/<pid>/stat over the same
// window as the load tool's (from the first publication until every client has the last), and its memory per
// idle connection from /proc/<pid>/status and its /metrics (heap, stacks, goroutines, after a forced garbage
// collection through /debug/pprof/heap?gc=1). Loopback only, like the load tool.
//
//	go build -o .run/cfload ./loadtest/centrifugo
//	.run/cfload --mode=steady --connections=1000 --rate=100 --duration=30s --pid=$(pgrep -n centrifugo) \
//	  --url=http://127.0.0.1:8000
//
// docs/benchmarks.md ("WebSocket next to SSE") and loadtest/ws-vs-sse.sh have the configuration and commands.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

type config struct {
	mode        string
	base        string // http://127.0.0.1:8000: /connection/websocket, /api, /metrics, /debug/pprof
	channel     string
	connections int
	rate        float64
	duration    time.Duration
	size        int
	pid         int
	drain       time.Duration
	connectPar  int
}

func main() {
	var c config
	flag.StringVar(&c.mode, "mode", "steady", "steady (publish at --rate for --duration) or idle (hold --duration, then measure memory)")
	flag.StringVar(&c.base, "url", "http://127.0.0.1:8000", "Centrifugo's base URL (loopback only)")
	flag.StringVar(&c.channel, "channel", "loadtest", "channel every client subscribes to and records are published into")
	flag.IntVar(&c.connections, "connections", 100, "WebSocket clients")
	flag.Float64Var(&c.rate, "rate", 100, "publications per second")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long to publish (steady) or hold (idle)")
	flag.IntVar(&c.size, "size", 200, "bytes per value")
	flag.IntVar(&c.pid, "pid", 0, "Centrifugo's process id, for CPU seconds and RSS")
	flag.DurationVar(&c.drain, "drain-timeout", 15*time.Second, "after publishing, how long clients get to receive everything")
	flag.IntVar(&c.connectPar, "connect-concurrency", 64, "clients connecting at once")
	flag.Parse()
	u, err := url.Parse(c.base)
	if err != nil || u.Scheme != "http" || (u.Hostname() != "localhost" && !net.ParseIP(u.Hostname()).IsLoopback()) {
		fmt.Fprintln(os.Stderr, "cfload: --url must be http:// on loopback")
		os.Exit(2)
	}
	res, err := run(context.Background(), c)
	out, _ := json.Marshal(res)
	fmt.Println(res.summary())
	fmt.Println(string(out))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cfload:", err)
		os.Exit(1)
	}
	if !res.OK {
		os.Exit(1)
	}
}

// result is what a run found.
type result struct {
	Mode              string   `json:"mode"`
	Connections       int      `json:"connections"`
	Opened            int64    `json:"opened"`
	Published         int64    `json:"published"`
	PublishFailed     int64    `json:"publish_failed"`
	Delivered         int64    `json:"delivered"`
	Lost              int64    `json:"lost"`
	Dup               int64    `json:"duplicated"`
	ConnErrors        int64    `json:"conn_errors"`
	P50               float64  `json:"p50_ms"`
	P99               float64  `json:"p99_ms"`
	P999              float64  `json:"p999_ms"`
	Elapsed           float64  `json:"elapsed_s"`
	CPUSeconds        float64  `json:"centrifugo_cpu_s"`
	DeliveriesPerCPU  float64  `json:"deliveries_per_cpu_s"`
	ToolCPUSeconds    float64  `json:"tool_cpu_s"`
	RSSBefore         int64    `json:"rss_before_bytes"`
	RSSAfter          int64    `json:"rss_after_bytes"`
	RSSPerConn        float64  `json:"rss_per_conn_bytes"`
	HeapPerConn       float64  `json:"heap_per_conn_bytes"`
	StackPerConn      float64  `json:"stack_per_conn_bytes"`
	GoroutinesPerConn float64  `json:"goroutines_per_conn"`
	OpenSeconds       float64  `json:"open_s"`
	FrameBytes        float64  `json:"frame_bytes_per_delivery"`
	OK                bool     `json:"ok"`
	Errors            []string `json:"errors,omitempty"`
}

func (r *result) summary() string {
	status := "ok"
	if !r.OK {
		status = "FAIL"
	}
	s := fmt.Sprintf("cfload mode=%s result=%s conns=%d/%d", r.Mode, status, r.Opened, r.Connections)
	if r.Mode == "steady" {
		s += fmt.Sprintf(" elapsed=%.1fs published=%d delivered=%d p50=%.2fms p99=%.2fms p999=%.2fms lost=%d dup=%d frame_bytes/delivery=%.1f",
			r.Elapsed, r.Published, r.Delivered, r.P50, r.P99, r.P999, r.Lost, r.Dup, r.FrameBytes)
		s += fmt.Sprintf(" centrifugo_cpu=%.2fs deliveries/cpu_s=%.0f tool_cpu=%.2fs", r.CPUSeconds, r.DeliveriesPerCPU, r.ToolCPUSeconds)
	} else {
		s += fmt.Sprintf(" open_time=%.2fs rss=%.1f->%.1fMiB rss/conn=%.1fKiB heap/conn=%.1fKiB stack/conn=%.1fKiB goroutines/conn=%.2f",
			r.OpenSeconds, float64(r.RSSBefore)/(1<<20), float64(r.RSSAfter)/(1<<20), r.RSSPerConn/1024, r.HeapPerConn/1024, r.StackPerConn/1024, r.GoroutinesPerConn)
	}
	return s + fmt.Sprintf(" conn_errors=%d", r.ConnErrors)
}

// cfClient is one subscriber: the next seq it expects, and what it counted.
type cfClient struct {
	next      atomic.Int64 // next seq expected; -1 until the first publication
	delivered atomic.Int64
	lost      atomic.Int64
	dup       atomic.Int64
	failed    atomic.Bool
	err       error // read after the clients are joined
}

type shared struct {
	opened   atomic.Int64
	connErrs atomic.Int64
	bytes    atomic.Int64
	mu       sync.Mutex
	lat      []time.Duration // sampled latencies
	measure  atomic.Bool
}

func run(ctx context.Context, c config) (*result, error) {
	r := &result{Mode: c.mode, Connections: c.connections}
	hc := &http.Client{Timeout: 10 * time.Second}
	if c.mode == "idle" {
		// A garbage collection first, so that the heap before connecting is the live heap, as after.
		_ = forceGC(ctx, hc, c.base)
	}
	before, err := sample(c.pid)
	if err != nil {
		return r, err
	}
	m0, _ := metrics(ctx, hc, c.base)
	var sh shared
	clients := make([]*cfClient, c.connections)
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.connectPar)
	wsURL := strings.Replace(c.base, "http", "ws", 1) + "/connection/websocket"
	t0 := time.Now()
	for i := range clients {
		cl := &cfClient{}
		cl.next.Store(-1)
		clients[i] = cl
		wg.Go(func() {
			sem <- struct{}{}
			released := false
			release := func() {
				if !released {
					released = true
					<-sem
				}
			}
			err := cl.stream(cctx, wsURL, c.channel, &sh, release)
			release()
			if err != nil && cctx.Err() == nil {
				cl.err = err
				cl.failed.Store(true)
				sh.connErrs.Add(1)
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for sh.opened.Load()+sh.connErrs.Load() < int64(c.connections) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.OpenSeconds = time.Since(t0).Seconds()
	r.Opened = sh.opened.Load()
	defer func() {
		cancel()
		wg.Wait()
	}()
	if c.mode == "idle" {
		time.Sleep(c.duration)
		if err := forceGC(ctx, hc, c.base); err != nil {
			r.Errors = append(r.Errors, "gc: "+err.Error())
		}
		after, err := sample(c.pid)
		if err != nil {
			return r, err
		}
		m1, _ := metrics(ctx, hc, c.base)
		n := float64(max(r.Opened, 1))
		r.RSSBefore, r.RSSAfter = before.rss, after.rss
		r.RSSPerConn = float64(after.rss-before.rss) / n
		r.HeapPerConn = (m1["go_memstats_heap_inuse_bytes"] - m0["go_memstats_heap_inuse_bytes"]) / n
		r.StackPerConn = (m1["go_memstats_stack_inuse_bytes"] - m0["go_memstats_stack_inuse_bytes"]) / n
		r.GoroutinesPerConn = (m1["go_goroutines"] - m0["go_goroutines"]) / n
		r.ConnErrors = sh.connErrs.Load()
		r.OK = r.Opened == int64(c.connections) && r.ConnErrors == 0
		return r, nil
	}

	// Steady: publish at the rate for the duration, then wait until every client has the last one.
	p0, err := sample(c.pid)
	if err != nil {
		return r, err
	}
	s0, _ := sample(os.Getpid())
	sh.measure.Store(true)
	start := time.Now()
	pub := publisher{hc: &http.Client{Timeout: 10 * time.Second}, api: c.base + "/api/publish", channel: c.channel, size: c.size}
	n := pub.run(ctx, c.rate, c.duration)
	r.Published, r.PublishFailed = n, pub.failed
	if pub.lastErr != nil {
		r.Errors = append(r.Errors, "publish: "+pub.lastErr.Error())
	}
	drainBy := time.Now().Add(c.drain)
	for time.Now().Before(drainBy) {
		all := true
		for _, cl := range clients {
			if !cl.failed.Load() && cl.next.Load() < n {
				all = false
				break
			}
		}
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p1, err := sample(c.pid)
	if err != nil {
		return r, err
	}
	s1, _ := sample(os.Getpid())
	r.Elapsed = time.Since(start).Seconds()
	cancel()
	wg.Wait()
	r.CPUSeconds = p1.cpu - p0.cpu
	r.ToolCPUSeconds = s1.cpu - s0.cpu
	for _, cl := range clients {
		r.Delivered += cl.delivered.Load()
		r.Dup += cl.dup.Load()
		lost := cl.lost.Load()
		if next := cl.next.Load(); next < n {
			lost += n - max(next, 0)
		}
		r.Lost += lost
		if cl.err != nil && len(r.Errors) < 10 {
			r.Errors = append(r.Errors, cl.err.Error())
		}
	}
	r.ConnErrors = sh.connErrs.Load()
	if r.CPUSeconds > 0 {
		r.DeliveriesPerCPU = float64(r.Delivered) / r.CPUSeconds
	}
	if r.Delivered > 0 {
		r.FrameBytes = float64(sh.bytes.Load()) / float64(r.Delivered)
	}
	sh.mu.Lock()
	slices.Sort(sh.lat)
	if k := len(sh.lat); k > 0 {
		q := func(p float64) float64 { return float64(sh.lat[min(int(p*float64(k)), k-1)].Microseconds()) / 1000 }
		r.P50, r.P99, r.P999 = q(0.5), q(0.99), q(0.999)
	}
	sh.mu.Unlock()
	r.OK = r.Opened == int64(c.connections) && r.ConnErrors == 0 && r.Lost == 0 && r.Dup == 0 && r.PublishFailed == 0 && r.Published > 0
	return r, nil
}

// stream connects, subscribes to channel and reads publications until ctx ends. Centrifugo's JSON protocol
// may put several replies in one message, a line each; an empty object is a ping, answered with one.
func (cl *cfClient) stream(ctx context.Context, wsURL, channel string, sh *shared, opened func()) error {
	ws, _, err := websocket.Dial(ctx, wsURL, nil) //nolint:bodyclose // coder/websocket: a dial's response has no body left to close
	if err != nil {
		return err
	}
	defer func() { _ = ws.CloseNow() }()
	stop := context.AfterFunc(ctx, func() { _ = ws.CloseNow() })
	defer stop()
	rctx := context.WithoutCancel(ctx)
	cmds := fmt.Sprintf("{\"id\":1,\"connect\":{}}\n{\"id\":2,\"subscribe\":{\"channel\":%q}}", channel)
	if err := ws.Write(rctx, websocket.MessageText, []byte(cmds)); err != nil {
		return err
	}
	subscribed := false
	var buf bytes.Buffer
	for {
		_, rd, err := ws.Reader(rctx)
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			return err
		}
		for line := range bytes.Lines(buf.Bytes()) {
			line = bytes.TrimSpace(line)
			switch {
			case len(line) == 0:
			case string(line) == "{}":
				if err := ws.Write(rctx, websocket.MessageText, []byte("{}")); err != nil {
					return err
				}
			case bytes.Contains(line, []byte(`"error"`)) && !bytes.Contains(line, []byte(`"push"`)):
				return fmt.Errorf("centrifugo: %s", line)
			case !subscribed && bytes.HasPrefix(line, []byte(`{"id":2`)):
				subscribed = true
				sh.opened.Add(1)
				opened()
			case bytes.HasPrefix(line, []byte(`{"push"`)):
				sh.bytes.Add(int64(len(line)))
				cl.publication(line, sh)
			}
		}
	}
}

// publication checks one push's seq against the next one expected, and samples its latency.
func (cl *cfClient) publication(line []byte, sh *shared) {
	seq, ok := field(line, `"seq":`)
	if !ok {
		return
	}
	next := cl.next.Load()
	switch {
	case next < 0 || seq == next:
		cl.delivered.Add(1)
	case seq > next:
		cl.delivered.Add(1)
		cl.lost.Add(seq - next)
	default:
		cl.dup.Add(1)
		return
	}
	cl.next.Store(seq + 1)
	if sh.measure.Load() && seq%10 == 0 { // a tenth of the latencies: enough for p999 over 3 million
		if ts, ok := field(line, `"ts":`); ok {
			d := time.Since(time.Unix(0, ts))
			sh.mu.Lock()
			sh.lat = append(sh.lat, d)
			sh.mu.Unlock()
		}
	}
}

// field reads the integer after name in b.
func field(b []byte, name string) (int64, bool) {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return 0, false
	}
	rest := b[i+len(name):]
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n, err == nil
}

// publisher publishes the load tool's values through Centrifugo's HTTP API, one request at a time.
type publisher struct {
	hc      *http.Client
	api     string
	channel string
	size    int
	failed  int64
	lastErr error
}

// run publishes at rate for d and returns how many were published (seq 0 to n-1).
func (p *publisher) run(ctx context.Context, rate float64, d time.Duration) int64 {
	total := int64(rate * d.Seconds())
	start := time.Now()
	var n int64
	for n < total {
		if wait := time.Until(start.Add(time.Duration(float64(n) / rate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		if err := p.publish(ctx, n); err != nil {
			p.failed++
			p.lastErr = err
			return n
		}
		n++
	}
	return n
}

func (p *publisher) publish(ctx context.Context, seq int64) error {
	v := value(time.Now().UnixNano(), seq, p.size)
	body := fmt.Sprintf(`{"channel":%q,"data":%s}`, p.channel, v)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.api, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return nil
}

// value is the load tool's value (loadtest/kafka.go, makeValue): {"ts":<unix nanos>,"seq":<n>,"pad":"xxx"}
// padded to size bytes.
func value(ts, seq int64, size int) []byte {
	b := fmt.Appendf(nil, `{"ts":%d,"seq":%d,"pad":"`, ts, seq)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

type procSample struct {
	cpu float64
	rss int64
}

// sample reads a process's CPU seconds (utime+stime, at 100 ticks a second) and RSS; zero without a pid.
func sample(pid int) (procSample, error) {
	if pid == 0 {
		return procSample{}, nil
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) < 13 {
		return procSample{}, errors.New("unexpected /proc stat")
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	var rss int64
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return procSample{cpu: (ut + st) / 100, rss: rss}, nil
}

// metrics reads the Go runtime's gauges from Centrifugo's /metrics.
func metrics(ctx context.Context, hc *http.Client, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(b)) {
		for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines"} {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				out[name], _ = strconv.ParseFloat(strings.TrimSpace(rest), 64)
			}
		}
	}
	return out, nil
}

// forceGC asks Centrifugo's pprof endpoint for a heap profile after a garbage collection.
func forceGC(ctx context.Context, hc *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/heap?gc=1", http.NoBody)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
