package stream

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// TestConflate: a conflated stream sends, of each interval's records, the latest of each key in the order
// they came, and every record without a key; each frame's id is the stream's position with that record's
// offset, so that the ids rise with the frames and a resume from any of them gets the final value of every
// key. Such a stream is not parked: its own loop wakes at the interval's end.
func TestConflate(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL+"?conflate=150ms")
	publish := func(recs ...[2]string) {
		f.b.Reset()
		for _, r := range recs {
			f.offset++
			var key []byte
			if r[0] != "" {
				key = []byte(r[0])
			}
			f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), "", []byte(r[0]+"="+r[1])), 0, f.offset-1, key)
		}
		f.rg.Publish(&f.b, []byte(f.id()))
	}
	start := time.Now()
	// Offsets 0..8: a=1 b=1 a=2 (none)=x c=1 b=2 a=3 c=2 (none)=y
	publish([2]string{"a", "1"}, [2]string{"b", "1"}, [2]string{"a", "2"})
	publish([2]string{"", "x"}, [2]string{"c", "1"}, [2]string{"b", "2"})
	publish([2]string{"a", "3"}, [2]string{"c", "2"}, [2]string{"", "y"})
	want := []struct {
		data   string
		offset int64
	}{{"=x", 3}, {"b=2", 5}, {"a=3", 6}, {"c=2", 7}, {"=y", 8}}
	for i, w := range want {
		ev, err := c.p.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if ev.Data != w.data || ev.ID != fmt.Sprintf("v1:0-%d", w.offset) {
			t.Errorf("frame %d = %+v, want %s at offset %d", i, ev, w.data, w.offset)
		}
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("the first frames came after %v, before the interval's end", waited)
	}
	if n := ps.st.Parked.Load(); n != 0 {
		t.Errorf("Parked = %d, want 0", n)
	}
	// A second interval: only what came in it.
	publish([2]string{"b", "3"}, [2]string{"b", "4"})
	ev, err := c.p.Next()
	if err != nil || ev.Data != "b=4" || ev.ID != "v1:0-10" {
		t.Fatalf("second interval: %+v, %v", ev, err)
	}
}

// TestConflateIDsAcrossPartitions: held frames of several partitions go out in the order they came, each id
// the position as of the frames sent: a partition's offset is never ahead of a record it still owes.
func TestConflateIDsAcrossPartitions(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL+"?conflate=100ms")
	var pos position.Vector
	f.b.Reset()
	// partition 0: k=1 (0), j=1 (1), k=2 (2); partition 1: k=1 (0), k=2 (1)
	recs := []struct {
		p    int32
		o    int64
		k, v string
	}{{0, 0, "k", "1"}, {1, 0, "k", "1"}, {0, 1, "j", "1"}, {1, 1, "k", "2"}, {0, 2, "k", "2"}}
	for _, r := range recs {
		pos.Set(r.p, r.o)
		id, _ := pos.AppendText(nil)
		f.b.Add(sse.AppendEvent(f.b.Buf(), string(id), "", []byte(fmt.Sprintf("%d/%s=%s", r.p, r.k, r.v))), r.p, r.o, []byte(r.k))
	}
	last, _ := pos.AppendText(nil)
	f.rg.Publish(&f.b, last)
	want := []struct{ data, id string }{{"0/j=1", "v1:0-1"}, {"1/k=2", "v1:0-1.1-1"}, {"0/k=2", "v1:0-2.1-1"}}
	for i, w := range want {
		ev, err := c.p.Next()
		if err != nil || ev.Data != w.data || ev.ID != w.id {
			t.Fatalf("frame %d = %+v, %v; want %s with id %s", i, ev, err, w.data, w.id)
		}
	}
}

// TestConflateTokenExpiry: the token's frames of a conflated stream carry the position the client has, not
// one past records still held: a client whose token expires while a record is held resumes before it.
func TestConflateTokenExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeeder(t, 1<<20)
		f.publishTyped("", 1)
		before := f.id()
		w := newMemWriter()
		var st Stats
		p := Params{Expires: time.Now().Add(10 * time.Second), ExpiryNotice: 3 * time.Second, Conflate: time.Minute}
		done, _ := serveMem(t, NewServer(Config{Logger: discardLog}), w, f.rg, p, &st)
		synctest.Wait()
		time.Sleep(2 * time.Second)
		f.b.Reset()
		f.offset++
		f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), "", []byte("held")), 0, f.offset-1, []byte("k"))
		f.rg.Publish(&f.b, []byte(f.id()))
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if r := closed(t, done); r != ReasonTokenExpired {
			t.Fatalf("reason %v, want token_expired", r)
		}
		evs, _ := events(t, w.String())
		if len(evs) != 2 {
			t.Fatalf("events %+v, want the two token frames alone (the record is held)", evs)
		}
		checkTokenFrame(t, evs[0], EventTokenExpiring, before)
		checkTokenFrame(t, evs[1], EventTokenExpired, before)
	})
}

// TestTopicConflate: a topic conflated by its operator (Topic.Conflate) conflates a stream that did not ask,
// and a stream asking for a shorter interval gets the topic's.
func TestTopicConflate(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg, Conflate: 100 * time.Millisecond}, Params{}).start(t)
	for _, q := range []string{"", "?conflate=10ms"} {
		c := dialOpen(t, ps.hs.URL+q)
		f.b.Reset()
		for _, v := range []string{"1", "2", "3"} {
			f.offset++
			f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), "", []byte("a="+v)), 0, f.offset-1, []byte("a"))
		}
		f.rg.Publish(&f.b, []byte(f.id()))
		ev, err := c.p.Next()
		if err != nil || ev.Data != "a=3" || ev.ID != f.id() {
			t.Errorf("stream%s: %+v, %v; want a=3 alone, at %s", q, ev, err, f.id())
		}
		_ = c.resp.Body.Close()
	}
}

// TestConflateBigFlushInPieces: what a conflated stream sends at once (here 1 MiB of records without a key,
// past its hold's bound) goes out in pieces, each held against PendingBytes alone: a pod whose pending bound
// is smaller than one such flush still serves it (before, the write was refused and the stream ended as
// write_failed).
func TestConflateBigFlushInPieces(t *testing.T) {
	f := newFeeder(t, 8<<20)
	ps := startPool(t, Config{PendingBytes: 512 << 10}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL+"?conflate=50ms")
	value := fmt.Sprintf("%01000d", 0)
	const n = 1200 // about 1.2 MB of frames
	values := make([]string, n)
	for i := range values {
		values[i] = value
	}
	f.publish(values...)
	for i := range n {
		ev, err := c.p.Next()
		if err != nil {
			t.Fatalf("frame %d of %d: %v (write_failed: %d)", i, n, err, ps.st.Closed[ReasonWriteFailed].Load())
		}
		if ev.ID != fmt.Sprintf("v1:0-%d", i) {
			t.Fatalf("frame %d: id %s", i, ev.ID)
		}
	}
}
