package kafkaconn

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff of failed refreshes: the first retry after about refreshBackoff, doubling up to refreshBackoffMax,
// each drawn between half and all of that (jitter: the pods of a deployment do not ask the provider in step).
const (
	refreshBackoff    = time.Second
	refreshBackoffMax = time.Minute
)

// cred is a credential with the moments it is due for refresh and stops being accepted.
type cred[T any] struct {
	val     T
	refresh time.Time
	expires time.Time
}

// refresher caches a credential (an OAuth token, AWS credentials) and gets the next one ahead of expiry, in
// the background, so that no SASL handshake waits for the identity provider while the cached credential is
// valid. Only a handshake without a valid credential (the first, or after a long outage) waits, for the one
// fetch in flight, and no longer than its context. Safe for concurrent use.
//
// The fetch runs on a goroutine of its own, started by a get that finds the credential due (or missing) and
// no fetch running or backing off; it ends with the fetch, which fetchTimeout bounds. No other goroutine
// exists, so nothing needs closing.
type refresher[T any] struct {
	fetch        func(ctx context.Context) (cred[T], error)
	now          func() time.Time
	fetchTimeout time.Duration

	mu       sync.Mutex
	cur      cred[T]
	have     bool          // cur holds a fetched credential
	running  chan struct{} // closed when the fetch in flight ends; nil when none runs
	err      error         // the last fetch's error; nil after a success
	failures int           // failed fetches since the last success
	retryAt  time.Time     // no fetch before this after a failure
}

func newRefresher[T any](fetch func(context.Context) (cred[T], error), now func() time.Time) *refresher[T] {
	return &refresher[T]{fetch: fetch, now: now, fetchTimeout: tokenTimeout}
}

// get returns the cached credential while it is valid, starting a background fetch when it is due; without
// a valid one it waits for a fetch (ctx permitting), or returns the last fetch's error while backing off.
func (r *refresher[T]) get(ctx context.Context) (T, error) {
	var zero T
	r.mu.Lock()
	now := r.now()
	if r.have && now.Before(r.cur.expires) {
		if !now.Before(r.cur.refresh) && r.running == nil && !now.Before(r.retryAt) {
			r.start()
		}
		v := r.cur.val
		r.mu.Unlock()
		return v, nil
	}
	if r.running == nil {
		if r.err != nil && now.Before(r.retryAt) {
			err := r.err
			r.mu.Unlock()
			return zero, err
		}
		r.start()
	}
	done := r.running
	r.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.have && r.now().Before(r.cur.expires):
		return r.cur.val, nil
	case r.err != nil:
		return zero, r.err
	}
	return zero, errors.New("kafkaconn: the credential fetched has already expired")
}

// start runs a fetch in the background. r.mu must be held.
func (r *refresher[T]) start() {
	done := make(chan struct{})
	r.running = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), r.fetchTimeout)
		c, err := r.fetch(ctx)
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.running = nil
		if err != nil {
			r.err = err
			r.failures++
			r.retryAt = r.now().Add(backoff(r.failures))
			return
		}
		r.cur, r.have, r.err, r.failures, r.retryAt = c, true, nil, 0, time.Time{}
	}()
}

// settle waits for the fetch in flight, if any: for tests, which then see its outcome.
func (r *refresher[T]) settle() {
	r.mu.Lock()
	done := r.running
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}

// backoff is the wait after the n-th failed fetch in a row (n >= 1): refreshBackoff doubled n-1 times, at most
// refreshBackoffMax, drawn between half and all of it.
func backoff(n int) time.Duration {
	d := refreshBackoffMax
	if n < 8 {
		d = min(refreshBackoff<<(n-1), refreshBackoffMax)
	}
	return d/2 + rand.N(d/2+1) //nolint:gosec // jitter, not a secret
}
