package limit

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/ssegate/ssegate/pkg/redistest"
)

// newStores returns a fresh store of each implementation: the in-memory one, and one in the real Redis of
// the test run, under a prefix of its own.
func newStores(t *testing.T) map[string]Store {
	t.Helper()
	r, err := NewRedis(redistest.Client(t), WithPrefix(redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return map[string]Store{"local": NewLocal(), "redis": r}
}

// step is one call in a store table test: acquire keys (want: ok, or a refusal of kind), release the slot
// of an earlier acquire, or count a key.
type step struct {
	acquire []Key
	refused Kind // with acquire: -1 means admitted
	release int  // index of the step whose slot to give back; -1 means none
	count   *Key
	want    int // with count
}

func acq(refused Kind, keys ...Key) step { return step{acquire: keys, refused: refused, release: -1} }
func rel(i int) step                     { return step{release: i} }
func cnt(k Key, want int) step           { return step{count: &k, want: want, release: -1} }

const ok Kind = -1

var (
	ipA  = IPKey(netip.MustParseAddr("192.0.2.1"), 2)
	ipA1 = IPKey(netip.MustParseAddr("192.0.2.1"), 1)
	ipB  = IPKey(netip.MustParseAddr("192.0.2.2"), 1)
	sub1 = SubjectKey("ann@example.com", 1)
	sub5 = SubjectKey("ann@example.com", 5)
	ip6a = IPKey(netip.MustParseAddr("2001:db8:1:2::1"), 1)
	ip6b = IPKey(netip.MustParseAddr("2001:db8:1:2:ffff::9"), 1)
	ip6c = IPKey(netip.MustParseAddr("2001:db8:1:3::1"), 1)
)

// TestStoreContract runs the same table against Local and Redis: the in-memory store behaves as the Redis
// one does, so tests that use it tell the truth.
func TestStoreContract(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"up to the maximum", []step{acq(ok, ipA), acq(ok, ipA), acq(KindIP, ipA), cnt(ipA, 2)}},
		{"release frees a slot", []step{acq(ok, ipA1), acq(KindIP, ipA1), rel(0), cnt(ipA1, 0), acq(ok, ipA1), cnt(ipA1, 1)}},
		{"all keys or none", []step{acq(ok, ipA, sub1), acq(KindSubject, ipA, sub1), cnt(ipA, 1), cnt(sub1, 1)}},
		{"the first full key is named", []step{acq(ok, ipA1, sub1), acq(KindIP, ipA1, sub1), acq(KindSubject, sub1, ipA1)}},
		{"keys are independent", []step{acq(ok, ipA1), acq(ok, ipB), acq(ok, sub1), cnt(ipA1, 1), cnt(ipB, 1)}},
		{"the maximum is the caller's", []step{acq(ok, sub1), acq(KindSubject, sub1), acq(ok, sub5), cnt(sub5, 2)}},
		{"no keys take nothing", []step{acq(ok), rel(0), cnt(ipA, 0)}},
		{"an IPv6 /64 is one client", []step{acq(ok, ip6a), acq(KindIP, ip6b), acq(ok, ip6c)}},
		{"a release of both keys", []step{acq(ok, ipA1, sub1), rel(0), cnt(ipA1, 0), cnt(sub1, 0), acq(ok, sub1, ipA1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for impl, s := range newStores(t) {
				t.Run(impl, func(t *testing.T) {
					ctx := context.Background()
					slots := make([]Slot, len(tc.steps))
					for i, st := range tc.steps {
						switch {
						case st.count != nil:
							n, err := s.Count(ctx, *st.count)
							if err != nil || n != st.want {
								t.Fatalf("step %d: Count(%s) = %d, %v; want %d", i, st.count.id(), n, err, st.want)
							}
						case st.acquire != nil:
							var err error
							slots[i], err = s.Acquire(ctx, st.acquire)
							var r *Refusal
							switch {
							case st.refused == ok && err != nil:
								t.Fatalf("step %d: Acquire: %v, want it admitted", i, err)
							case st.refused != ok && (!errors.As(err, &r) || r.Kind != st.refused):
								t.Fatalf("step %d: Acquire: %v, want a refusal of kind %s", i, err, st.refused)
							}
						case st.release >= 0:
							s.Release(slots[st.release])
							waitCount(t, s, tc.steps, slots, i)
						}
					}
				})
			}
		})
	}
}

// waitCount waits until a release is visible: the Redis store removes slots on its own goroutine, and a
// test must not race it. It polls the keys of the released step until they no longer count its slot.
func waitCount(t *testing.T, s Store, steps []step, slots []Slot, i int) {
	t.Helper()
	rs, isRedis := s.(*Redis)
	if !isRedis {
		return
	}
	member := slots[steps[i].release].member
	for _, k := range steps[steps[i].release].acquire {
		checkFor(t, "the released slot to be removed", func() bool {
			n, err := rs.rdb.ZScore(context.Background(), rs.prefix+k.id(), member).Result()
			return err != nil && n == 0
		})
	}
}
