package main

import (
	"context"
	"fmt"
	"time"
)

// storm: clients consume, all disconnect, records keep coming while they are away, then all reconnect with
// their last ids within a window. Every client must get exactly what it missed.
func (r *runner) storm(ctx context.Context) error {
	urlOf := func(i int) string { return r.cfg.URLs[i%len(r.cfg.URLs)] }
	g, err := r.openMeasured(ctx)
	if err != nil {
		return err
	}
	var live histogram
	r.sh.hist.Store(&live)
	stop := r.startProducer(ctx)
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	sleep(ctx, r.cfg.StormConsume)

	// Everyone leaves at once, as when a pod dies.
	g.stop()
	r.sh.hist.Store(nil) // replayed frames are late by design; they are measured as resume latency below
	for _, c := range r.clients {
		if c.err != nil {
			return fmt.Errorf("storm: connection %d failed before the disconnect: %w", c.n, c.err)
		}
		if c.tr.last() == "" {
			return fmt.Errorf("storm: connection %d has no id to resume from", c.n)
		}
	}
	sleep(ctx, r.cfg.StormGap)
	if r.cfg.StormStopProducing {
		// Nothing new after the gap: the run ends once every client has what it missed, which bounds it
		// when the clients cannot keep up with the live rate.
		stop()
		stop = nil
	}

	gw0, err := scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic)
	if err != nil {
		return err
	}
	cpu0, err := r.markCPU()
	if err != nil {
		return err
	}
	// What each client must have to count as served: everything produced until the storm begins.
	target, err := r.k.endOffsets(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	for _, c := range r.clients {
		c.tr.setTarget(target, start)
	}
	next := func(i int) string {
		if r.cfg.StormCross {
			return urlOf(i + 1)
		}
		return urlOf(i)
	}
	g, reopened, err := r.connect(ctx, func(i int) connOpts {
		return connOpts{url: r.streamURL(next(i), i), lastID: r.clients[i].tr.last()}
	}, func(int) time.Duration { return jitter(r.cfg.StormWindow) },
		// Reconnected clients are served what they missed while the others are still connecting, and on a
		// small machine that can slow the connects down as much as the catch-up: give them the drain time.
		r.cfg.StormWindow+r.cfg.DrainWait)
	r.res.Reopened = reopened
	if err != nil {
		return err
	}
	defer g.stop()

	// Wait until every client has what it missed.
	deadline := time.Now().Add(r.cfg.DrainWait)
	var last time.Time
	served := 0
	for {
		served, last = 0, time.Time{}
		for _, c := range r.clients {
			if at := c.tr.reached(); !at.IsZero() {
				served++
				if at.After(last) {
					last = at
				}
			}
		}
		if served == len(r.clients) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 10*time.Millisecond)
	}
	r.res.Served = served
	if served == len(r.clients) {
		r.res.TimeToServeAll = last.Sub(start)
	}
	gw1, err := scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic)
	if err != nil {
		return err
	}
	d := gw1.sub(gw0)
	r.res.Gateway = &d
	cpu1, err := r.markCPU()
	if err != nil {
		return err
	}
	r.chargeCPU(cpu0, cpu1)

	if stop != nil {
		stop()
		stop = nil
	}
	ends, err := r.waitCaughtUp(ctx, r.clients)
	if err != nil {
		return err
	}
	g.stop()
	var resume histogram
	for _, c := range r.clients {
		if !c.firstFrame.IsZero() {
			resume.Record(c.firstFrame.Sub(c.requested))
		}
	}
	r.res.Resume = latencyOf(&resume)
	r.res.Latency = latencyOf(&live)
	r.res.Elapsed = time.Since(start)
	r.produced()
	r.res.ConnErrors = r.sh.connErrs.Load()
	r.account(r.clients, ends)
	return nil
}
