package main

import (
	"io"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

func TestValueSeq(t *testing.T) {
	for data, want := range map[string]int64{
		`{"ts":1733300000000000000,"seq":0,"pad":""}`: 0,
		`{"ts":1,"seq":98765,"pad":"xx"}`:             98765,
		`{"ts":1,"seq":7}`:                            7,
		`{"ts":1,"pad":"x","seq":7}`:                  -1, // not where the tool writes it
		`{"seq":7}`:                                   -1,
		`{"ts":1,"seq":}`:                             -1,
		`base64:AAAA`:                                 -1,
	} {
		got, ok := valueSeq(data)
		if (want >= 0) != ok || (ok && got != want) {
			t.Errorf("valueSeq(%s) = %d, %v, want %d", data, got, ok, want)
		}
	}
}

func TestShapeQuery(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		i    int
		want string
	}{
		{config{Shape: shapePlain, Connections: 10}, 3, ""},
		{config{Shape: shapeFilter, Connections: 10}, 13, "filter=int%28value.seq%29+%25+10+%3D%3D+3"},
		{config{Shape: shapeFilter, Connections: 10, FilterMod: 4}, 13, "filter=int%28value.seq%29+%25+4+%3D%3D+1"},
		{config{Shape: shapeConflate, Conflate: 250 * time.Millisecond}, 1, "conflate=250ms"},
	} {
		q := url.Values{}
		tc.cfg.shapeQuery(q, tc.i)
		if got := q.Encode(); got != tc.want {
			t.Errorf("%s %d: %s, want %s", tc.cfg.Shape, tc.i, got, tc.want)
		}
	}
}

// value is a value as the tool produces it.
func value(seq int64) string { return `{"ts":1,"seq":` + strconv.FormatInt(seq, 10) + `,"pad":""}` }

// TestShapeCheckFilter: a filter client owes exactly the run's seqs of its class; a seq of another class, one
// outside the run, or one received twice is counted, and a missing one is lost.
func TestShapeCheckFilter(t *testing.T) {
	// owed against counting, for runs starting and ending anywhere.
	for first := range int64(9) {
		for end := first; end < first+20; end++ {
			for rem := range int64(4) {
				s := &shapeCheck{shape: shapeFilter, mod: 4, rem: rem, first: first, end: end}
				var want int64
				for seq := first; seq < end; seq++ {
					if seq%4 == rem {
						want++
					}
				}
				if got := s.owed(); got != want {
					t.Fatalf("first %d end %d rem %d: owed %d, want %d", first, end, rem, got, want)
				}
			}
		}
	}
	s := newShapeCheck(config{Shape: shapeFilter, Connections: 3}, 4) // class 1 of 3
	s.start(10)
	for _, seq := range []int64{10, 13, 13, 16, 17, 5, 401, 403} {
		s.record(value(seq))
	}
	s.record("not the tool's")
	if s.complete() {
		t.Fatal("complete before producing ended")
	}
	s.ended(23) // owed: 10, 13, 16, 19, 22
	if dup, wrong := s.counts(); dup != 1 || wrong != 5 || s.complete() || s.lost() != 2 {
		t.Fatalf("dup %d wrong %d complete %v lost %d, want 1, 5 (17, 5, 401, no seq, and 403: past the end), false, 2", dup, wrong, s.complete(), s.lost())
	}
	s.record(value(19))
	s.record(value(22))
	if !s.complete() || s.lost() != 0 || s.doneAt.IsZero() {
		t.Fatalf("complete %v lost %d doneAt %v, want true, 0, set", s.complete(), s.lost(), s.doneAt)
	}
}

// TestShapeCheckConflate: a conflated client must end with every key's final value of the run; a key's value
// not above the one before is a duplicate.
func TestShapeCheckConflate(t *testing.T) {
	s := newShapeCheck(config{Shape: shapeConflate, Keys: 3}, 0)
	s.start(100)
	// The run's seqs are 100..109: the final values are 108 (key 0), 109 (key 1), 107 (key 2).
	for _, seq := range []int64{100, 101, 105, 104, 104, 109, 108} {
		s.record(value(seq))
	}
	s.ended(110)
	if dup, wrong := s.counts(); dup != 1 || wrong != 0 {
		t.Fatalf("dup %d wrong %d, want 1 (104 again), 0", dup, wrong)
	}
	if got := s.lost(); got != 1 {
		t.Fatalf("lost %d, want 1 (key 2 stopped at 104, not 107)", got)
	}
	s.record(value(107))
	if got := s.lost(); got != 0 {
		t.Fatalf("lost %d after the final value of key 2, want 0", got)
	}
	// A key the run never wrote owes nothing.
	s = newShapeCheck(config{Shape: shapeConflate, Keys: 5}, 0)
	s.start(100)
	s.record(value(100))
	s.ended(101)
	if got := s.lost(); got != 0 {
		t.Fatalf("lost %d with one record written, want 0", got)
	}
}

// TestTrackerSkips: a shaped stream's ids skip records on purpose; the tracker counts no loss for that, and
// still counts a frame that does not move the position as a duplicate.
func TestTrackerSkips(t *testing.T) {
	for _, skips := range []bool{false, true} {
		tr := &tracker{skips: skips}
		if err := tr.open("v1:0-9", time.Now()); err != nil {
			t.Fatal(err)
		}
		var clk lazyClock
		tr.frame("v1:0-12", &clk)
		tr.frame("v1:0-12", &clk)
		n := tr.counts()
		if want := map[bool]int64{false: 2, true: 0}[skips]; n.Lost != want || n.Dup != 1 || n.Delivered != 1 {
			t.Errorf("skips %v: %+v, want %d lost, 1 duplicate, 1 delivered", skips, n, want)
		}
	}
}

func TestParseConfigShape(t *testing.T) {
	env := func(string) string { return "" }
	for _, args := range [][]string{
		{"--shape=filtered"},
		{"--mode=storm", "--shape=filter"},
		{"--shape=conflate", "--conflate=5ms"},
		{"--shape=conflate", "--conflate=2m"},
		{"--shape=filter", "--filter-mod=-1"},
	} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
	c, err := parseConfig([]string{"--shape=filter", "--connections=1000", "--filter-mod=0"}, env, io.Discard)
	if err != nil || c.filterMod() != 1000 {
		t.Fatalf("parseConfig: %v, filter mod %d, want 1000 (one class per connection)", err, c.filterMod())
	}
}

// TestShapeSnapshot: a snapshot client's frames before live are the topic's state, not judged by seq; at live
// the tracker takes the cut and from there counts every skipped record as lost.
func TestShapeSnapshot(t *testing.T) {
	c := &client{tr: tracker{skips: true}, sc: newShapeCheck(config{Shape: shapeSnapshot}, 0)}
	var sh shared
	if err := c.begin(&sh, "v1:", connOpts{}); err != nil {
		t.Fatal(err)
	}
	c.sc.start(100)
	for _, ev := range []sse.Event{
		{ID: "v1:0-40", Data: `{"ts":1,"seq":3}`}, // state: offsets skipped, seqs before the run
		{ID: "v1:0-90", Data: "not the tool's"},
		{ID: "v1:0-99", Type: "live", Data: `{"id":"v1:0-99"}`},
		{ID: "v1:0-100", Data: value(100)},
		{ID: "v1:0-102", Data: value(102)}, // 101 skipped after live: lost
	} {
		if err := c.event(&sh, ev, false); err != nil {
			t.Fatal(err)
		}
	}
	c.sc.ended(103)
	opened, live, state := c.sc.snapshotAt()
	n := c.tr.counts()
	if dup, wrong := c.sc.counts(); state != 2 || live.Before(opened) || live.IsZero() || n.Lost != 1 || n.Dup != 0 || dup != 0 || wrong != 0 {
		t.Fatalf("state %d live %v (opened %v) tracker %+v dup %d wrong %d; want 2 frames of state, live, 1 lost", state, live, opened, n, dup, wrong)
	}
}
