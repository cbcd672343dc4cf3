package lease

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewScript extends the key's expiry only while it still holds this lease's value.
var renewScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// releaseScript deletes the key only while it still holds this lease's value.
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// DefaultDuration is the lease duration when none is given.
const DefaultDuration = 10 * time.Second

// DefaultPrefix is put before a name to make its key when no prefix is given.
const DefaultPrefix = "ssegate:ingest:lease:"

// Redis is the Manager that keeps leases in Redis, shared by every replica that uses the same Redis and
// key prefix.
type Redis struct {
	rdb      redis.Cmdable
	duration time.Duration
	prefix   string
	owner    string
	log      *slog.Logger
}

// Option configures a Redis manager.
type Option func(*Redis)

// WithDuration sets how long a lease lives without renewal: the key's PX. The holder renews every
// duration/3 and gives up at duration*2/3 without a renewal. Default DefaultDuration (10s); at least 30ms.
func WithDuration(d time.Duration) Option { return func(r *Redis) { r.duration = d } }

// WithPrefix sets what is put before a name to make its key. Default DefaultPrefix.
func WithPrefix(p string) Option { return func(r *Redis) { r.prefix = p } }

// WithOwner sets the name Owner reports for this manager's leases. Default "<hostname>/<pid>".
func WithOwner(owner string) Option { return func(r *Redis) { r.owner = owner } }

// WithLogger sets where acquisition failures and lost leases are logged. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(r *Redis) { r.log = l } }

// NewRedis returns a Manager that keeps its leases in rdb. The client should have ContextTimeoutEnabled
// set, so that a renewal cannot outlive the deadline of its context.
func NewRedis(rdb redis.Cmdable, opts ...Option) (*Redis, error) {
	r := &Redis{rdb: rdb, duration: DefaultDuration, prefix: DefaultPrefix}
	for _, o := range opts {
		o(r)
	}
	if r.owner == "" {
		host, _ := os.Hostname()
		r.owner = host + "/" + strconv.Itoa(os.Getpid())
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	switch {
	case rdb == nil:
		return nil, errors.New("lease: nil Redis client")
	case r.duration < 30*time.Millisecond:
		return nil, fmt.Errorf("lease: duration %v: want at least 30ms", r.duration)
	}
	return r, nil
}

// Duration returns the lease duration.
func (r *Redis) Duration() time.Duration { return r.duration }

// Key returns the Redis key of name's lease.
func (r *Redis) Key(name string) string { return r.prefix + name }

// Acquire sets name's key if nobody holds it, and otherwise retries every duration/5 (+-25%) until it can
// or ctx ends. Redis errors are logged and retried.
func (r *Redis) Acquire(ctx context.Context, name string) (Lease, error) {
	key := r.Key(name)
	value := r.owner + "#" + token()
	log := r.log.With("lease", key)
	failing := false
	for {
		sent := time.Now()
		ok, err := r.rdb.SetNX(ctx, key, value, r.duration).Result()
		if err == nil && !ok && failing {
			// An earlier SET may have been applied with its answer lost: the key would be ours then.
			ok, err = r.renew(ctx, key, value)
		}
		if ok {
			if failing {
				log.Info("lease acquired after Redis errors")
			}
			return r.start(key, value, sent), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !failing {
			log.Warn("cannot reach Redis to acquire a lease; retrying", "err", err)
		}
		failing = err != nil
		if !sleep(ctx, jitter(r.duration/5)) {
			return nil, ctx.Err()
		}
	}
}

// Owner returns the owner part of name's key, or "" when the key does not exist.
func (r *Redis) Owner(ctx context.Context, name string) (string, error) {
	v, err := r.rdb.Get(ctx, r.Key(name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("lease: owner of %s: %w", name, err)
	}
	if i := strings.LastIndexByte(v, '#'); i >= 0 {
		v = v[:i]
	}
	return v, nil
}

func (r *Redis) renew(ctx context.Context, key, value string) (bool, error) {
	n, err := renewScript.Run(ctx, r.rdb, []string{key}, value, r.duration.Milliseconds()).Int()
	return n == 1, err
}

// start returns the lease of key, acquired by a command sent at sent, and starts its renewal goroutine.
func (r *Redis) start(key, value string, sent time.Time) *redisLease {
	ctx, cancel := context.WithCancel(context.Background())
	l := &redisLease{
		r: r, key: key, value: value, log: r.log.With("lease", key),
		lost: make(chan struct{}), done: make(chan struct{}), cancel: cancel,
	}
	go l.renewLoop(ctx, sent)
	return l
}

// redisLease is one held key and its renewal goroutine.
type redisLease struct {
	r          *Redis
	key, value string
	log        *slog.Logger

	lost     chan struct{}
	lostOnce sync.Once
	done     chan struct{}      // closed when renewLoop returns
	cancel   context.CancelFunc // stops renewLoop, and a renewal in flight
	stopOnce sync.Once
}

func (l *redisLease) Lost() <-chan struct{} { return l.lost }

func (l *redisLease) lose() { l.lostOnce.Do(func() { close(l.lost) }) }

// renewLoop renews the key every duration/3 until ctx ends, and declares the lease lost when a renewal
// finds the key gone or taken, or when duration*2/3 passes since the last successful renewal was sent.
//
// Why from the sending: Redis starts the new expiry when it runs the command, which is after we sent it,
// so the key lives at least until sent+duration. Giving up at sent+duration*2/3 leaves the holder at least
// duration/3 to stop before another replica can SET the key.
func (l *redisLease) renewLoop(ctx context.Context, sent time.Time) {
	defer close(l.done)
	defer l.lose()
	d := l.r.duration
	deadline, next := sent.Add(d*2/3), sent.Add(d/3)
	for {
		if !sleepUntil(ctx, next) {
			return
		}
		if !time.Now().Before(deadline) {
			l.log.Warn("lease not renewed in time; giving it up")
			return
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		sent := time.Now()
		ok, err := l.r.renew(rctx, l.key, l.value)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && ok:
			deadline, next = sent.Add(d*2/3), sent.Add(d/3)
		case err == nil:
			l.log.Warn("lease expired and lost; stopping")
			return
		default:
			// Retry soon, but not in a busy loop; the deadline check above ends the retries.
			l.log.Warn("lease renewal failed; retrying", "err", err, "until", deadline)
			next = time.Now().Add(d / 15)
			if next.After(deadline) {
				next = deadline
			}
		}
	}
}

// stop ends the renewal goroutine and waits for it. It reports whether this call stopped it.
func (l *redisLease) stop() bool {
	first := false
	l.stopOnce.Do(func() {
		first = true
		l.cancel()
		<-l.done
	})
	return first
}

func (l *redisLease) Release(ctx context.Context) error {
	if !l.stop() {
		return nil
	}
	n, err := releaseScript.Run(ctx, l.r.rdb, []string{l.key}, l.value).Int()
	if err != nil {
		return fmt.Errorf("lease: release %s: %w", l.key, err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

func (l *redisLease) Abandon() { l.stop() }

// token returns a random hex string that makes a lease's value unique.
func token() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// jitter returns d +-25%.
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1) //nolint:gosec // spreading retries needs no cryptographic randomness
}

func sleep(ctx context.Context, d time.Duration) bool { return sleepUntil(ctx, time.Now().Add(d)) }

// sleepUntil waits until t or until ctx ends; it reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
