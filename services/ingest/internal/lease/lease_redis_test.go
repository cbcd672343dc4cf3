package lease

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ssegate/ssegate/pkg/redistest"
)

var quiet = slog.New(slog.DiscardHandler)

func newManager(t *testing.T, rdb redis.Cmdable, prefix, owner string, d time.Duration) *Redis {
	t.Helper()
	m, err := NewRedis(rdb, WithPrefix(prefix), WithOwner(owner), WithDuration(d), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func acquire(t *testing.T, m *Redis, name string) Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	t.Cleanup(l.Abandon)
	return l
}

func isLost(l Lease) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

func owner(t *testing.T, m *Redis, name string) string {
	t.Helper()
	o, err := m.Owner(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func checkFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAcquireIsExclusiveAndRenewed holds a lease for several lease durations: renewals keep it, the other
// manager cannot take it, and both see who owns it.
func TestAcquireIsExclusiveAndRenewed(t *testing.T) {
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	const d = 300 * time.Millisecond
	a, b := newManager(t, rdb, p, "a/1", d), newManager(t, rdb, p, "b/2", d)
	if o := owner(t, a, "src"); o != "" {
		t.Fatalf("owner before any lease %q", o)
	}
	la := acquire(t, a, "src")
	ctx, cancel := context.WithTimeout(t.Context(), 4*d)
	defer cancel()
	if _, err := b.Acquire(ctx, "src"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Acquire while held: %v, want DeadlineExceeded", err)
	}
	if isLost(la) {
		t.Fatal("the lease was lost although Redis was reachable")
	}
	if o := owner(t, b, "src"); o != "a/1" {
		t.Fatalf("owner %q, want a/1", o)
	}
	pttl, err := rdb.PTTL(t.Context(), a.Key("src")).Result()
	if err != nil || pttl <= 0 || pttl > d {
		t.Fatalf("PTTL %v %v, want in (0, %v]", pttl, err, d)
	}
	// A second name is independent.
	acquire(t, b, "other")
}

// TestAbandonedLeaseExpiresAndMoves: a holder that stops renewing without releasing (a crash) loses the
// key to the other manager once it expires, within about one lease duration.
func TestAbandonedLeaseExpiresAndMoves(t *testing.T) {
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	const d = 400 * time.Millisecond
	a, b := newManager(t, rdb, p, "a/1", d), newManager(t, rdb, p, "b/2", d)
	la := acquire(t, a, "src")
	got := make(chan Lease, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		l, err := b.Acquire(ctx, "src")
		if err == nil {
			got <- l
		}
	}()
	time.Sleep(d) // b is polling; a keeps renewing
	if o := owner(t, b, "src"); o != "a/1" {
		t.Fatalf("owner %q while a renews, want a/1", o)
	}
	killed := time.Now()
	la.Abandon()
	if !isLost(la) {
		t.Fatal("Lost not closed by Abandon")
	}
	if ex, _ := rdb.Exists(t.Context(), a.Key("src")).Result(); ex != 1 {
		t.Fatal("Abandon deleted the key")
	}
	var lb Lease
	select {
	case lb = <-got:
	case <-time.After(10 * d):
		t.Fatal("b did not get the abandoned lease")
	}
	t.Cleanup(lb.Abandon)
	took := time.Since(killed)
	t.Logf("moved %v after the holder stopped renewing (duration %v)", took, d)
	// The key had at most d left; b polls every d/5 +-25%.
	if took > d+d/4+200*time.Millisecond {
		t.Errorf("moved after %v, want about one lease duration (%v)", took, d)
	}
	if o := owner(t, a, "src"); o != "b/2" {
		t.Fatalf("owner %q, want b/2", o)
	}
	if err := la.Release(t.Context()); err != nil {
		t.Fatalf("Release after Abandon: %v, want nil (no-op)", err)
	}
	if o := owner(t, a, "src"); o != "b/2" {
		t.Fatalf("owner %q after a's late Release, want b/2", o)
	}
}

// TestTakenLeaseIsLost: when the key no longer holds the lease's value (it expired while the holder was
// paused and another replica set it), the next renewal notices, Lost closes, the renewal does not extend
// the other owner's key, and Release leaves it alone.
func TestTakenLeaseIsLost(t *testing.T) {
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	const d = 300 * time.Millisecond
	a := newManager(t, rdb, p, "a/1", d)
	la := acquire(t, a, "src")
	if err := rdb.Set(t.Context(), a.Key("src"), "thief/9#x", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	checkFor(t, d, "Lost after the key was taken", func() bool { return isLost(la) })
	if err := la.Release(t.Context()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a taken lease: %v, want ErrNotHeld", err)
	}
	v, err := rdb.Get(t.Context(), a.Key("src")).Result()
	pttl, _ := rdb.PTTL(t.Context(), a.Key("src")).Result()
	if err != nil || v != "thief/9#x" || pttl < 4*time.Second {
		t.Fatalf("the other owner's key: %q (PTTL %v, err %v), want it untouched", v, pttl, err)
	}
}

// TestReleaseFreesAtOnce: Release deletes the key, so another manager acquires without waiting for expiry.
func TestReleaseFreesAtOnce(t *testing.T) {
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	const d = 10 * time.Second
	a, b := newManager(t, rdb, p, "a/1", d), newManager(t, rdb, p, "b/2", d)
	la := acquire(t, a, "src")
	if err := la.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !isLost(la) {
		t.Fatal("Lost not closed by Release")
	}
	if o := owner(t, a, "src"); o != "" {
		t.Fatalf("owner %q after Release, want none", o)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	lb, err := b.Acquire(ctx, "src")
	if err != nil {
		t.Fatalf("acquire after Release: %v", err)
	}
	defer lb.Abandon()
	if err := la.Release(t.Context()); err != nil {
		t.Fatalf("second Release: %v, want nil (no-op)", err)
	}
	if o := owner(t, a, "src"); o != "b/2" {
		t.Fatalf("owner %q: a's second Release touched b's lease", o)
	}
}

// TestLostBeforeExpiryWhenRedisHangs cuts the holder off from Redis (its connections stop answering):
// Lost must close at about duration*2/3 after the last renewal, while the key still exists, so the
// holder stops before anyone else can acquire.
func TestLostBeforeExpiryWhenRedisHangs(t *testing.T) {
	direct := redistest.Client(t)
	p := redistest.Prefix(t)
	px := newProxy(t, redistest.Addr(t))
	viaProxy := redis.NewClient(&redis.Options{Addr: px.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = viaProxy.Close() })
	const d = 600 * time.Millisecond
	a := newManager(t, viaProxy, p, "a/1", d)
	la := acquire(t, a, "src")
	time.Sleep(d) // a few renewals go through
	if isLost(la) {
		t.Fatal("lost while Redis answered")
	}
	frozen := time.Now()
	px.freeze()
	checkFor(t, 2*d, "Lost after Redis stopped answering", func() bool { return isLost(la) })
	lostAfter := time.Since(frozen)
	pttl, err := direct.PTTL(context.Background(), a.Key("src")).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lost %v after the freeze; the key had %v left", lostAfter, pttl)
	if pttl <= 0 {
		t.Fatalf("the key had expired (PTTL %v) when Lost closed: another replica could already hold it", pttl)
	}
	if lostAfter > d*2/3+100*time.Millisecond {
		t.Errorf("lost %v after the freeze, want at most about %v", lostAfter, d*2/3)
	}
}

// proxy forwards TCP connections to a Redis server until freeze, after which it forwards nothing in
// either direction (the connections stay open, as with a network partition).
type proxy struct {
	ln     net.Listener
	frozen atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(u, c) })
			p.wg.Go(func() { p.pipe(c, u) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) freeze() { p.frozen.Store(true) }

// pipe copies from src to dst, dropping everything once frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
