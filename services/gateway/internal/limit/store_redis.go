package limit

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the Redis store.
const (
	// DefaultExpiry is how long a slot outlives the last refresh of its pod.
	DefaultExpiry = 30 * time.Second
	// DefaultPrefix starts every key of the store.
	DefaultPrefix = "ssegate:gateway:quota:"
	// DefaultTimeout bounds each call to Redis.
	DefaultTimeout = time.Second
)

// How long a cancel mark lives, and how many cancels a store keeps sending (see acquireScript).
const (
	// markLife is longer than Linux keeps sending what a connection could not deliver (tcp_retries2, about
	// 15 minutes): an acquire that has not reached Redis by then never will.
	markLife = 16 * time.Minute
	// maxCancels bounds the cancels waiting for Redis to answer; beyond it the oldest are dropped, and their
	// slots, if their acquire lands, expire as any other.
	maxCancels = 10000
)

// How the counts are kept in Redis. Each identity is a sorted set, <prefix><kind>:<name>, whose members are
// the streams counted under it (<pod>:<sequence>), each scored with the time (Redis's clock, in ms) at which
// it expires. A pod refreshes the scores of its own members every expiry/3; a member whose pod stopped
// refreshing (SIGKILL, a network partition) is past its score within the expiry and is no longer counted:
// every script first removes the members whose time has passed. Each set's own TTL is pushed to the expiry
// whenever a member is scored, so a set outlives its newest member and no more. Time is Redis's (TIME in the
// scripts), so the pods' clocks need not agree.
//
// An acquire whose answer does not come in time (Redis stalled, the network cut) may still run later: its
// request is on its way, and Redis runs it when it gets it, long after the stream was refused (fail-closed)
// or admitted and ended (fail-open). Its slot is "unsure" (Slot.unsure), and giving it back sends a cancel
// (cancelScript) instead of a plain removal: it removes the member and leaves a mark,
// <prefix>cancel:<member>, that the acquire script checks first. Whichever of the two runs first, no slot
// stays: a cancel that runs after the acquire removes its member, an acquire that runs after the cancel finds
// the mark and takes nothing. The store's goroutine sends a cancel again every second until Redis takes it,
// since a cancel lost with Redis would leave the late acquire's slot counting for the expiry.

// acquireScript takes one slot under every key or none. KEYS: the sets, then the slot's cancel mark; ARGV[1]:
// the member, ARGV[2]: the expiry in ms, ARGV[2+i]: the maximum of KEYS[i]. It returns 0 when it took the
// slot, i when KEYS[i] is full, or -1 when the slot was canceled before the script ran.
var acquireScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[#KEYS]) == 1 then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS - 1 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[2 + i]) then
    return i
  end
end
for i = 1, #KEYS - 1 do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return 0
`)

// cancelScript gives back a slot whose acquire may not have run yet. KEYS[1]: the slot's cancel mark,
// KEYS[2...]: its sets; ARGV[1]: the member, ARGV[2]: how long the mark lives, in ms.
var cancelScript = redis.NewScript(`
redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
for i = 2, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
return 1
`)

// refreshScript pushes the expiry of members back. KEYS: the sets; ARGV[1]: the expiry in ms, ARGV[1+i]:
// the member in KEYS[i]. A member that has expired meanwhile (Redis unreachable for longer than the expiry)
// is added again: its stream is still open.
var refreshScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + ttl, ARGV[1 + i])
  redis.call('PEXPIRE', key, ttl)
end
return #KEYS
`)

// countScript counts the members of KEYS[1] that have not expired.
var countScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
`)

// refreshBatch bounds the members refreshed by one script call.
const refreshBatch = 256

// RedisStats are the Redis store's counters. The zero value is ready to use.
type RedisStats struct {
	// Errors counts failed calls to Redis, by Op.
	Errors [numOps]atomic.Int64
}

// Redis is a Store shared by every pod that uses the same Redis and prefix. See the package overview.
type Redis struct {
	rdb     redis.UniversalClient
	prefix  string
	expiry  time.Duration
	timeout time.Duration
	log     *slog.Logger
	pod     string // this store's id, unique per process start
	seq     atomic.Uint64

	// Stats are the store's counters, read by metrics.
	Stats RedisStats

	mu     sync.Mutex
	live   map[string]Slot // this pod's slots, by member
	gone   []Slot          // slots given back, not yet removed from Redis
	closed bool

	kick chan struct{} // has a token when gone grew
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the loop has returned
	// abandon makes the loop return without giving anything back, as a crash would (tests).
	abandon atomic.Bool

	logMu    sync.Mutex
	loggedAt [numOps]time.Time
}

// RedisOption configures a Redis store.
type RedisOption func(*Redis)

// WithExpiry sets how long a slot outlives the last refresh of its pod: how soon the slots of a pod that died
// are free again. The pod refreshes every expiry/3. Default DefaultExpiry; at least 100ms.
func WithExpiry(d time.Duration) RedisOption { return func(r *Redis) { r.expiry = d } }

// WithPrefix sets the prefix of the store's keys. Default DefaultPrefix; not empty.
func WithPrefix(p string) RedisOption { return func(r *Redis) { r.prefix = p } }

// WithTimeout bounds each call to Redis. Default DefaultTimeout; at least 1ms.
func WithTimeout(d time.Duration) RedisOption { return func(r *Redis) { r.timeout = d } }

// WithLogger sets where failures are logged (at most one line per operation every 10 s). Default
// slog.Default().
func WithLogger(l *slog.Logger) RedisOption { return func(r *Redis) { r.log = l } }

// NewRedis returns a store in rdb and starts its goroutine, which Close stops. It does not contact Redis.
func NewRedis(rdb redis.UniversalClient, opts ...RedisOption) (*Redis, error) {
	var id [8]byte
	_, _ = crand.Read(id[:]) // never fails on the platforms Go supports
	r := &Redis{
		rdb: rdb, prefix: DefaultPrefix, expiry: DefaultExpiry, timeout: DefaultTimeout, log: slog.Default(),
		pod:  hex.EncodeToString(id[:]),
		live: map[string]Slot{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, o := range opts {
		o(r)
	}
	switch {
	case rdb == nil:
		return nil, errors.New("limit: NewRedis needs a client")
	case r.expiry < 100*time.Millisecond:
		return nil, errors.New("limit: the expiry must be at least 100ms")
	case r.prefix == "":
		return nil, errors.New("limit: the key prefix must not be empty")
	case r.timeout < time.Millisecond:
		return nil, errors.New("limit: the timeout must be at least 1ms")
	}
	go r.loop()
	return r, nil
}

// Acquire takes one slot under every key, or returns a *Refusal naming the first full key, or a
// *StoreError with a provisional slot (see Store). It waits for Redis at most the store's timeout (or ctx).
func (r *Redis) Acquire(ctx context.Context, keys []Key) (Slot, error) {
	if len(keys) == 0 {
		return Slot{}, nil
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return Slot{}, &StoreError{Op: OpAcquire, Err: errClosed}
	}
	s := Slot{member: r.pod + ":" + strconv.FormatUint(r.seq.Add(1), 36), keys: make([]string, len(keys))}
	args := make([]any, 2, 2+len(keys))
	args[0], args[1] = s.member, r.expiry.Milliseconds()
	for i, k := range keys {
		s.keys[i] = r.prefix + k.id()
		args = append(args, k.Max)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	full, err := acquireScript.Run(ctx, r.rdb, append(slices.Clip(s.keys), r.mark(s.member)), args...).Int()
	switch {
	case err != nil:
		r.failed(OpAcquire, err)
		// The slot is held provisionally: refreshed like any other, it is written to Redis as soon as Redis
		// answers again, so a stream admitted without Redis (fail-open) counts there once it is back. The
		// script may still run whenever Redis gets it: the slot is unsure, and giving it back cancels it (a
		// caller that refuses the stream gives it back at once).
		s.unsure = true
		err = &StoreError{Op: OpAcquire, Err: err}
	case full < 0: // a cancel of this very member ran first: never, as nobody gave it back yet
		return Slot{}, &StoreError{Op: OpAcquire, Err: errors.New("limit: slot canceled before it was taken")}
	case full > 0:
		k := keys[full-1]
		return Slot{}, &Refusal{Kind: k.Kind, Max: float64(k.Max)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		// Close began while the script ran. Queue the removal; if Close's last pass has already gone, the
		// slot expires (it is never refreshed).
		r.gone = append(r.gone, s)
		return Slot{}, &StoreError{Op: OpAcquire, Err: errClosed}
	}
	r.live[s.member] = s
	return s, err
}

// mark is the name of the cancel mark of a slot's member.
func (r *Redis) mark(member string) string { return r.prefix + "cancel:" + member }

// Release gives a slot back: it stops being refreshed at once and is removed from Redis by the store's
// goroutine (or expires, if Redis cannot be reached). A slot whose acquire got no answer is canceled
// instead, again until Redis takes it (see acquireScript). It never blocks.
func (r *Redis) Release(s Slot) {
	if s.member == "" {
		return
	}
	r.mu.Lock()
	delete(r.live, s.member)
	r.gone = append(r.gone, s)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Count returns the streams counted under key by every pod, expired slots left out.
func (r *Redis) Count(ctx context.Context, key Key) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	n, err := countScript.Run(ctx, r.rdb, []string{r.prefix + key.id()}).Int()
	if err != nil {
		return 0, &StoreError{Op: OpAcquire, Err: err}
	}
	return n, nil
}

// Close stops the store's goroutine after it has given back every slot (released or still held) that Redis
// takes within the timeout; what it cannot give back expires.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	return nil
}

// crash stops the store's goroutine without giving anything back, as SIGKILL would (tests).
func (r *Redis) crash() {
	r.abandon.Store(true)
	_ = r.Close()
}

// loop removes released slots and refreshes live ones every expiry/3 (sooner after a failure), until Close.
// It is the only goroutine that sends removals and refreshes, and sends them one call after the other, so a
// refresh never puts back a slot whose removal was sent before it: a slot leaves live (and joins gone)
// under mu, and each pass takes gone and a snapshot of live under mu, removes first, then refreshes. The
// cancels Redis did not take (cancels, the loop's own) go again with the next pass, at least every second.
func (r *Redis) loop() {
	defer close(r.done)
	every := r.expiry / 3
	next := time.NewTimer(jittered(every))
	defer next.Stop()
	var cancels []Slot
	var again <-chan time.Time
	for {
		refresh := false
		select {
		case <-r.kick:
		case <-again:
		case <-next.C:
			refresh = true
		case <-r.stop:
			if r.abandon.Load() {
				return
			}
			r.mu.Lock()
			gone := slices.Concat(r.gone, cancels)
			for _, s := range r.live {
				gone = append(gone, s)
			}
			r.gone, r.live = nil, map[string]Slot{}
			r.mu.Unlock()
			r.remove(gone) // what Redis does not take now expires, or stays for the expiry if its acquire lands
			return
		}
		r.mu.Lock()
		gone := slices.Concat(cancels, r.gone) // oldest first, for bound
		r.gone = nil
		var live []Slot
		if refresh {
			live = make([]Slot, 0, len(r.live))
			for _, s := range r.live {
				live = append(live, s)
			}
		}
		r.mu.Unlock()
		cancels, again = r.bound(r.remove(gone)), nil
		if len(cancels) > 0 {
			again = time.After(min(every, time.Second))
		}
		if refresh {
			wait := every
			if !r.refresh(live) {
				wait = min(every, time.Second)
			}
			next.Reset(jittered(wait))
		}
	}
}

// remove deletes slots from Redis, in one pipeline per batch: a plain removal for a slot Redis took, a cancel
// for an unsure one. A failure is counted and logged; the slots Redis took expire, and the unsure ones are
// returned, to be canceled again.
func (r *Redis) remove(slots []Slot) (unsent []Slot) {
	markLifeMS := markLife.Milliseconds()
	for len(slots) > 0 {
		n := min(len(slots), refreshBatch)
		batch := slots[:n]
		slots = slots[n:]
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, s := range batch {
				if s.unsure {
					cancelScript.Eval(ctx, p, append([]string{r.mark(s.member)}, s.keys...), s.member, markLifeMS)
					continue
				}
				for _, k := range s.keys {
					p.ZRem(ctx, k, s.member)
				}
			}
			return nil
		})
		cancel()
		if err != nil {
			r.failed(OpRelease, err)
			for _, s := range batch {
				if s.unsure {
					unsent = append(unsent, s)
				}
			}
		}
	}
	return unsent
}

// bound keeps at most maxCancels of the cancels still to send, the newest; it counts and logs the others.
func (r *Redis) bound(cancels []Slot) []Slot {
	if drop := len(cancels) - maxCancels; drop > 0 {
		r.failed(OpRelease, fmt.Errorf("limit: %d slots whose acquire got no answer are no longer canceled (more than %d wait for Redis); they expire if their acquire lands", drop, maxCancels))
		cancels = slices.Delete(cancels, 0, drop)
	}
	return cancels
}

// refresh pushes the expiry of live slots back; it reports whether every call succeeded.
func (r *Redis) refresh(live []Slot) bool {
	ok := true
	var keys []string
	var args []any
	flush := func() {
		if len(keys) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		err := refreshScript.Run(ctx, r.rdb, keys, args...).Err()
		cancel()
		if err != nil {
			r.failed(OpRefresh, err)
			ok = false
		}
		keys, args = keys[:0], args[:0]
	}
	for _, s := range live {
		for _, k := range s.keys {
			if len(keys) == 0 {
				args = append(args, r.expiry.Milliseconds())
			}
			keys = append(keys, k)
			args = append(args, s.member)
			if len(keys) == refreshBatch {
				flush()
			}
		}
	}
	flush()
	return ok
}

// failed counts a failed call and logs it, at most once per operation every 10 s.
func (r *Redis) failed(op Op, err error) {
	r.Stats.Errors[op].Add(1)
	r.logMu.Lock()
	now := time.Now()
	log := now.Sub(r.loggedAt[op]) >= 10*time.Second
	if log {
		r.loggedAt[op] = now
	}
	r.logMu.Unlock()
	if log {
		r.log.Warn("quota store call failed", "op", op.String(), "err", err)
	}
}

// jittered returns d plus or minus up to a tenth, so that pods started together do not refresh together.
func jittered(d time.Duration) time.Duration {
	if d < 10 {
		return d
	}
	return d - d/10 + rand.N(d/5) //nolint:gosec // spreading refreshes needs no cryptographic randomness
}
