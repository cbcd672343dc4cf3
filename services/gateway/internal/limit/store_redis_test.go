package limit

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ssegate/ssegate/pkg/redistest"
)

func newRedis(t *testing.T, prefix string, opts ...RedisOption) *Redis {
	t.Helper()
	r, err := NewRedis(redistest.Client(t), append([]RedisOption{WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func count(t *testing.T, s Store, k Key) int {
	t.Helper()
	n, err := s.Count(context.Background(), k)
	if err != nil {
		t.Fatalf("Count(%s): %v", k.id(), err)
	}
	return n
}

// TestRedisSharedByPods: two stores on one Redis and prefix (two pods) count the same identity together.
func TestRedisSharedByPods(t *testing.T) {
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, prefix), newRedis(t, prefix)
	k := SubjectKey("bob", 3)
	ctx := context.Background()
	sa, err := a.Acquire(ctx, []Key{k})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.Acquire(ctx, []Key{k}); err != nil {
			t.Fatal(err)
		}
	}
	var r *Refusal
	if _, err := a.Acquire(ctx, []Key{k}); !errors.As(err, &r) || r.Kind != KindSubject {
		t.Fatalf("fourth stream of the subject on either pod: %v, want a refusal", err)
	}
	a.Release(sa)
	checkFor(t, "the released slot to be free on the other pod", func() bool { return count(t, b, k) == 2 })
	if _, err := b.Acquire(ctx, []Key{k}); err != nil {
		t.Fatalf("after a release on the first pod: %v", err)
	}
}

// TestRedisDeadPodExpires: the slots of a pod that stops without giving them back (a crash) still count
// right after, and are free within the expiry, without anybody cleaning up.
func TestRedisDeadPodExpires(t *testing.T) {
	const expiry = time.Second
	prefix := redistest.Prefix(t)
	dead, alive := newRedis(t, prefix, WithExpiry(expiry)), newRedis(t, prefix, WithExpiry(expiry))
	k := IPKey(netip.MustParseAddr("198.51.100.7"), 2)
	ctx := context.Background()
	for range 2 {
		if _, err := dead.Acquire(ctx, []Key{k}); err != nil {
			t.Fatal(err)
		}
	}
	dead.crash()
	crashed := time.Now()
	var r *Refusal
	if _, err := alive.Acquire(ctx, []Key{k}); !errors.As(err, &r) {
		t.Fatalf("right after the crash: %v, want the dead pod's slots still counted", err)
	}
	checkFor(t, "the dead pod's slots to expire", func() bool {
		_, err := alive.Acquire(ctx, []Key{k})
		return err == nil
	})
	// The last refresh was at most expiry/3 (plus jitter) before the crash, so the slots lasted at most the expiry.
	if took := time.Since(crashed); took > expiry+500*time.Millisecond {
		t.Errorf("slots free %v after the crash, want within the expiry %v", took, expiry)
	}
}

// TestRedisRefreshKeepsSlots: a live pod's slots outlast many expiries, and a slot Redis lost (a flush, a
// failover) comes back with the next refresh.
func TestRedisRefreshKeepsSlots(t *testing.T) {
	const expiry = 300 * time.Millisecond
	r := newRedis(t, redistest.Prefix(t), WithExpiry(expiry))
	k := IPKey(netip.MustParseAddr("203.0.113.5"), 5)
	if _, err := r.Acquire(context.Background(), []Key{k}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * expiry); time.Now().Before(end); time.Sleep(expiry / 10) {
		if n := count(t, r, k); n != 1 {
			t.Fatalf("count %d while the pod refreshes, want 1", n)
		}
	}
	if err := r.rdb.Del(context.Background(), r.prefix+k.id()).Err(); err != nil {
		t.Fatal(err)
	}
	checkFor(t, "the lost slot to come back", func() bool { return count(t, r, k) == 1 })
	if e := r.Stats.Errors[OpRefresh].Load(); e != 0 {
		t.Errorf("%d refresh errors", e)
	}
}

// TestRedisCloseGivesBack: a clean stop gives back every slot at once, released or still held.
func TestRedisCloseGivesBack(t *testing.T) {
	prefix := redistest.Prefix(t)
	r, other := newRedis(t, prefix), newRedis(t, prefix)
	k := SubjectKey("carol", 10)
	var slots []Slot
	for range 3 {
		s, err := r.Acquire(context.Background(), []Key{k})
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, s)
	}
	r.Release(slots[0])
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, other, k); n != 0 {
		t.Fatalf("count %d after Close, want 0", n)
	}
	var se *StoreError
	if _, err := r.Acquire(context.Background(), []Key{k}); !errors.As(err, &se) {
		t.Fatalf("Acquire after Close: %v, want a store error", err)
	}
}

// TestRedisDown: with Redis gone, Acquire fails within the timeout with a *StoreError (counted), Release
// does not block, and once Redis is back (empty, as after a restart without persistence) the live slots
// are put back by the next refresh while those released meanwhile are not.
func TestRedisDown(t *testing.T) {
	srv := startRedis(t)
	const expiry = 600 * time.Millisecond
	r, err := NewRedis(srv.client(), WithExpiry(expiry), WithTimeout(300*time.Millisecond), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	k := IPKey(netip.MustParseAddr("192.0.2.99"), 5)
	ctx := context.Background()
	kept, err := r.Acquire(ctx, []Key{k})
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := r.Acquire(ctx, []Key{k})
	if err != nil {
		t.Fatal(err)
	}
	srv.stop()

	began := time.Now()
	provisional, err := r.Acquire(ctx, []Key{k})
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Acquire with Redis down: %v, want ErrStoreUnavailable", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Acquire took %v with Redis down, timeout 300ms", took)
	}
	if r.Stats.Errors[OpAcquire].Load() == 0 {
		t.Error("the failed acquire is not counted")
	}
	began = time.Now()
	r.Release(dropped)
	r.Release(provisional) // refused (fail-closed): given back
	if took := time.Since(began); took > 50*time.Millisecond {
		t.Errorf("Release took %v with Redis down: it must not block", took)
	}
	checkFor(t, "a failed refresh to be counted", func() bool { return r.Stats.Errors[OpRefresh].Load() > 0 })

	srv.start()
	checkFor(t, "the live slot to be put back", func() bool {
		n, err := r.Count(ctx, k)
		return err == nil && n == 1
	})
	_ = kept
}

// TestRedisLateAcquireLeavesNoSlot: an acquire that Redis did not answer in time, because the network to it
// was cut, still reaches Redis once the network is back, and runs, after the store's attempt to give the slot
// back (sent meanwhile on another connection, or not at all). The stream it was for is gone by then: refused
// (fail-closed), or admitted on this pod's counts (fail-open) and ended meanwhile. Neither may leave a slot
// behind that counts against the address for the expiry.
func TestRedisLateAcquireLeavesNoSlot(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail-closed, refused", true: "fail-open, ended"}[failOpen], func(t *testing.T) {
			wire := newLink(t, startRedis(t).addr())
			rdb := redis.NewClient(&redis.Options{
				Addr: wire.addr(), ContextTimeoutEnabled: true, DialTimeout: 200 * time.Millisecond, MaxRetries: -1,
			})
			t.Cleanup(func() { _ = rdb.Close() })
			// The default expiry: a slot left behind would count for 30 s, longer than checkFor waits.
			st, err := NewRedis(rdb, WithTimeout(200*time.Millisecond), WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			l := newLimiter(t, WithStore(st), WithMaxPerIP(1), WithFailOpen(failOpen),
				WithStoreTimeout(200*time.Millisecond), WithLimiterLogger(quiet))
			admit(t, l, client, "").Release() // the script is loaded, the connection open
			checkFor(t, "the first stream's slot to be given back", func() bool {
				n, err := st.Count(context.Background(), IPKey(client, 1))
				return err == nil && n == 0
			})

			wire.breakLink()
			lease, err := l.Admit(context.Background(), client, "")
			if failOpen {
				if err != nil {
					t.Fatalf("fail-open Admit with the network cut: %v", err)
				}
				lease.Release()
			} else if !errors.Is(err, ErrStoreUnavailable) {
				t.Fatalf("fail-closed Admit with the network cut: %v, want ErrStoreUnavailable", err)
			}
			checkFor(t, "the store to fail to give the slot back", func() bool { return st.Stats.Errors[OpRelease].Load() > 0 })
			wire.restore() // the late acquire reaches Redis, which runs it

			checkFor(t, "the address to have its slot again", func() bool {
				lease, err := l.Admit(context.Background(), client, "")
				if err != nil {
					return false
				}
				lease.Release()
				return true
			})
		})
	}
}

// TestRedisCancelEitherOrder: giving back a slot whose acquire got no answer leaves no slot, whether the late
// acquire runs before the cancel or after it.
func TestRedisCancelEitherOrder(t *testing.T) {
	r := newRedis(t, redistest.Prefix(t))
	ctx := context.Background()
	for _, cancelFirst := range []bool{true, false} {
		k := IPKey(netip.MustParseAddr(map[bool]string{true: "198.51.100.1", false: "198.51.100.2"}[cancelFirst]), 3)
		s := Slot{member: r.pod + ":late-" + k.Name, keys: []string{r.prefix + k.id()}, unsure: true}
		late := func() {
			t.Helper()
			keys := append(slices.Clone(s.keys), r.mark(s.member))
			if err := acquireScript.Run(ctx, r.rdb, keys, s.member, r.expiry.Milliseconds(), k.Max).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if !cancelFirst {
			late()
		}
		if unsent := r.remove([]Slot{s}); len(unsent) != 0 {
			t.Fatalf("cancel not taken: %v", unsent)
		}
		if cancelFirst {
			late()
		}
		if n := count(t, r, k); n != 0 {
			t.Errorf("cancel first %v: %d slots, want none", cancelFirst, n)
		}
	}
}
