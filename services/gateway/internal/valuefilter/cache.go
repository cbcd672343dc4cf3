package valuefilter

import "sync"

// valueCache keeps decoded values, keyed by their bytes, within a budget of estimated memory; the oldest go
// first. Streams filter the same records at different moments (each reads the ring at its own pace), so the
// cache must cover the spread between the slowest and the fastest stream, not a count of records: with a
// count of 1,024, a pod whose 1,000 filtered streams drifted more than a second apart at 1,000 records/s
// decoded every value again for every stream, which made the drift worse (docs/benchmarks.md). Records come
// in order, so first in, first out is the recency that matters, and a lookup takes only a read lock.
type valueCache struct {
	mu     sync.RWMutex
	m      map[string]any
	order  []string // keys in insertion order; order[head:] are in m
	head   int
	cost   int // estimated bytes held
	budget int
}

// entryCost estimates what a value of n bytes costs once decoded and kept: its key, and a decoded JSON object
// of small fields takes about three times its text.
func entryCost(n int) int { return 4*n + 128 }

func newValueCache(budget int) *valueCache {
	return &valueCache{m: map[string]any{}, budget: budget}
}

func (c *valueCache) get(value []byte) (any, bool) {
	c.mu.RLock()
	v, ok := c.m[string(value)]
	c.mu.RUnlock()
	return v, ok
}

// add keeps v as value's decoded form, dropping the oldest entries beyond the budget.
func (c *valueCache) add(value []byte, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[string(value)]; ok {
		return // another stream decoded it meanwhile
	}
	k := string(value)
	c.m[k] = v
	c.order = append(c.order, k)
	c.cost += entryCost(len(k))
	for c.cost > c.budget && c.head < len(c.order) {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		delete(c.m, old)
		c.cost -= entryCost(len(old))
	}
	if c.head > 4096 && c.head > len(c.order)/2 {
		c.order = append(make([]string, 0, 2*(len(c.order)-c.head)), c.order[c.head:]...)
		c.head = 0
	}
}

// len returns how many values are kept.
func (c *valueCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
