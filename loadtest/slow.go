package main

import (
	"context"
	"fmt"
	"math"
	"time"
)

// slow: a fraction of the connections stop reading part way through; the others are measured before and
// after, and the slow ones are checked at the end for whether the gateway closed them.
func (r *runner) slow(ctx context.Context) error {
	nSlow := int(math.Round(r.cfg.SlowFraction * float64(len(r.clients))))
	nSlow = min(max(nSlow, 1), len(r.clients)-1)
	// Spread the slow ones over the connections (and so over the gateways): every step-th one.
	isSlow := make([]bool, len(r.clients))
	step := float64(len(r.clients)) / float64(nSlow)
	for j := range nSlow {
		isSlow[int(float64(j)*step)] = true
	}
	stopRead, check := make(chan struct{}), make(chan struct{})
	var before, after histogram
	g, opened, err := r.connect(ctx, func(i int) connOpts {
		o := connOpts{url: r.streamURL(r.cfg.URLs[i%len(r.cfg.URLs)], i), measure: !isSlow[i]}
		if isSlow[i] {
			o.rcvBuf, o.stopRead, o.check, o.checkWait = r.cfg.SlowRcvBuf, stopRead, check, r.cfg.SlowCheck
		}
		return o
	}, noDelay, 0)
	r.res.Opened = opened
	if err != nil {
		return err
	}
	defer g.stop()
	r.sh.hist.Store(&before)
	gw0, err := scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic)
	if err != nil {
		return err
	}
	p0, err := r.procs()
	if err != nil {
		return err
	}
	t0 := time.Now()
	stop := r.startProducer(ctx)
	sleep(ctx, r.cfg.SlowAfter)
	close(stopRead)
	r.sh.hist.Store(&after)
	sleep(ctx, r.cfg.Duration-r.cfg.SlowAfter)
	stop()
	t1 := time.Now()
	close(check)

	var fast []*client
	for i, c := range r.clients {
		if !isSlow[i] {
			fast = append(fast, c)
		}
	}
	ends, err := r.waitCaughtUp(ctx, fast)
	if err != nil {
		return err
	}
	// The slow ones end by themselves after their check; wait for that before stopping the rest.
	sleep(ctx, r.cfg.SlowCheck+100*time.Millisecond)
	gw1, err := scrapeAll(ctx, r.hc, r.cfg.AdminURLs, r.cfg.Topic)
	if err != nil {
		return err
	}
	p1, err := r.procs()
	if err != nil {
		return err
	}
	g.stop()
	d := gw1.sub(gw0)
	r.res.Gateway = &d
	r.res.GatewayCPUSeconds = p1.CPUSeconds - p0.CPUSeconds
	r.res.Elapsed = t1.Sub(t0)
	r.res.Latency = latencyOf(&before)
	r.res.LatencyAfterSlow = latencyOf(&after)
	r.res.Slow = nSlow
	for i, c := range r.clients {
		if isSlow[i] && c.closedByGW {
			r.res.SlowClosed++
			if len(r.res.Errors) < 10 {
				r.res.Errors = append(r.res.Errors, fmt.Sprintf("slow conn %d: closed by the gateway: %v", c.n, c.closeErr))
			}
		}
	}
	r.produced()
	for _, c := range fast {
		if c.err != nil {
			r.res.ConnErrors++
		}
	}
	r.account(fast, ends)
	return nil
}
