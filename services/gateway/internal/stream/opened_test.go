package stream

import (
	"testing"
)

// TestOpenedEvent: with opened=1 the opening block is followed by an "opened" event of the same id, whose data
// names it (a page's EventSource never hands it an id-only block's id); the records follow as usual. Without
// the parameter, the first event is the first record.
func TestOpenedEvent(t *testing.T) {
	f := newFeeder(t, 1<<20)
	f.publish("a", "b")
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)

	c := dialOpen(t, ps.hs.URL+"?opened=1")
	if c.id != "v1:0-1" {
		t.Fatalf("opening id %q, want v1:0-1", c.id)
	}
	f.publish("c")
	ev, err := c.p.Next()
	if err != nil || ev.Type != OpenedEvent || ev.ID != c.id || ev.Data != `{"id":"v1:0-1"}` {
		t.Fatalf("first event %+v, %v; want opened with id %s", ev, err, c.id)
	}
	if ev, err = c.p.Next(); err != nil || ev.Data != "c" || ev.ID != "v1:0-2" {
		t.Fatalf("then %+v, %v; want the record c", ev, err)
	}

	plain := dialOpen(t, ps.hs.URL)
	f.publish("d")
	if ev, err := plain.p.Next(); err != nil || ev.Data != "d" {
		t.Fatalf("without opened=1 the first event is %+v, %v; want the record d", ev, err)
	}
}
