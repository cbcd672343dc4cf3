package limit

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"
)

var client = netip.MustParseAddr("192.0.2.10")

var quiet = slog.New(slog.DiscardHandler)

func newLimiter(t *testing.T, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func admit(t *testing.T, l *Limiter, ip netip.Addr, sub string) *Lease {
	t.Helper()
	s, err := l.Admit(context.Background(), ip, sub)
	if err != nil {
		t.Fatalf("Admit(%v, %q): %v", ip, sub, err)
	}
	return s
}

// refusedAs checks that Admit refuses with kind and returns the wait the client is told.
func refusedAs(t *testing.T, l *Limiter, ip netip.Addr, sub string, kind Kind) time.Duration {
	t.Helper()
	_, err := l.Admit(context.Background(), ip, sub)
	var r *Refusal
	if !errors.As(err, &r) || r.Kind != kind {
		t.Fatalf("Admit(%v, %q): %v, want a refusal of kind %s", ip, sub, err, kind)
	}
	if r.RetryAfter < time.Second || r.RetryAfter%time.Second != 0 {
		t.Errorf("RetryAfter %v, want whole seconds, at least 1", r.RetryAfter)
	}
	return r.RetryAfter
}

// TestLimiterPodStreams: at most max-streams open at once; a release (once, however often it is called)
// makes room again.
func TestLimiterPodStreams(t *testing.T) {
	l := newLimiter(t, WithMaxStreams(2))
	a := admit(t, l, client, "")
	admit(t, l, client, "")
	refusedAs(t, l, client, "", KindStreams)
	a.Release()
	a.Release()
	admit(t, l, client, "")
	refusedAs(t, l, client, "", KindStreams)
	if o, r := l.Stats.Open.Load(), l.Stats.Refused[KindStreams].Load(); o != 2 || r != 2 {
		t.Errorf("Open %d, Refused[pod_streams] %d; want 2 and 2", o, r)
	}
}

// TestLimiterRate: a token bucket of new streams: a burst, then the rate; a refusal says how long to wait.
func TestLimiterRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithRate(2, 3))
		for range 3 {
			admit(t, l, client, "").Release()
		}
		if wait := refusedAs(t, l, client, "", KindRate); wait > 5*time.Second {
			t.Errorf("RetryAfter %v for a token due in 500ms, want at most 1s + 4s of jitter", wait)
		}
		time.Sleep(500 * time.Millisecond)
		admit(t, l, client, "")
		refusedAs(t, l, client, "", KindRate)
		time.Sleep(10 * time.Second) // the bucket fills up to the burst, no more
		for range 3 {
			admit(t, l, client, "")
		}
		refusedAs(t, l, client, "", KindRate)
	})
}

// TestLimiterIdentities: per address and per subject, without a shared store (this pod's counts); an
// anonymous stream and an unknown address are not counted.
func TestLimiterIdentities(t *testing.T) {
	l := newLimiter(t, WithMaxPerIP(2), WithMaxPerSubject(1))
	other := netip.MustParseAddr("192.0.2.11")
	s := admit(t, l, client, "ann")
	refusedAs(t, l, other, "ann", KindSubject)
	admit(t, l, client, "")
	refusedAs(t, l, client, "", KindIP)
	for range 5 {
		admit(t, l, netip.Addr{}, "")
	}
	admit(t, l, other, "")
	admit(t, l, other, "")
	refusedAs(t, l, other, "", KindIP)
	s.Release()
	refusedAs(t, l, other, "ann", KindIP)
	admit(t, l, netip.MustParseAddr("192.0.2.12"), "ann")
	if n, _ := l.Count(context.Background(), SubjectKey("ann", 1)); n != 1 {
		t.Errorf("subject count %d, want 1", n)
	}
}

// TestLimiterRedisDown: a limiter sharing its counts in a Redis that goes down admits on this pod's own
// counts when it fails open (counted and still limited), and refuses with a store error when it fails
// closed; once Redis is back, the shared counts apply again.
func TestLimiterRedisDown(t *testing.T) {
	srv := startRedis(t)
	limiter := func(open bool) *Limiter {
		st, err := NewRedis(srv.client(), WithTimeout(200*time.Millisecond), WithExpiry(time.Second), WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		return newLimiter(t, WithStore(st), WithMaxPerIP(2), WithFailOpen(open), WithStoreTimeout(200*time.Millisecond),
			WithLimiterLogger(quiet))
	}
	open, closed := limiter(true), limiter(false)
	admit(t, open, client, "")
	srv.stop()

	admit(t, open, client, "")
	refusedAs(t, open, client, "", KindIP) // this pod's own count: 2
	if n := open.Stats.FailedOpen.Load(); n != 1 {
		t.Errorf("FailedOpen %d, want 1", n)
	}
	_, err := closed.Admit(context.Background(), client, "")
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("fail-closed Admit with Redis down: %v, want ErrStoreUnavailable", err)
	}
	var r *Refusal
	if !errors.As(err, &r) || r.Kind != KindStore || r.RetryAfter < time.Second {
		t.Errorf("fail-closed Admit with Redis down: %#v, want a refusal of kind quota_store with a wait", err)
	}
	if u, o := closed.Stats.Refused[KindStore].Load(), closed.Stats.Open.Load(); u != 1 || o != 0 {
		t.Errorf("fail-closed: Refused[quota_store] %d, Open %d; want 1 and 0", u, o)
	}
	// Anonymous streams without an address limit never ask Redis.
	l := newLimiter(t, WithMaxPerSubject(1), WithFailOpen(false))
	admit(t, l, client, "")

	srv.start()
	checkFor(t, "the fail-open pod's streams to be in Redis again", func() bool {
		n, err := open.Count(context.Background(), IPKey(client, 2))
		return err == nil && n == 2
	})
	refusedAs(t, closed, client, "", KindIP) // two streams of the other pod, now shared again
}
