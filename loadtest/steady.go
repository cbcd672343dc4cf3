package main

import (
	"context"
	"time"
)

// steady: N connections, records at the rate for the duration; latency, throughput and loss. With --waves,
// resume waves (waves.go) come every --wave-every while producing, from goroutines of this process or, with
// --waves-process, from a process of their own (wavesproc.go); the live readers' latency is also kept per
// --wave-every window, with or without waves, so that a run without them is the baseline window by window.
func (r *runner) steady(ctx context.Context) error {
	before, err := r.procs()
	if err != nil {
		return err
	}
	g, err := r.openMeasured(ctx)
	if err != nil {
		return err
	}
	defer g.stop()
	if err := r.measureRSS(before, r.res.Opened); err != nil {
		return err
	}
	win := newLatencyWindows(&r.sh, r.cfg.WaveEvery, r.cfg.Duration)
	var m steadyMarks
	if m.p0, err = r.procs(); err != nil {
		return err
	}
	if m.s0, err = self(); err != nil {
		return err
	}
	if r.cps != nil {
		if m.gw0, err = scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic); err != nil {
			return err
		}
	}
	m.f0, m.t0 = r.sh.frames.Load(), time.Now()
	for _, c := range r.clients {
		if c.sc != nil {
			c.sc.start(r.prod.seq.Load())
		}
	}
	stop := r.startProducer(ctx)
	stopWindows := win.start(ctx, m.t0)
	waitWaves := r.startWaves(ctx, m.t0)
	sleep(ctx, r.cfg.Duration)
	stop()
	m.f1, m.t1 = r.sh.frames.Load(), time.Now()
	if r.cps != nil {
		if m.gw1, err = scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic); err != nil {
			return err
		}
	}
	for _, c := range r.clients {
		if c.sc != nil {
			c.sc.ended(r.prod.seq.Load())
		}
	}
	// Every record is acknowledged now: the readers' catch-up is timed from here to the topic's end offsets.
	ends, err := r.k.endOffsets(ctx)
	if err == nil {
		setCatchUpTargets(r.clients, ends)
	}
	if waitWaves != nil {
		// The last wave came before producing stopped: its clients hang up within --wave-cut of it.
		r.res.Waves = waitWaves()
	}
	stopWindows()
	if err != nil {
		return err
	}
	if err := r.waitLevel(ctx, r.clients, ends); err != nil {
		return err
	}
	m.catchUp, m.caughtUp = catchUp(r.clients, m.t1, time.Now())
	if m.p1, err = r.procs(); err != nil {
		return err
	}
	if m.s1, err = self(); err != nil {
		return err
	}
	m.f2 = r.sh.frames.Load()
	g.stop()
	r.steadyResult(m, win, ends)
	return nil
}

// steadyMarks are steady's readings at the start of producing (0), at its end (1) and once every reader
// caught up (2): the gateways' and the tool's process samples, the frames received, and with compact ids
// the gateways' checkpoint counters; and how long after the end of producing the last reader caught up
// (catchUp), caughtUp false when one did not.
type steadyMarks struct {
	p0, p1, s0, s1 procSample
	gw0, gw1       gatewayCounters
	f0, f1, f2     int64
	t0, t1         time.Time
	catchUp        time.Duration
	caughtUp       bool
}

// steadyResult fills the result of a steady run from its marks, its latency windows and the topic's end
// offsets the readers caught up to, once every reader has been joined.
func (r *runner) steadyResult(m steadyMarks, win *latencyWindows, ends []int64) {
	r.res.ToolCPUSeconds = m.s1.CPUSeconds - m.s0.CPUSeconds
	if m.p0.Writes >= 0 && m.p1.Writes > m.p0.Writes {
		r.res.GatewayWrites = m.p1.Writes - m.p0.Writes
		r.res.FramesPerWrite = float64(m.f2-m.f0) / float64(r.res.GatewayWrites)
	}
	r.res.Elapsed = m.t1.Sub(m.t0)
	r.res.DeliveriesPerSec = float64(m.f1-m.f0) / m.t1.Sub(m.t0).Seconds()
	r.res.GatewayCPUSeconds = m.p1.CPUSeconds - m.p0.CPUSeconds
	r.res.Latency = latencyOf(win.total())
	r.res.LatencyWindows = win.latencies()
	r.produced()
	r.res.Producers = r.cfg.Producers
	r.res.ProducerInFlight = r.cfg.producerWindow()
	r.res.ProducedPerSec = float64(r.res.Produced) / r.res.Elapsed.Seconds()
	r.res.CatchUpSeconds, r.res.CaughtUp = m.catchUp.Seconds(), m.caughtUp
	r.res.Bound = boundOf(r.cfg.Rate, r.res.ProducedPerSec, m.catchUp, m.caughtUp)
	r.res.ConnErrors = r.sh.connErrs.Load()
	r.account(r.clients, ends)
	r.shapeResult(r.res.Elapsed)
	if f := r.sh.frames.Load(); f > 0 {
		r.res.V1Share = float64(r.res.V1IDs) / float64(f)
		r.res.IDBytesPerFrame = float64(r.sh.idBytes.Load()) / float64(f)
		r.res.FrameBytesPerFrame = float64(r.sh.bodyBytes.Load()) / float64(f)
	}
	if n, b := r.cps.read(); n > 0 {
		r.res.Checkpoints, r.res.CheckpointBytesPerSec = n, float64(b)/r.res.Elapsed.Seconds()
	}
	if d := m.gw1.sub(m.gw0); d.CheckpointsAcked > 0 {
		r.res.CheckpointAckMs = 1000 * d.CheckpointAckSeconds / d.CheckpointsAcked
	}
	if r.res.GatewayCPUSeconds > 0 {
		r.res.DeliveriesPerCPUSecond = float64(r.res.Delivered) / r.res.GatewayCPUSeconds
	}
}
