package stream

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// The seam tests of a token's scope and expiry: what the gateway's handler does with a token (Params.Narrow,
// Params.Expires) is done here by podOpts.params, so that pods, ids and resumes are the real ones.

// scopedTo returns podOpts.params for a token that allows only these keys.
func scopedTo(keys ...string) func(*http.Request, *Params) error {
	return func(_ *http.Request, p *Params) error { return p.Narrow(keys, nil) }
}

// status returns the status of a stream request, closing it at once.
func (pd *pod) status(t *testing.T, query string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, pd.hs.URL+"/"+query, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// untilEnd returns the events a stream still has before it ends, failing t after 10 s.
func (c *seamClient) untilEnd(t *testing.T) []sse.Event {
	t.Helper()
	var evs []sse.Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.evs:
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("the stream did not end; it had %d more events", len(evs))
		}
	}
}

// checkOnlyKey reads n events and fails unless every one is a record of key (its data starts with it) in one
// of the partitions parts, and the ids name no other partition. It returns the last id.
func checkOnlyKey(t *testing.T, c *seamClient, n int, key string, parts ...int32) string {
	t.Helper()
	id := ""
	for i := range n {
		ev := c.next(t)
		if !strings.HasPrefix(ev.Data, key+"/") {
			t.Fatalf("event %d: %+v is not a record of %s", i, ev, key)
		}
		v := position.MustParse(ev.ID)
		for j := range v.Len() {
			if q := v.At(j).Partition; !containsPart(parts, q) {
				t.Fatalf("event %d: id %s names partition %d; the key %s is only ever in %v", i, ev.ID, q, key, parts)
			}
		}
		id = ev.ID
	}
	return id
}

func containsPart(parts []int32, q int32) bool {
	for _, p := range parts {
		if p == q {
			return true
		}
	}
	return false
}

// plausibleParts returns the partitions Kafka's default partitioner puts key in under partition counts 1 to n:
// where a key-filtered stream's ids may rightly point (see keyPartitionsOf).
func plausibleParts(topic, key string, n int) []int32 {
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	var out []int32
	for count := 1; count <= n; count++ {
		q := int32(kp.Partition(&kgo.Record{Key: []byte(key)}, count))
		if !containsPart(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// TestSeamScopeAcrossPods: a token that allows one key only gets a stream of that key's records, before and
// after a resume on another pod, whatever id it resumes with: its own, one naming every partition, one from an
// unscoped stream, an empty one. Its ids never name a partition the key cannot be in; key= narrows the scope
// and cannot widen it. On both paths.
func TestSeamScopeAcrossPods(t *testing.T) {
	const n = 3
	// A key some partition of the topic can never hold, under any count up to n, so that an id naming every
	// partition has one to widen the stream with.
	key := ""
	for i := range 100 {
		if k := fmt.Sprint("user-", i); len(plausibleParts("t", k, n)) < n {
			key = k
			break
		}
	}
	parts := plausibleParts("t", key, n)
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	home := int32(kp.Partition(&kgo.Record{Key: []byte(key)}, n))
	for _, writers := range []int{0, 2} {
		t.Run(fmt.Sprintf("writers %d", writers), func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", n)
			rounds := 0
			// Each round writes the key's record to its partition and other keys' records to every partition:
			// in the key's partition, round r's record of the key is at offset 3(r-1).
			round := func() {
				rounds++
				kc.Produce("t", &kgo.Record{Partition: home, Key: []byte(key), Value: fmt.Appendf(nil, "%s/%d", key, rounds)})
				for p := range int32(n) {
					for _, other := range []string{"other-a", "other-b"} {
						kc.Produce("t", &kgo.Record{Partition: p, Key: []byte(other), Value: fmt.Appendf(nil, "%s/%d", other, rounds)})
					}
				}
			}
			// owed returns how many of the key's records come after the position id.
			owed := func(id string) int {
				off, ok := position.MustParse(id).Offset(home)
				if !ok {
					return rounds
				}
				return rounds - int(off/3) - 1
			}
			for range 5 {
				round()
			}
			opts := podOpts{writers: writers, params: scopedTo(key)}
			a := startPod(t, kc, "t", opts)
			a.waitReady(t)
			c := a.open(t, "?from=earliest", "")
			checkOnlyKey(t, c, 5, key, parts...)
			round()
			last := checkOnlyKey(t, c, 1, key, parts...)

			b := startPod(t, kc, "t", opts)
			b.waitReady(t)
			unscoped := startPod(t, kc, "t", podOpts{})
			unscoped.waitReady(t)
			u := unscoped.open(t, "", "")
			for range 3 {
				round()
			}
			var unscopedID string
			for range 3 * (1 + 2*n) {
				unscopedID = u.next(t).ID
			}
			for _, tc := range []struct{ name, id string }{
				{"its own id", last},
				{"an id naming every partition", "v1:0-0.1-0.2-0"},
				{"an unscoped stream's id", unscopedID},
				{"the empty position", "v1:"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := b.open(t, "", tc.id)
					checkOnlyKey(t, r, owed(tc.id), key, parts...)
					round()
					checkOnlyKey(t, r, 1, key, parts...)
				})
			}
			if s := b.status(t, "?key=other-a"); s != http.StatusForbidden {
				t.Errorf("key=other-a with a token for %s: %d, want 403", key, s)
			}
			w := b.open(t, "?key=other-a&key="+key, last) // key= cannot widen: only the token's key
			checkOnlyKey(t, w, owed(last), key, parts...)
		})
	}
}

// TestSeamScopeKeepsOldPartition: after partitions are added, a scoped stream's resume id names the key's
// partition under the old count and the new one; a pod resuming it keeps both (producers that have not seen
// the new count still write to the old one), and still no other.
func TestSeamScopeKeepsOldPartition(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 2)
	key, old, moved := keyMoving(t, "t", 2)
	opts := podOpts{params: scopedTo(key)}
	a := startPod(t, kc, "t", opts)
	a.waitReady(t)
	c := a.open(t, "", "")
	rec := func(p int32, k, v string) {
		kc.Produce("t", &kgo.Record{Partition: p, Key: []byte(k), Value: []byte(k + "/" + v)})
	}
	rec(old, key, "before")
	checkOnlyKey(t, c, 1, key, old)
	kc.AddPartitions("t", 1)
	rec(moved, key, "moved")
	rec(moved, "other", "x")
	last := checkOnlyKey(t, c, 1, key, old, moved)
	b := startPod(t, kc, "t", opts)
	b.waitReady(t)
	r := b.open(t, "", last)
	rec(old, key, "stale producer")
	rec(moved, key, "after")
	rec(1-old, "other", "y")
	checkOnlyKey(t, r, 2, key, old, moved)
}

// expiring returns podOpts.params that read a stream's expiry from the test's X-Expires header (RFC 3339 with
// fractions) and its notice from X-Notice.
func expiring(r *http.Request, p *Params) error {
	if v := r.Header.Get("X-Expires"); v != "" {
		exp, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return err
		}
		p.Expires = exp
	}
	if v := r.Header.Get("X-Notice"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		p.ExpiryNotice = d
	}
	return nil
}

// TestSeamTokenExpiryResumes: a stream whose token expires gets token-expiring, then token-expired with its
// position, and ends; the client reconnects to another pod with a new token and that id, and gets every
// record after it, those produced meanwhile included, each once. On both paths, filtered or not.
func TestSeamTokenExpiryResumes(t *testing.T) {
	for _, writers := range []int{0, 2} {
		for _, query := range []string{"", "?event=keep"} {
			t.Run(fmt.Sprintf("writers %d query %q", writers, query), func(t *testing.T) {
				kc := memlog.New()
				kc.CreateTopic("t", 2)
				opts := podOpts{writers: writers, params: expiring}
				a := startPod(t, kc, "t", opts)
				a.waitReady(t)
				seq := 0
				produceN := func(n int) {
					for range n {
						seq++
						for _, typ := range []string{"keep", "skip"} {
							kc.Produce("t", &kgo.Record{
								Partition: int32(seq % 2), Value: fmt.Appendf(nil, "%s-%d", typ, seq),
								Headers: []kgo.RecordHeader{{Key: "event", Value: []byte(typ)}},
							})
						}
					}
				}
				h := http.Header{}
				h.Set("X-Expires", time.Now().Add(1200*time.Millisecond).Format(time.RFC3339Nano))
				h.Set("X-Notice", "600ms")
				c := a.openWith(t, query, h)
				produceN(3)
				got := map[string]int{}
				var lastID, endID string
				notice := false
				for _, ev := range c.untilEnd(t) {
					switch ev.Type {
					case EventTokenExpiring:
						notice = true
						if query == "" && ev.ID != lastID {
							t.Errorf("token-expiring id %s, want the last id %s", ev.ID, lastID)
						}
					case EventTokenExpired:
						if query == "" && ev.ID != lastID {
							t.Errorf("token-expired id %s, want the last id %s", ev.ID, lastID)
						}
						endID = ev.ID
					default:
						if query != "" && ev.Type != "keep" {
							t.Errorf("a filtered stream got %+v", ev)
						}
						got[ev.Data]++
						lastID = ev.ID
					}
				}
				if !notice || endID == "" {
					t.Fatalf("notice %v, end id %q", notice, endID)
				}
				if n := a.stats.Closed[ReasonTokenExpired].Load(); n != 1 {
					t.Errorf("Closed[token_expired] = %d", n)
				}
				produceN(2) // while the client fetches its new token
				b := startPod(t, kc, "t", opts)
				b.waitReady(t)
				h = http.Header{}
				h.Set("Last-Event-ID", endID)
				h.Set("X-Expires", time.Now().Add(time.Hour).Format(time.RFC3339Nano))
				r := b.openWith(t, query, h)
				produceN(1)
				perRound := 2
				if query != "" {
					perRound = 1
				}
				for range 3 * perRound {
					got[r.next(t).Data]++
				}
				for i := 1; i <= 6; i++ {
					for _, typ := range []string{"keep", "skip"} {
						want := 1
						if query != "" && typ == "skip" {
							want = 0
						}
						if v := fmt.Sprint(typ, "-", i); got[v] != want {
							t.Errorf("across the expiry the client got %s %d times, want %d (all: %v)", v, got[v], want, got)
						}
					}
				}
			})
		}
	}
}
