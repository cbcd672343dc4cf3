package limit

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are a Limiter's counters. The zero value is ready to use.
type Stats struct {
	// Open counts the streams admitted and not yet released.
	Open atomic.Int64
	// Refused counts streams refused, by Kind (KindStore: the store could not answer, fail-closed).
	Refused [numKinds]atomic.Int64
	// FailedOpen counts streams admitted on this pod's own counts because the store could not answer
	// (fail-open).
	FailedOpen atomic.Int64
}

// Limiter admits new streams. See the package overview.
type Limiter struct {
	maxStreams int64
	bucket     *bucket // nil: no rate limit
	maxIP      int
	maxSubject int
	local      *Local
	store      Store // nil: identities are counted by local alone
	failOpen   bool
	timeout    time.Duration
	log        *slog.Logger

	// Stats are the limiter's counters, read by metrics.
	Stats Stats

	logMu    sync.Mutex
	loggedAt time.Time
}

// Option configures a Limiter.
type Option func(*Limiter) error

// WithMaxStreams bounds the streams open at once on this pod. Default 0: no bound.
func WithMaxStreams(n int) Option {
	return func(l *Limiter) error {
		if n < 0 {
			return errors.New("limit: the maximum of streams must not be negative")
		}
		l.maxStreams = int64(n)
		return nil
	}
}

// WithRate bounds the new streams per second on this pod, with bursts of up to burst streams (a token
// bucket, full at start). A burst of 0 means max(1, perSecond). Default 0: no bound.
func WithRate(perSecond float64, burst int) Option {
	return func(l *Limiter) error {
		if perSecond < 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || burst < 0 {
			return errors.New("limit: the rate and the burst must not be negative")
		}
		if perSecond == 0 {
			l.bucket = nil
			return nil
		}
		b := float64(burst)
		if burst == 0 {
			b = max(1, perSecond)
		}
		l.bucket = &bucket{rate: perSecond, burst: b, tokens: b}
		return nil
	}
}

// WithMaxPerIP bounds the streams of one client address (an IPv6 /64), cluster-wide with a shared store.
// Default 0: no bound.
func WithMaxPerIP(n int) Option {
	return func(l *Limiter) error {
		if n < 0 {
			return errors.New("limit: the maximum per address must not be negative")
		}
		l.maxIP = n
		return nil
	}
}

// WithMaxPerSubject bounds the streams of one token subject, cluster-wide with a shared store; anonymous
// streams (subject "") are not counted. Default 0: no bound.
func WithMaxPerSubject(n int) Option {
	return func(l *Limiter) error {
		if n < 0 {
			return errors.New("limit: the maximum per subject must not be negative")
		}
		l.maxSubject = n
		return nil
	}
}

// WithStore counts identities in s (a Redis store, shared by every pod) besides this pod's own counts. The
// Limiter owns s: Close closes it. Default none: the limits per identity are per pod.
func WithStore(s Store) Option {
	return func(l *Limiter) error {
		l.store = s
		return nil
	}
}

// WithFailOpen decides what happens when the store cannot answer: true admits the stream if this pod's own
// counts allow it (logged, and counted in Stats.FailedOpen); false refuses it with a *Refusal of KindStore.
// Default true.
func WithFailOpen(open bool) Option {
	return func(l *Limiter) error {
		l.failOpen = open
		return nil
	}
}

// WithStoreTimeout bounds how long Admit waits for the store. Default DefaultTimeout; at least 1ms.
func WithStoreTimeout(d time.Duration) Option {
	return func(l *Limiter) error {
		if d < time.Millisecond {
			return errors.New("limit: the store timeout must be at least 1ms")
		}
		l.timeout = d
		return nil
	}
}

// WithLimiterLogger sets where fail-open admissions are logged (at most one line every 10 s). Default
// slog.Default().
func WithLimiterLogger(log *slog.Logger) Option {
	return func(l *Limiter) error {
		l.log = log
		return nil
	}
}

// New returns a Limiter. Without options it admits every stream (and still counts them).
func New(opts ...Option) (*Limiter, error) {
	l := &Limiter{local: NewLocal(), failOpen: true, timeout: DefaultTimeout, log: slog.Default()}
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Lease is one admitted stream. Release it when the stream ends.
type Lease struct {
	l             *Limiter
	local, shared Slot
	released      atomic.Bool
}

// Release gives the stream's slots back. Only the first call does anything, and none blocks. A nil Lease
// is fine.
func (s *Lease) Release() {
	if s == nil || s.released.Swap(true) {
		return
	}
	s.l.Stats.Open.Add(-1)
	s.l.local.Release(s.local)
	if s.l.store != nil {
		s.l.store.Release(s.shared)
	}
}

// Admit decides whether a new stream from client address ip (the zero Addr when unknown: not counted per
// address) with token subject ("" when anonymous: not counted per subject) may start. It returns a Lease,
// or a *Refusal with the time the client should wait: of KindStore (matching ErrStoreUnavailable) when the
// store cannot answer and the limiter fails closed. The checks go from the cheapest: the pod's rate (so that a flood never
// reaches Redis), the pod's open streams, this pod's counts per identity, then the store's.
func (l *Limiter) Admit(ctx context.Context, ip netip.Addr, subject string) (*Lease, error) {
	if l.bucket != nil {
		if ok, wait := l.bucket.take(time.Now()); !ok {
			l.Stats.Refused[KindRate].Add(1)
			return nil, &Refusal{Kind: KindRate, Max: l.bucket.rate, RetryAfter: retryAfter(wait)}
		}
	}
	if n := l.Stats.Open.Add(1); l.maxStreams > 0 && n > l.maxStreams {
		l.Stats.Open.Add(-1)
		l.Stats.Refused[KindStreams].Add(1)
		return nil, &Refusal{Kind: KindStreams, Max: float64(l.maxStreams), RetryAfter: retryAfter(0)}
	}
	var keys []Key
	if l.maxIP > 0 && ip.IsValid() {
		keys = append(keys, IPKey(ip, l.maxIP))
	}
	if l.maxSubject > 0 && subject != "" {
		keys = append(keys, SubjectKey(subject, l.maxSubject))
	}
	lease := &Lease{l: l}
	var err error
	if lease.local, err = l.local.Acquire(ctx, keys); err != nil {
		return nil, l.refused(err)
	}
	if l.store == nil || len(keys) == 0 {
		return lease, nil
	}
	sctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	lease.shared, err = l.store.Acquire(sctx, keys)
	var se *StoreError
	switch {
	case err == nil:
		return lease, nil
	case errors.As(err, &se) && l.failOpen && ctx.Err() == nil:
		// Kept with its provisional shared slot, which the store writes once Redis answers again.
		l.Stats.FailedOpen.Add(1)
		l.logFailOpen(err)
		return lease, nil
	default:
		l.store.Release(lease.shared)
		l.local.Release(lease.local)
		return nil, l.refused(err)
	}
}

// refused counts a refusal after the stream was counted as open, and undoes that count.
func (l *Limiter) refused(err error) error {
	l.Stats.Open.Add(-1)
	var r *Refusal
	if !errors.As(err, &r) {
		r = &Refusal{Kind: KindStore, Err: err}
	}
	l.Stats.Refused[r.Kind].Add(1)
	r.RetryAfter = retryAfter(0)
	return r
}

// Count returns the streams counted under key: by every pod with a shared store, else by this one.
func (l *Limiter) Count(ctx context.Context, key Key) (int, error) {
	if l.store != nil {
		return l.store.Count(ctx, key)
	}
	return l.local.Count(ctx, key)
}

// Close closes the store, which gives back the slots it still holds. Leases released later only update
// this pod's counts.
func (l *Limiter) Close() error {
	if l.store == nil {
		return nil
	}
	return l.store.Close()
}

func (l *Limiter) logFailOpen(err error) {
	l.logMu.Lock()
	now := time.Now()
	log := now.Sub(l.loggedAt) >= 10*time.Second
	if log {
		l.loggedAt = now
	}
	l.logMu.Unlock()
	if log {
		l.log.Warn("quota store unavailable; admitting streams on this pod's own counts (fail-open)", "err", err)
	}
}

// retryAfter is the wait a refused client is told: at least wait, rounded up to whole seconds, plus a random
// 0 to 4 s, so that refused clients do not all come back at the same moment.
func retryAfter(wait time.Duration) time.Duration {
	s := max(1, int64(math.Ceil(wait.Seconds())))
	return time.Duration(s+rand.Int64N(5)) * time.Second //nolint:gosec // spreading retries needs no cryptographic randomness
}

// bucket is a token bucket: rate tokens a second, at most burst of them.
type bucket struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take takes a token at now; without one it returns how long until the next.
func (b *bucket) take(now time.Time) (bool, time.Duration) { return b.takeN(1, now) }

// takeN takes n tokens at now, all or none; without them it returns how long until there are.
func (b *bucket) takeN(n float64, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		if d := now.Sub(b.last).Seconds(); d > 0 {
			b.tokens = min(b.burst, b.tokens+d*b.rate)
		}
	}
	b.last = now
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	if n > b.burst {
		return false, time.Duration(b.burst / b.rate * float64(time.Second))
	}
	return false, time.Duration((n - b.tokens) / b.rate * float64(time.Second))
}
