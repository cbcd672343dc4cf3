package limit

import (
	"context"
	"sync"
)

// Local is a Store of this process's streams, in memory. A Limiter counts every stream it admits in one, so
// that it has this pod's counts when Redis cannot answer; without Redis it is the only store, and limits
// per identity are per pod.
type Local struct {
	mu sync.Mutex
	n  map[string]int // streams by key id; no entry means none
}

// NewLocal returns an empty Local store.
func NewLocal() *Local { return &Local{n: map[string]int{}} }

// Acquire takes one stream under every key, or returns a *Refusal naming the first key at its maximum.
func (l *Local) Acquire(_ context.Context, keys []Key) (Slot, error) {
	if len(keys) == 0 {
		return Slot{}, nil
	}
	ids := make([]string, len(keys))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		return Slot{}, &StoreError{Op: OpAcquire, Err: errClosed}
	}
	for i, k := range keys {
		ids[i] = k.id()
		if l.n[ids[i]] >= k.Max {
			return Slot{}, &Refusal{Kind: k.Kind, Max: float64(k.Max)}
		}
	}
	for _, id := range ids {
		l.n[id]++
	}
	return Slot{keys: ids}, nil
}

// Release gives a slot back.
func (l *Local) Release(s Slot) {
	if len(s.keys) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range s.keys {
		if l.n[id] <= 1 {
			delete(l.n, id)
		} else {
			l.n[id]--
		}
	}
}

// Count returns the streams counted under key.
func (l *Local) Count(_ context.Context, key Key) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key.id()], nil
}

// Close forgets every slot; later calls of Acquire fail.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n = nil
	return nil
}
