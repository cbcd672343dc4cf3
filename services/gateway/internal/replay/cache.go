package replay

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// blockCache is the pool's LRU of read blocks, bounded by bytes: the bytes of the blocks it holds
// (block.size) and those of the blocks being read (the flights' copies, see hold), together at most max. A
// flight cannot be evicted, so when flights grow, cached blocks go, least recently used first; only when the
// flights alone hold more than max (Config.Readers blocks of records larger than max/Readers each) is the
// total above max, and then the cache is empty. A block larger than max is never cached.
//
// Its mutex is a leaf: no other lock is taken while it is held, and it is never held across a call out.
type blockCache struct {
	max   int64
	ttl   time.Duration
	gauge *atomic.Int64 // Stats.CacheBytes: cached + flying, kept up to date

	mu     sync.Mutex
	lru    *list.List // of *cacheEntry, most recently used first
	byKey  map[blockKey]*list.Element
	cached int64 // bytes of the blocks in lru
	flying int64 // bytes of the records the flights hold
	peak   int64 // the most cached + flying has been
}

// cacheEntry is a block in the cache, with when it was read.
type cacheEntry struct {
	key blockKey
	b   *block
	at  time.Time
}

func newBlockCache(maxBytes int64, ttl time.Duration, gauge *atomic.Int64) *blockCache {
	return &blockCache{max: maxBytes, ttl: ttl, gauge: gauge, lru: list.New(), byKey: map[blockKey]*list.Element{}}
}

// get returns the block of key, if it is cached and not older than the TTL, and marks it used.
func (c *blockCache) get(key blockKey) (*block, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	ce := e.Value.(*cacheEntry)
	if time.Since(ce.at) >= c.ttl {
		c.remove(e)
		c.settle()
		return nil, false
	}
	c.lru.MoveToFront(e)
	return ce.b, true
}

// hold counts n more bytes held by a flight (negative: released), evicting cached blocks to make room.
func (c *blockCache) hold(n int64) {
	c.mu.Lock()
	c.flying += n
	c.settle()
	c.mu.Unlock()
}

// land moves a landed flight's bytes out of the flights' count and caches b (nil: the flight failed; a
// block larger than the bound is not cached), replacing any block of key the cache held.
func (c *blockCache) land(key blockKey, b *block, flew int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flying -= flew
	if e, ok := c.byKey[key]; ok {
		c.remove(e)
	}
	if b != nil && b.size <= c.max {
		c.byKey[key] = c.lru.PushFront(&cacheEntry{key: key, b: b, at: time.Now()})
		c.cached += b.size
	}
	c.settle()
}

// purge empties the cache.
func (c *blockCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		c.remove(c.lru.Back())
	}
	c.settle()
}

// peakBytes returns the most the cached blocks and the flights have held together.
func (c *blockCache) peakBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

// remove takes e out of the cache. It needs c.mu held.
func (c *blockCache) remove(e *list.Element) {
	ce := c.lru.Remove(e).(*cacheEntry)
	delete(c.byKey, ce.key)
	c.cached -= ce.b.size
}

// settle evicts least recently used blocks until the cache and the flights fit the bound (or the cache is
// empty), and records the total. It needs c.mu held.
func (c *blockCache) settle() {
	for c.cached+c.flying > c.max && c.lru.Len() > 0 {
		c.remove(c.lru.Back())
	}
	total := c.cached + c.flying
	c.peak = max(c.peak, total)
	c.gauge.Store(total)
}
