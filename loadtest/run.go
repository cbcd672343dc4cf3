package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runner holds one run's state.
type runner struct {
	cfg     config
	k       *kafka
	hc      *http.Client // for /readyz and /metrics only; streams use raw connections or h2Pools
	tls     *tls.Config  // --proto=h2: how the streams' connections speak TLS
	h2Dials atomic.Int64 // --proto=h2, h2c: HTTP/2 connections dialed for streams
	sh      shared
	clients []*client
	prod    produceStats
	cps     *checkpoints // resolves compact ids for the trackers
	res     result

	// extraProducers are the Kafka clients of --producers beyond the first, which produces on k's.
	extraProducers []*kgo.Client

	// endsClean is set once the server has been told to end its streams (the floor's stop): from then on, a
	// stream that reaches the end of its body has ended as it should, not failed.
	endsClean atomic.Bool

	connectBase time.Duration // the fixed part of connect's timeout; zero means 30 s (tests shorten it)
	wavesExe    string        // the program --waves-process starts; empty means this one (tests set another)
}

// streamURL is the stream URL of connection i on gateway base: /streams/{topic}, or /ws/{topic} over
// WebSocket, with acknowledgements when --ws-acks asks for them.
func (r *runner) streamURL(base string, i int) string {
	path := "/streams/"
	if r.cfg.Proto == protoWS {
		path = "/ws/"
	}
	u := base + path + strings.Join(streamTopics(r.cfg.Topic, r.cfg.Topics), ",")
	q := url.Values{}
	if r.cfg.Mode == modeIdle {
		q.Set("heartbeat", "0")
	}
	r.cfg.shapeQuery(q, i)
	if r.cfg.Proto == protoWS && r.cfg.WSAcks > 0 {
		q.Set("ack", "1")
		q.Set("max_in_flight", strconv.Itoa(r.cfg.WSMaxInFlight))
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func run(ctx context.Context, cfg config) (result, error) {
	r := &runner{cfg: cfg, hc: &http.Client{Timeout: 10 * time.Second}}
	r.res = result{
		Mode: cfg.Mode, Connections: cfg.Connections, Rate: cfg.Rate, Size: cfg.Size, Topic: cfg.Topic,
		Sources: sourceSpan(cfg.Connections, cfg.PerSource), Proto: cfg.Proto,
	}
	if cfg.Proto == protoH2 || cfg.Proto == protoH2C {
		r.res.StreamsPerConn = cfg.StreamsPerConn
	}
	if cfg.Proto == protoWS {
		r.res.WSAcks = cfg.WSAcks
	}
	var err error
	if r.tls, err = clientTLS(cfg.Proto, cfg.Insecure, cfg.CAFile); err != nil {
		return r.res, err
	}
	// A wave's clients hold sockets of their own next to the live readers' (steady with --waves).
	if err := raiseNoFile(sysRlimits{}, noFileFor(cfg.Connections+cfg.Waves)); err != nil {
		return r.res, err
	}
	if cfg.Mode == modeFloor {
		err := r.floor(ctx)
		return r.res, err
	}
	perGateway := (cfg.Connections + cfg.Waves + len(cfg.URLs) - 1) / len(cfg.URLs)
	if err := checkGatewayNoFile("/proc", cfg.GatewayPIDs, perGateway); err != nil {
		return r.res, err
	}
	k, err := newKafka(cfg.Brokers, cfg.Topic)
	if err != nil {
		return r.res, err
	}
	if ts := topicsOf(cfg); ts != nil {
		k.topics = ts
	}
	defer k.close()
	k.avroID = cfg.AvroID
	r.k = k
	defer r.closeProducers()
	if err := r.prepare(ctx); err != nil {
		return r.res, err
	}
	if cfg.Mode == modeWaves {
		r.res.Connections = 0 // its clients are the waves', counted in their figures
		err := r.wavesMode(ctx)
		return r.res, err
	}
	if cfg.Mode == modeResume {
		r.res.Connections = 2 * cfg.ResumeCount
	}
	cps := newCheckpoints(cfg.Brokers, cfg.PositionTopic)
	defer cps.close()
	r.cps = cps
	r.clients = make([]*client, cfg.Connections)
	for i := range r.clients {
		r.clients[i] = &client{n: i, tr: tracker{skips: cfg.Shape != shapePlain, topics: topicsOf(cfg)}, sc: newShapeCheck(cfg, i)}
		r.clients[i].tr.cps = cps
	}
	switch cfg.Mode {
	case modeSteady:
		err = r.steady(ctx)
	case modeIdle:
		err = r.idle(ctx)
	case modeStorm:
		err = r.storm(ctx)
	case modeSlow:
		err = r.slow(ctx)
	case modeResume:
		err = r.resume(ctx)
	}
	r.res.H2Conns = r.h2Dials.Load()
	r.res.WSAcksSent = r.sh.wsAcks.Load()
	return r.res, err
}

// prepare gets Kafka and the gateways ready for a run: the topic made (--create-topic), the producers made
// and warmed up (but in the waves mode, which produces nothing), every gateway ready, and the backlog written
// (--prefill-records).
func (r *runner) prepare(ctx context.Context) error {
	if r.cfg.CreateTopic {
		for _, topic := range r.k.topics {
			tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			_, err := r.k.of(topic).ensureTopic(tctx, int32(r.cfg.Partitions))
			cancel()
			if err != nil {
				return err
			}
		}
	}
	if r.cfg.Mode != modeWaves {
		// The waves mode writes nothing: a warm-up record would land among another run's records.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := r.k.warm(wctx)
		cancel()
		if err != nil {
			return err
		}
	}
	if producesAtRate(r.cfg.Mode) {
		if err := r.openProducers(ctx); err != nil {
			return err
		}
	}
	if err := r.waitReady(ctx); err != nil {
		return err
	}
	return r.prefill(ctx)
}

// waitReady polls every gateway's /readyz (on its admin port) until it answers 200.
func (r *runner) waitReady(ctx context.Context) error {
	if r.cfg.ReadyWait == 0 {
		return nil
	}
	deadline := time.Now().Add(r.cfg.ReadyWait)
	for _, base := range r.cfg.AdminURLs {
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", http.NoBody)
			if err != nil {
				return err
			}
			resp, err := r.hc.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("gateway %s not ready after %v: %w", base, r.cfg.ReadyWait, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// group is a set of running streams with their cancel and join, and their HTTP/2 connections (nil for
// HTTP/1.1).
type group struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	h2     *h2Pool
}

// stop ends every stream of g and waits for their goroutines, then closes their HTTP/2 connections.
func (g *group) stop() {
	g.cancel()
	g.wg.Wait()
	if g.h2 != nil {
		g.h2.close()
	}
}

// openMeasured opens every connection at once on the stream of its URL (the --url targets in turn), each
// measuring its latency, and counts them in r.res.Opened.
func (r *runner) openMeasured(ctx context.Context) (*group, error) {
	g, opened, err := r.connect(ctx, func(i int) connOpts {
		return connOpts{url: r.streamURL(r.cfg.URLs[i%len(r.cfg.URLs)], i), measure: true}
	}, noDelay, 0)
	r.res.Opened = opened
	return g, err
}

// connect starts one stream per client (opts gives each one's options; delay each one's start) and waits
// until every stream has read its opening block or failed, for 30 s plus 5 ms per client plus extra. It
// returns the streams' group and how many opened.
func (r *runner) connect(ctx context.Context, opts func(i int) connOpts, delay func(i int) time.Duration, extra time.Duration) (*group, int, error) {
	gctx, cancel := context.WithCancel(ctx)
	g := &group{cancel: cancel}
	if r.cfg.Proto == protoH2 || r.cfg.Proto == protoH2C {
		g.h2 = newH2Pool(r.cfg.Proto, r.tls, &r.h2Dials)
	}
	var settled, opened atomic.Int64
	sem := make(chan struct{}, r.cfg.ConnectPar)
	for i, c := range r.clients {
		o := opts(i)
		if r.cfg.PerSource > 0 {
			o.local = sourceAddr(i, r.cfg.PerSource)
		}
		if r.cfg.Mode != modeIdle {
			// A connection that receives many frames reads them in fewer system calls; an idle one keeps
			// its memory small.
			o.readBuf = busyReadBuf
		}
		if g.h2 != nil {
			o.h2, o.h2Group = g.h2, h2GroupOf(i, len(r.cfg.URLs), r.cfg.StreamsPerConn)
		}
		if r.cfg.Proto == protoWS {
			o.ws, o.wsAckEvery = true, r.cfg.WSAcks
		}
		g.wg.Go(func() {
			if d := delay(i); d > 0 {
				select {
				case <-gctx.Done():
					settled.Add(1)
					return
				case <-time.After(d):
				}
			}
			select {
			case <-gctx.Done(): // connect gave up before this one's turn: it must not dial now
				settled.Add(1)
				return
			case sem <- struct{}{}:
			}
			var once sync.Once
			settle := func() { once.Do(func() { <-sem; settled.Add(1) }) }
			user := o.opened
			o.opened = func() {
				opened.Add(1)
				settle()
				if user != nil {
					user()
				}
			}
			err := c.stream(gctx, &r.sh, o)
			settle()
			if err != nil && gctx.Err() != nil {
				err = nil // cut off while opening by our own cancel, not a failure of the gateway's
			}
			if err != nil && r.endsClean.Load() && errors.Is(err, io.EOF) {
				err = nil // the end of the body the server was told to end
			}
			c.err = err // read only after the group is joined
			if err != nil {
				c.failed.Store(true)
				r.sh.connErrs.Add(1)
			}
		})
	}
	base := r.connectBase
	if base == 0 {
		base = 30 * time.Second
	}
	timeout := base + time.Duration(len(r.clients))*5*time.Millisecond + extra
	deadline := time.Now().Add(timeout)
	for settled.Load() < int64(len(r.clients)) {
		if time.Now().After(deadline) {
			g.stop()
			first := ""
			for _, c := range r.clients {
				if c.err != nil {
					first = fmt.Sprintf("; connection %d: %v", c.n, c.err)
					break
				}
			}
			return nil, int(opened.Load()), fmt.Errorf("only %d of %d connections opened within %v (%d failed, the others were still opening)%s",
				opened.Load(), len(r.clients), timeout, r.sh.connErrs.Load(), first)
		}
		select {
		case <-ctx.Done():
			g.stop()
			return nil, int(opened.Load()), ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return g, int(opened.Load()), nil
}

func noDelay(int) time.Duration { return 0 }

// busyReadBuf is the socket read buffer of connections that receive traffic (all modes but idle).
const busyReadBuf = 32 << 10

// self samples the tool's own process.
func self() (procSample, error) { return sampleProcs("/proc", []int{os.Getpid()}) }

// procs samples the gateway processes; zero when no pid was given.
func (r *runner) procs() (procSample, error) {
	if len(r.cfg.GatewayPIDs) == 0 {
		return procSample{}, nil
	}
	return sampleProcs("/proc", r.cfg.GatewayPIDs)
}

// cpuMark is the gateway's and the tool's CPU at one moment, the start or the end of what a mode measures.
type cpuMark struct{ gateway, tool procSample }

func (r *runner) markCPU() (cpuMark, error) {
	g, err := r.procs()
	if err != nil {
		return cpuMark{}, err
	}
	t, err := self()
	return cpuMark{gateway: g, tool: t}, err
}

// chargeCPU records the CPU the gateway and the tool took from m0 to m1.
func (r *runner) chargeCPU(m0, m1 cpuMark) {
	r.res.GatewayCPUSeconds = m1.gateway.CPUSeconds - m0.gateway.CPUSeconds
	r.res.ToolCPUSeconds = m1.tool.CPUSeconds - m0.tool.CPUSeconds
}

// waitCaughtUp waits until every listed client has everything below the topic's end offsets, or the drain
// timeout passes, and returns those end offsets.
func (r *runner) waitCaughtUp(ctx context.Context, cs []*client) ([]int64, error) {
	ends, err := r.k.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	return ends, r.waitLevel(ctx, cs, ends)
}

// waitLevel waits until every listed client that has not failed has everything below ends (the next offset
// per partition), or the drain timeout passes.
func (r *runner) waitLevel(ctx context.Context, cs []*client, ends []int64) error {
	deadline := time.Now().Add(r.cfg.DrainWait)
	for {
		all := true
		for _, c := range cs {
			if !c.failed.Load() && !c.caughtUp(ends) {
				all = false
				break
			}
		}
		if all || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// account adds the clients' loss and duplicate counts to the result, after finish.
func (r *runner) account(cs []*client, ends []int64) {
	for _, c := range cs {
		if !c.sc.skipsTail() {
			c.tr.finish(ends)
		}
		n := c.tr.counts()
		r.res.Delivered += n.Delivered
		r.res.Lost += n.Lost
		r.res.Dup += n.Dup
		r.res.BadIDs += n.BadIDs
		r.res.V1IDs += c.tr.v1Frames()
		if n.Lost > 0 || n.Dup > 0 || n.BadIDs > 0 {
			r.res.ConnsWithErrors++
			if len(r.res.Bad) < 20 {
				r.res.Bad = append(r.res.Bad, badConn{Conn: c.n, Counts: n, LastID: c.tr.last(), Err: errString(c.err)})
			}
		}
		r.res.MaxLostPerConn = max(r.res.MaxLostPerConn, n.Lost)
		r.res.MaxDupPerConn = max(r.res.MaxDupPerConn, n.Dup)
		if c.err != nil && len(r.res.Errors) < 10 {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("conn %d: %v", c.n, c.err))
		}
	}
}

// produced records the producer's counts in the result.
func (r *runner) produced() {
	r.res.Produced, r.res.ProduceFailed = r.prod.acked.Load(), r.prod.failed.Load()
	if e := r.prod.lastErr.Load(); e != nil {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("produce: %v", *e))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// measureRSS records the gateways' RSS per open connection, from a sample taken before connecting.
func (r *runner) measureRSS(before procSample, opened int) error {
	if len(r.cfg.GatewayPIDs) == 0 || opened == 0 {
		return nil
	}
	after, err := r.procs()
	if err != nil {
		return err
	}
	r.res.RSSBeforeBytes = before.RSSBytes
	r.res.RSSAfterBytes = after.RSSBytes
	r.res.RSSPerConnBytes = float64(after.RSSBytes-before.RSSBytes) / float64(opened)
	return nil
}

// idle: N connections without traffic or heartbeats; RSS per connection (the gateways' and the tool's own)
// once they are all open. Then, unless --idle-probe=0, a few records that every connection must receive:
// without them a connection the gateway had silently dropped would pass for an open one.
func (r *runner) idle(ctx context.Context) error {
	before, err := r.procs()
	if err != nil {
		return err
	}
	self0, err := self()
	if err != nil {
		return err
	}
	if r.cfg.HeapProfile != "" {
		if err := fetchHeapProfile(ctx, r.hc, r.cfg.AdminURLs[0], r.cfg.HeapProfile+".base"); err != nil {
			return err
		}
	}
	gw0, err := scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic)
	if err != nil {
		return err
	}
	drops0, dropsErr := listenDrops("/proc")
	t0 := time.Now()
	g, err := r.openMeasured(ctx)
	if err != nil {
		return err
	}
	defer g.stop()
	opened := r.res.Opened
	r.res.OpenTime = time.Since(t0)
	if drops1, err := listenDrops("/proc"); err == nil && dropsErr == nil {
		r.res.ListenDrops = drops1 - drops0
	} else {
		r.res.ListenDrops = -1
	}
	sleep(ctx, r.cfg.Duration) // let the gateway settle (GC, buffers) before measuring
	if err := r.measureRSS(before, opened); err != nil {
		return err
	}
	self1, err := self()
	if err != nil {
		return err
	}
	r.res.ToolRSSBytes = self1.RSSBytes
	r.res.ToolRSSPerConnBytes = float64(self1.RSSBytes-self0.RSSBytes) / float64(max(opened, 1))
	if r.cfg.HeapProfile != "" {
		if err := fetchHeapProfile(ctx, r.hc, r.cfg.AdminURLs[0], r.cfg.HeapProfile); err != nil {
			return err
		}
	}
	gw1, err := scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic)
	if err != nil {
		return err
	}
	d := gw1.sub(gw0)
	r.res.Gateway = &d
	if opened > 0 {
		r.res.HeapPerConnBytes = d.HeapInuse / float64(opened)
		r.res.StackPerConnBytes = d.StackInuse / float64(opened)
		r.res.GoroutinesPerConn = d.Goroutines / float64(opened)
	}
	after, err := r.procs()
	if err != nil {
		return err
	}
	r.res.GatewayCPUSeconds = after.CPUSeconds - before.CPUSeconds
	r.res.Elapsed = time.Since(t0)
	r.res.ConnErrors = r.sh.connErrs.Load()
	if r.cfg.IdleProbe == 0 {
		return nil
	}
	p0 := time.Now()
	if err := r.k.produceN(ctx, r.cfg.IdleProbe, r.cfg.Size, r.cfg.Keys, &r.prod); err != nil {
		return err
	}
	ends, err := r.waitCaughtUp(ctx, r.clients)
	if err != nil {
		return err
	}
	reached := time.Since(p0)
	g.stop()
	r.res.ConnErrors = r.sh.connErrs.Load()
	r.produced()
	r.account(r.clients, ends)
	if r.res.Lost == 0 {
		r.res.ProbeTime = reached
	}
	return nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d) //nolint:gosec // spreading reconnects needs no cryptographic randomness
}
