package stream

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Live delivery goes before catch-ups. A stream that catches up (from Kafka, or from far back in the ring)
// builds and writes as fast as its socket takes it, on a goroutine of its own; a reconnect storm makes a
// hundred of them, and the scheduler would share the cores between them and the few writers that serve every
// live stream, so every live client would wait behind the storm. So a catch-up builds and writes each batch
// (a flush of its frames) under liveFirst: it waits while the writers are in a pass (at most maxYield, so that
// catch-ups still move under a load that keeps the writers always busy), and holds one of a few catch-up
// slots (half the CPUs, at least one) while it builds and writes. Live streams on goroutines of their own
// (HTTP/2, WebSocket, TLS) are not catch-ups: a stream is one while what it reads leaves more behind it.

// maxYield bounds how long a catch-up batch waits for the writers' pass to end.
const maxYield = 20 * time.Millisecond

type liveFirst struct {
	slots  chan struct{} // the catch-ups building and writing now
	passes atomic.Int32  // writer passes under way
	mu     sync.Mutex
	idle   chan struct{} // closed when passes falls to 0; nil while no catch-up waits for it

	yields atomic.Int64 // catch-up batches that waited for a pass (tests, metrics)
}

func newLiveFirst(slots int) *liveFirst {
	if slots <= 0 {
		slots = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return &liveFirst{slots: make(chan struct{}, slots)}
}

// passBegin and passEnd bracket a writer's pass.
func (g *liveFirst) passBegin() { g.passes.Add(1) }

func (g *liveFirst) passEnd() {
	if g.passes.Add(-1) != 0 {
		return
	}
	g.mu.Lock()
	if g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
}

// enter waits for the writers' pass under way, if any (at most maxYield), then for a catch-up slot; leave
// gives the slot back. It fails only when ctx ends.
func (g *liveFirst) enter(ctx context.Context) error {
	if g.passes.Load() > 0 {
		if err := g.yield(ctx); err != nil {
			return err
		}
	}
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *liveFirst) yield(ctx context.Context) error {
	g.mu.Lock()
	if g.passes.Load() == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	g.yields.Add(1)
	t := time.NewTimer(maxYield)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (g *liveFirst) leave() { <-g.slots }

// paced is a catch-up's hold on liveFirst: taken before a batch is built, given back once the batch is
// written or the catch-up waits for anything else. A nil g paces nothing.
type paced struct {
	g    *liveFirst
	held bool
}

func (p *paced) take(ctx context.Context) error {
	if p.held || p.g == nil {
		return nil
	}
	if err := p.g.enter(ctx); err != nil {
		return err
	}
	p.held = true
	return nil
}

func (p *paced) give() {
	if p.held {
		p.g.leave()
		p.held = false
	}
}
