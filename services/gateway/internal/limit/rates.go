package limit

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Rates are token buckets per key (a token's subject, a client address): perSecond tokens a second, at most
// burst, full at first. The most recent size keys are kept; a key forgotten starts full again.
type Rates struct {
	rate, burst float64

	mu      sync.Mutex
	buckets *lru.Cache[string, *bucket]
}

// NewRates returns per-key buckets; nil when perSecond is 0 (no bound). A burst of 0 means max(1, perSecond).
func NewRates(perSecond float64, burst, size int) *Rates {
	if perSecond <= 0 {
		return nil
	}
	b := float64(burst)
	if burst <= 0 {
		b = max(1, perSecond)
	}
	c, _ := lru.New[string, *bucket](max(1, size)) // errors only for a size below 1
	return &Rates{rate: perSecond, burst: b, buckets: c}
}

// Take takes n tokens of key's bucket at now, all or none; without them it returns the wait a client is told
// (Retry-After: rounded up to seconds, spread). n above the burst is never taken.
func (r *Rates) Take(key string, n int, now time.Time) (bool, time.Duration) {
	r.mu.Lock()
	b, ok := r.buckets.Get(key)
	if !ok {
		b = &bucket{rate: r.rate, burst: r.burst, tokens: r.burst}
		r.buckets.Add(key, b)
	}
	r.mu.Unlock()
	if ok, wait := b.takeN(float64(n), now); !ok {
		return false, retryAfter(wait)
	}
	return true, 0
}

// Burst is the most tokens a bucket holds: the most taken at once.
func (r *Rates) Burst() int { return int(r.burst) }
