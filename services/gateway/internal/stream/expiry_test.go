package stream

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// publishTyped publishes n frames of event type typ ("" for none) in one batch.
func (f *feeder) publishTyped(typ string, n int) {
	f.b.Reset()
	for range n {
		f.offset++
		f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), typ, []byte(fmt.Sprint(typ, f.offset-1))), 0, f.offset-1, nil)
	}
	f.rg.Publish(&f.b, []byte(f.id()))
}

// checkTokenFrame checks a token-expiring or token-expired event: its type, its id (the client's position)
// and its JSON data.
func checkTokenFrame(t *testing.T, ev sse.Event, typ, id string) {
	t.Helper()
	if ev.Type != typ || ev.ID != id {
		t.Fatalf("event %+v, want %s with id %s", ev, typ, id)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
		t.Fatalf("%s data %q: %v", typ, ev.Data, err)
	}
}

// TestTokenExpiry (a stream on its own goroutine): ExpiryNotice before Expires the stream gets an
// "event: token-expiring" frame and at Expires an "event: token-expired" frame, both with the client's
// position as their id, filtered frames included; then the stream ends with token_expired.
func TestTokenExpiry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		filter   string        // event type kept; empty means no filter
		lifetime time.Duration // Expires, from the stream's start
		notice   time.Duration
	}{
		{name: "unfiltered", lifetime: 10 * time.Second, notice: 3 * time.Second},
		{name: "filtered", filter: "keep", lifetime: 10 * time.Second, notice: 3 * time.Second},
		{name: "no notice", lifetime: 10 * time.Second},
		{name: "notice longer than the token lives", lifetime: 10 * time.Second, notice: time.Minute},
		{name: "expired at the start", lifetime: -time.Second, notice: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFeeder(t, 1<<20)
				f.publishTyped("keep", 1)
				w := newMemWriter()
				var st Stats
				p := Params{Expires: time.Now().Add(tc.lifetime), ExpiryNotice: tc.notice}
				if tc.filter != "" {
					p.Events = map[string]bool{tc.filter: true}
				}
				done, _ := serveMem(t, NewServer(Config{Logger: discardLog}), w, f.rg, p, &st)
				synctest.Wait()
				noticeAt := tc.lifetime - tc.notice
				want := []string{} // types of the events so far
				lastID := f.id()   // the client's position
				notices := int64(min(tc.notice, 1))
				if tc.lifetime <= 0 {
					want = append(want, EventTokenExpired) // no notice: the end is due already
					notices = 0
				} else {
					if tc.notice > 0 && noticeAt <= 0 {
						want = append(want, EventTokenExpiring)
					}
					time.Sleep(2 * time.Second)
					f.publishTyped("skip", 2) // filtered out when filtering: the position moves all the same
					f.publishTyped("keep", 1)
					lastID = f.id()
					want = append(want, "skip", "skip", "keep")
					if tc.filter != "" {
						want = want[:len(want)-3]
						want = append(want, "keep")
					}
					if tc.notice > 0 && noticeAt > 0 {
						time.Sleep(noticeAt - 2*time.Second)
						synctest.Wait()
						want = append(want, EventTokenExpiring)
						evs, _ := events(t, w.String())
						checkTokenFrame(t, evs[len(evs)-1], EventTokenExpiring, lastID)
						time.Sleep(time.Second)
						f.publishTyped("keep", 1)
						lastID = f.id()
						want = append(want, "keep")
					}
					time.Sleep(time.Until(p.Expires) - time.Millisecond)
					synctest.Wait()
					select {
					case r := <-done:
						t.Fatalf("the stream ended (%v) before its token expired", r)
					default:
					}
					time.Sleep(time.Millisecond)
					want = append(want, EventTokenExpired)
				}
				synctest.Wait()
				if r := closed(t, done); r != ReasonTokenExpired {
					t.Fatalf("reason %v, want token_expired", r)
				}
				evs, _ := events(t, w.String())
				var got []string
				for _, ev := range evs {
					got = append(got, ev.Type)
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("events %v, want %v; stream %q", got, want, w.String())
				}
				checkTokenFrame(t, evs[len(evs)-1], EventTokenExpired, lastID)
				if n := st.Closed[ReasonTokenExpired].Load(); n != 1 {
					t.Errorf("Closed[token_expired] = %d", n)
				}
				if n, want := st.TokenNotices.Load(), notices; n != want {
					t.Errorf("TokenNotices = %d, want %d", n, want)
				}
			})
		})
	}
}

// TestPoolTokenExpiry: a parked stream gets its token-expiring and token-expired frames from its writer's
// timer heap, with the client's position (filtered frames included), and ends with a clean end of the body.
func TestPoolTokenExpiry(t *testing.T) {
	for _, query := range []string{"", "?event=keep"} {
		t.Run("query "+query, func(t *testing.T) {
			f := newFeeder(t, 1<<20)
			p := Params{Expires: time.Now().Add(1500 * time.Millisecond), ExpiryNotice: 800 * time.Millisecond}
			ps := startPool(t, Config{}, &Topic{Ring: f.rg}, p).start(t)
			c := dialOpen(t, ps.hs.URL+query)
			waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
			f.publishTyped("keep", 1)
			if ev, err := c.p.Next(); err != nil || ev.Type != "keep" {
				t.Fatalf("first event %+v, %v", ev, err)
			}
			f.publishTyped("skip", 3)
			if query == "" {
				for range 3 {
					if _, err := c.p.Next(); err != nil {
						t.Fatal(err)
					}
				}
			}
			ev, err := c.p.Next()
			if err != nil {
				t.Fatal(err)
			}
			checkTokenFrame(t, ev, EventTokenExpiring, f.id())
			if time.Until(p.Expires) > 800*time.Millisecond {
				t.Errorf("the notice came %v before the expiry, want at most 800ms", time.Until(p.Expires))
			}
			f.publishTyped("skip", 2)
			if query == "" {
				for range 2 {
					if _, err := c.p.Next(); err != nil {
						t.Fatal(err)
					}
				}
			}
			ev, err = c.p.Next()
			if err != nil {
				t.Fatal(err)
			}
			checkTokenFrame(t, ev, EventTokenExpired, f.id())
			if time.Now().Before(p.Expires) {
				t.Errorf("the stream ended %v before the token expired", time.Until(p.Expires))
			}
			if rest, err := io.ReadAll(c.br); err != nil || len(rest) != 0 {
				t.Fatalf("after the last frame: %q, %v; want a clean end of the body", rest, err)
			}
			waitUntil(t, "the end counted", func() bool { return ps.st.Closed[ReasonTokenExpired].Load() == 1 })
			if n := ps.st.TokenNotices.Load(); n != 1 {
				t.Errorf("TokenNotices = %d", n)
			}
		})
	}
}
