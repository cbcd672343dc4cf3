package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// gatewayFrames returns the frames a correct gateway sends a client at pos that has recs[:have]: the records
// after it merged by timestamp to the millisecond, ties by partition, each with the id of the position after
// it.
func gatewayFrames(recs []sent, have int, pos position.Vector) []sse.Event {
	rest := slices.Clone(recs[have:])
	slices.SortStableFunc(rest, func(a, b sent) int {
		if c := cmp.Compare(a.Timestamp.UnixMilli(), b.Timestamp.UnixMilli()); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	cur := pos.Clone()
	out := make([]sse.Event, 0, len(rest))
	for _, r := range rest {
		cur.Set(r.Partition, r.Offset)
		out = append(out, sse.Event{Type: "message", ID: cur.String(), Data: string(makeValue(r.Timestamp.UnixNano(), r.Seq, 120))})
	}
	return out
}

// checkAll checks frames in order and returns the first error, with the frame it came at.
func checkAll(o *owed, frames []sse.Event) (int, error) {
	for i, ev := range frames {
		if err := o.check(ev); err != nil {
			return i, err
		}
	}
	return len(frames), nil
}

// TestOwedTakesTheGatewaysOrder feeds the checker what a correct gateway sends, for one, three and twelve
// partitions, with records a millisecond apart and several to a millisecond (ties go by partition), on a
// topic that held records before.
func TestOwedTakesTheGatewaysOrder(t *testing.T) {
	for _, parts := range []int{1, 3, 12} {
		for _, gap := range []time.Duration{time.Millisecond, 150 * time.Microsecond, 20 * time.Microsecond} {
			start := make([]int64, parts)
			start[0] = 17
			recs := writtenEvery(start, 3000, gap)
			for _, have := range []int{0, 1, 7, 1500, 2999} {
				pos := positionAt(start, recs, have)
				o := newOwed(recs, have, pos)
				frames := gatewayFrames(recs, have, pos)
				if i, err := checkAll(o, frames); err != nil {
					t.Fatalf("%d partitions, %v apart, have %d: frame %d: %v", parts, gap, have, i, err)
				}
				if o.left != 0 || o.checked != len(recs)-have {
					t.Errorf("%d partitions, have %d: %d checked, %d left; want %d, 0", parts, have, o.checked, o.left, len(recs)-have)
				}
			}
		}
	}
}

// TestOwedWantsTiesByPartition checks that records sharing a millisecond must come by partition, not in the
// order they were written: records 0 (partition 0) to 3 (partition 0 again) share one.
func TestOwedWantsTiesByPartition(t *testing.T) {
	recs := writtenEvery([]int64{0, 0, 0}, 30, 300*time.Microsecond)
	var pos position.Vector
	cur := pos.Clone()
	var frames []sse.Event
	for _, r := range recs {
		cur.Set(r.Partition, r.Offset)
		frames = append(frames, sse.Event{Type: "message", ID: cur.String(), Data: string(makeValue(0, r.Seq, 0))})
	}
	i, err := checkAll(newOwed(recs, 0, pos), frames)
	if err == nil || i != 1 || !strings.Contains(err.Error(), "partition 1: offset 0") || !strings.Contains(err.Error(), "partition 0's offset 1") {
		t.Fatalf("write order: frame %d: %v; want frame 1 refused, partition 0's offset 1 coming first", i, err)
	}
}

// TestOwedRefuses mutates a correct twelve-partition stream: each change must be refused at the frame it
// makes, naming the partition.
func TestOwedRefuses(t *testing.T) {
	const parts, have = 12, 400
	start := make([]int64, parts)
	start[5] = 3
	recs := writtenEvery(start, 2000, 100*time.Microsecond)
	pos := positionAt(start, recs, have)
	good := gatewayFrames(recs, have, pos)
	seqAt := func(ev sse.Event) int64 { s, _ := seqOf(ev.Data); return s }
	// k is a frame followed by one of another partition and a later millisecond: swapping the two breaks the
	// order across partitions only.
	k := -1
	for i := 0; k < 0 && i+1 < len(good); i++ {
		a, b := recs[seqAt(good[i])], recs[seqAt(good[i+1])]
		if a.Partition != b.Partition && a.Timestamp.UnixMilli() < b.Timestamp.UnixMilli() {
			k = i
		}
	}
	if k < 0 {
		t.Fatal("no frame to swap")
	}
	pk := recs[seqAt(good[k])].Partition
	for _, tc := range []struct {
		name   string
		change func([]sse.Event) []sse.Event
		at     int
		want   string
	}{
		{"a frame left out", func(f []sse.Event) []sse.Event { return slices.Delete(f, k, k+1) }, k, fmt.Sprintf("partition %d", pk)},
		{"a frame twice", func(f []sse.Event) []sse.Event { return slices.Insert(f, k+1, f[k]) }, k + 1, fmt.Sprintf("partition %d: offset", pk)},
		{"two partitions swapped", func(f []sse.Event) []sse.Event { f[k], f[k+1] = f[k+1], f[k]; return f }, k, "which the replay's order puts first"},
		{"a stale id", func(f []sse.Event) []sse.Event { f[k+1].ID = f[k].ID; return f }, k + 1, "has id"},
		{"a record of no one", func(f []sse.Event) []sse.Event { f[k].Data = string(makeValue(0, 99999, 0)); return f }, k, "not a record this run wrote"},
		{"no seq", func(f []sse.Event) []sse.Event { f[k].Data = `{"ts":1}`; return f }, k, "not a record this run wrote"},
		{"a resync", func(f []sse.Event) []sse.Event { f[k].Type = "resync"; return f }, k, `event "resync"`},
		{"a record from before the position", func(f []sse.Event) []sse.Event {
			f[k].Data = string(makeValue(0, have-1, 0))
			return f
		}, k, "partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := tc.change(slices.Clone(good))
			i, err := checkAll(newOwed(recs, have, pos), frames)
			if err == nil || i != tc.at || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("frame %d: %v; want frame %d refused, saying %q", i, err, tc.at, tc.want)
			}
		})
	}
	// A stream that ends early leaves records owed.
	o := newOwed(recs, have, pos)
	if _, err := checkAll(o, good[:len(good)-3]); err != nil || o.left != 3 {
		t.Errorf("three frames short: %v, %d left; want 3 left", err, o.left)
	}
}

// TestReadOwed reads frames off a stream as the gateway writes them: all of them, and a stream that ends
// before the head.
func TestReadOwed(t *testing.T) {
	recs := writtenEvery([]int64{4, 0, 9}, 60, 400*time.Microsecond)
	pos := positionAt([]int64{4, 0, 9}, recs, 20)
	frames := gatewayFrames(recs, 20, pos)
	var b strings.Builder
	b.WriteString(": comment\n\n")
	for _, ev := range frames {
		fmt.Fprintf(&b, "id: %s\ndata: %s\n\n", ev.ID, ev.Data)
	}
	o := newOwed(recs, 20, pos)
	first, err := readOwed(sse.NewParser(strings.NewReader(b.String())), o, time.Now().Add(-time.Millisecond))
	if err != nil || o.checked != 40 || first < time.Millisecond {
		t.Fatalf("readOwed: %v, %d checked, first %v; want 40 checked, first at least the 1ms before start", err, o.checked, first)
	}
	text := b.String()
	cut := strings.LastIndex(text, "id: ")
	o = newOwed(recs, 20, pos)
	_, err = readOwed(sse.NewParser(strings.NewReader(text[:cut])), o, time.Now())
	if err == nil || !strings.Contains(err.Error(), "frame 40 of 40") {
		t.Fatalf("a stream one frame short: %v, want frame 40 of 40 missing", err)
	}
}

// fakeGateway serves one resume: it checks the Last-Event-ID, opens at it, waits, then writes frames.
func fakeGateway(t *testing.T, wantID, openAt string, wait time.Duration, frames []sse.Event) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Last-Event-ID"); got != wantID {
			http.Error(w, "Last-Event-ID "+got, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "id: %s\n\n", openAt)
		w.(http.Flusher).Flush()
		time.Sleep(wait)
		for _, ev := range frames {
			_, _ = fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev.ID, ev.Data)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream does not end: the client hangs up once it has everything
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestResumeOnce resumes from a fake gateway over a real connection: fresh counts the dial in the time to
// the first frame and reports it, open does not; a wrong opening or a frame left out fails the resume.
func TestResumeOnce(t *testing.T) {
	start := []int64{2, 0, 5}
	recs := writtenEvery(start, 90, 250*time.Microsecond)
	pos := positionAt(start, recs, 30)
	id := pos.String()
	frames := gatewayFrames(recs, 30, pos)
	const wait = 20 * time.Millisecond
	for _, fresh := range []bool{true, false} {
		srv := fakeGateway(t, id, id, wait, frames)
		o := newOwed(recs, 30, pos)
		tm, err := resumeOnce(context.Background(), srv.URL+"/streams/t", fresh, pos, o, 5*time.Second)
		if err != nil || o.checked != 60 {
			t.Fatalf("fresh=%v: %v, %d checked; want all 60", fresh, err, o.checked)
		}
		if tm.first < wait || (fresh && (tm.dial <= 0 || tm.dial > tm.first)) || (!fresh && tm.dial != 0) {
			t.Errorf("fresh=%v: first %v, dial %v; want the first frame after the %v wait, the dial inside it only when fresh",
				fresh, tm.first, tm.dial, wait)
		}
	}
	other := positionAt(start, recs, 31).String()
	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		wantIn string
	}{
		{"opened elsewhere", fakeGateway(t, id, other, 0, frames), "opened at"},
		{"a frame left out", fakeGateway(t, id, id, 0, slices.Delete(slices.Clone(frames), 10, 11)), "frame 11 of 60: partition"},
		{"the stream ends early", fakeGateway(t, id, id, 0, frames[:59]), "frame 60 of 60"},
	} {
		o := newOwed(recs, 30, pos)
		timeout := 5 * time.Second
		if tc.name == "the stream ends early" {
			timeout = 200 * time.Millisecond // the fake keeps the stream open: the resume times out
		}
		_, err := resumeOnce(context.Background(), tc.srv.URL+"/streams/t", true, pos, o, timeout)
		if err == nil || !strings.Contains(err.Error(), tc.wantIn) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.wantIn)
		}
	}
}
