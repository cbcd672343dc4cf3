package feed

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// RateHalfLife is the default of Config.RingHalfLife.
const RateHalfLife = time.Minute

// balancer moves a pod-wide budget between the topics' rings by their traffic: every RingRebalance it
// measures each ring's frame bytes published per second, smooths them (RingHalfLife) and sets the rings'
// capacities from ring.Split. It is owned by the balance loop (Feed.Run); capacities only ever change there.
type balancer struct {
	budget, floor int64
	halfLife      time.Duration
	rings         []*ring.Ring
	fixed         []int64 // per ring, its override; zero for none
	last          []uint64
	rate          []float64 // smoothed frame bytes per second
	at            time.Time
	primed        bool // rate holds a measurement
}

// ringCapacities returns each topic's ring capacity at start (topics in names' order), and a balancer when
// the rings share a budget. Without a budget a topic's ring is its override or RingBytes. With one, overrides
// are fixed and the other topics share the rest equally until traffic is measured.
func ringCapacities(cfg Config, names []string) ([]int64, *balancer, error) {
	caps := make([]int64, len(names))
	if cfg.RingBudget <= 0 {
		for i, name := range names {
			caps[i] = int64(cfg.RingBytes)
			if b, ok := cfg.TopicRingBytes[name]; ok {
				caps[i] = b
			}
			if caps[i] <= 0 {
				return nil, nil, fmt.Errorf("feed: ring bytes of topic %s must be positive, got %d", name, caps[i])
			}
		}
		return caps, nil, nil
	}
	if cfg.RingFloor <= 0 {
		return nil, nil, fmt.Errorf("feed: ring floor must be positive, got %d", cfg.RingFloor)
	}
	b := &balancer{
		budget: cfg.RingBudget, floor: cfg.RingFloor, halfLife: cfg.RingHalfLife, fixed: make([]int64, len(names)),
		last: make([]uint64, len(names)), rate: make([]float64, len(names)),
	}
	need := int64(0)
	for i, name := range names {
		if v, ok := cfg.TopicRingBytes[name]; ok {
			if v <= 0 {
				return nil, nil, fmt.Errorf("feed: ring bytes of topic %s must be positive, got %d", name, v)
			}
			b.fixed[i] = v
			need += v
			continue
		}
		need += cfg.RingFloor
	}
	if need > cfg.RingBudget {
		return nil, nil, fmt.Errorf("feed: ring budget %d is less than the overrides and a floor for every other topic (%d)", cfg.RingBudget, need)
	}
	return b.split(), b, nil
}

// split returns the capacities for the current rates.
func (b *balancer) split() []int64 {
	shares := make([]ring.Share, len(b.fixed))
	for i := range shares {
		shares[i] = ring.Share{Rate: b.rate[i], Fixed: b.fixed[i]}
	}
	return ring.Split(b.budget, b.floor, shares)
}

// step measures the rings' traffic since the previous step and sets their capacities.
func (b *balancer) step(now time.Time) {
	dt := now.Sub(b.at).Seconds()
	if dt <= 0 {
		return
	}
	halfLife := b.halfLife
	if halfLife <= 0 {
		halfLife = RateHalfLife
	}
	w := 1 - math.Exp2(-dt/halfLife.Seconds())
	for i, r := range b.rings {
		p := r.Stats().Published
		sample := float64(p-b.last[i]) / dt
		if b.primed {
			b.rate[i] += w * (sample - b.rate[i])
		} else {
			b.rate[i] = sample
		}
		b.last[i] = p
	}
	b.primed, b.at = true, now
	b.apply(b.split())
}

// apply sets the rings' capacities: the shrinking ones first, so that at no moment do the capacities add up
// to more than the budget.
func (b *balancer) apply(caps []int64) {
	for i, r := range b.rings {
		if c := int(caps[i]); c < r.Stats().Capacity {
			r.SetCapacity(c)
		}
	}
	for i, r := range b.rings {
		if c := int(caps[i]); c > r.Stats().Capacity {
			r.SetCapacity(c)
		}
	}
}

// loop rebalances the budget every interval until ctx ends.
func (b *balancer) loop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	b.at = time.Now()
	for i, r := range b.rings {
		b.last[i] = r.Stats().Published
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.step(now)
		}
	}
}
