package app

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// hold counts one more stream holding l, which the renewer then keeps asking about; release gives it back.
func (h *authHook) hold(l *hookLease) {
	h.mu.Lock()
	l.held++
	h.held[l] = struct{}{}
	h.mu.Unlock()
}

func (h *authHook) release(l *hookLease) {
	h.mu.Lock()
	if l.held--; l.held <= 0 {
		delete(h.held, l)
	}
	h.mu.Unlock()
}

// hookRenewers bounds the renewals asked at once.
const hookRenewers = 16

// renewAhead is how long before a held lease runs out it is asked again: a fifth of the TTL, at least 2 s,
// so that a hook that answers within its timeout extends it before any stream reaches its end.
func (h *authHook) renewAhead() time.Duration {
	return max(h.cfg.TTL/5, 2*time.Second, h.cfg.Timeout+time.Second)
}

// renewLoop asks the hook again about every held lease that runs out soon, once a second, until ctx ends;
// it returns once the renewals it started have ended.
func (h *authHook) renewLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, hookRenewers)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, l := range h.due() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				h.renew(l)
			})
		}
	}
}

// due returns the held leases to ask about now, marking them as being asked; leases that ran out are let go.
func (h *authHook) due() []*hookLease {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*hookLease
	for l := range h.held {
		until := l.renewal.Until()
		switch {
		case !now.Before(until) || l.ended:
			delete(h.held, l) // its streams end (or ended) at until: nothing to renew
		case !l.renewing && !now.Add(h.renewAhead()).Before(until):
			l.renewing = true
			out = append(out, l)
		}
	}
	return out
}

// renew asks the hook about l again: the same answer moves l's end on; a refusal, or an answer with another
// subject or scope, leaves it, so that its streams end at it (token-expired) and reconnect under the new
// answer; a failure to answer is asked again on the next tick, until l runs out.
func (h *authHook) renew(l *hookLease) {
	next, err := h.ask(context.Background(), l.url, l.req)
	h.mu.Lock()
	defer h.mu.Unlock()
	l.renewing = false
	switch {
	case err == nil && next.scope == l.scope && next.claims.Subject == l.claims.Subject:
		l.renewal.Extend(next.claims.Expires)
		h.stats.renewed.Add(1)
		return
	case err != nil:
		var r *hookRefusal
		if errors.As(err, &r) && r.status == http.StatusServiceUnavailable {
			return // not an answer: ask again, while there is time
		}
	}
	l.ended = true
	h.stats.ended.Add(1)
	if cur, ok := h.cache.Peek(l.key); ok && cur == l {
		h.cache.Remove(l.key)
	}
	if err == nil {
		next.key = l.key
		h.cache.Add(l.key, next) // new streams get the new answer
	}
}

// Hook call results, the label of ssegate_auth_hook_calls_total.
const (
	hookAllowed = iota
	hookDenied
	hookError
	hookTimeout
	numHookResults
)

var hookResultNames = [numHookResults]string{"allowed", "denied", "error", "timeout"}

// hookStats counts what the hook did, for the metrics.
type hookStats struct {
	calls       [numHookResults]atomic.Int64
	nanos       atomic.Int64 // time spent in calls, in all
	cacheHits   atomic.Int64
	cacheMisses atomic.Int64
	renewed     atomic.Int64 // held answers the hook gave again, which moved their streams' end
	ended       atomic.Int64 // held answers the hook refused or changed on renewal: their streams end
}

func (s *hookStats) result(r int)            { s.calls[r].Add(1) }
func (s *hookStats) observe(d time.Duration) { s.nanos.Add(int64(d)) }
