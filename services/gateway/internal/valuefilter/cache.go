package valuefilter

import (
	"container/list"
	"sync"
)

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

// programCache keeps compiled programs, keyed by their expression, within a budget of estimated memory; the
// least recently used go first. A count would not bound it: a program of a short expression takes about
// 3 KiB, one of 1 KB with regexes up to 400 KiB, so 4,096 of them took from 12 MiB to over a GiB.
type programCache struct {
	mu     sync.Mutex
	m      map[string]*list.Element // of *Program
	lru    list.List                // front: the most recently used
	cost   int
	budget int
}

func newProgramCache(budget int) *programCache {
	return &programCache{m: map[string]*list.Element{}, budget: budget}
}

// get returns the program of expr, if kept, and marks it used.
func (c *programCache) get(expr string) (*Program, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[expr]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*Program), true
}

// add keeps p, dropping the least recently used programs beyond the budget.
func (c *programCache) add(p *Program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[p.src]; ok {
		return // compiled by another stream meanwhile
	}
	c.m[p.src] = c.lru.PushFront(p)
	c.cost += p.cost
	for c.cost > c.budget && c.lru.Len() > 1 {
		old := c.lru.Remove(c.lru.Back()).(*Program)
		delete(c.m, old.src)
		c.cost -= old.cost
	}
}

// purge drops every program (tests).
func (c *programCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.lru.Init()
	c.cost = 0
}
