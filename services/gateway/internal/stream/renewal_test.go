package stream

import (
	"io"
	"testing"
	"testing/synctest"
	"time"
)

func TestRenewalExtendsOnlyLater(t *testing.T) {
	base := time.Unix(1000, 0)
	r := NewRenewal(base)
	r.Extend(base.Add(-time.Second))
	if !r.Until().Equal(base) {
		t.Fatalf("Extend moved the renewal earlier: %v", r.Until())
	}
	r.Extend(base.Add(time.Minute))
	if !r.Until().Equal(base.Add(time.Minute)) {
		t.Fatalf("Until %v after Extend", r.Until())
	}
}

// TestTokenRenewal (a stream on its own goroutine): a stream whose Renewal moved on before its end goes on past
// Params.Expires without a token frame, and ends with token-expired at the Renewal's time once it moves no more.
func TestTokenRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeeder(t, 1<<20)
		f.publishTyped("keep", 1)
		w := newMemWriter()
		var st Stats
		start := time.Now()
		r := NewRenewal(start.Add(10 * time.Second))
		p := Params{Expires: start.Add(10 * time.Second), Renewal: r}
		done, _ := serveMem(t, NewServer(Config{Logger: discardLog}), w, f.rg, p, &st)
		time.Sleep(5 * time.Second)
		r.Extend(start.Add(30 * time.Second)) // the hook said yes again before the end
		time.Sleep(10 * time.Second)          // past the first end
		synctest.Wait()
		select {
		case reason := <-done:
			t.Fatalf("the stream ended (%v) at its first expiry, though renewed", reason)
		default:
		}
		f.publishTyped("keep", 1)
		time.Sleep(15*time.Second - time.Millisecond) // just before the renewed end
		synctest.Wait()
		select {
		case reason := <-done:
			t.Fatalf("the stream ended (%v) before its renewed expiry", reason)
		default:
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if reason := closed(t, done); reason != ReasonTokenExpired {
			t.Fatalf("reason %v, want token_expired", reason)
		}
		evs, _ := events(t, w.String())
		if len(evs) != 2 || evs[0].Type != "keep" || evs[1].Type != EventTokenExpired {
			t.Fatalf("events %+v: want keep, then token-expired (no frame at the first expiry)", evs)
		}
		checkTokenFrame(t, evs[1], EventTokenExpired, f.id())
		if evs[1].Data != `{"expired_at":"`+start.Add(30*time.Second).UTC().Format(time.RFC3339)+`"}` {
			t.Errorf("token-expired data %s: want the renewed expiry", evs[1].Data)
		}
	})
}

// TestPoolTokenRenewal: a parked stream's writer moves its end to the Renewal's, and ends it there.
func TestPoolTokenRenewal(t *testing.T) {
	f := newFeeder(t, 1<<20)
	start := time.Now()
	r := NewRenewal(start.Add(700 * time.Millisecond))
	p := Params{Expires: start.Add(700 * time.Millisecond), Renewal: r}
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, p).start(t)
	c := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	r.Extend(start.Add(1500 * time.Millisecond))
	time.Sleep(time.Until(start.Add(900 * time.Millisecond)))
	f.publishTyped("keep", 1) // the stream lives on past its first end
	ev, err := c.p.Next()
	if err != nil || ev.Type != "keep" {
		t.Fatalf("after the first end: %+v, %v; want the record", ev, err)
	}
	ev, err = c.p.Next()
	if err != nil {
		t.Fatal(err)
	}
	checkTokenFrame(t, ev, EventTokenExpired, f.id())
	if time.Now().Before(r.Until()) {
		t.Errorf("the stream ended %v before its renewed end", time.Until(r.Until()))
	}
	if rest, err := io.ReadAll(c.br); err != nil || len(rest) != 0 {
		t.Fatalf("after the last frame: %q, %v", rest, err)
	}
}
