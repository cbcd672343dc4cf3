package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

func TestTracker(t *testing.T) {
	now := time.Unix(1, 0)
	tests := []struct {
		name   string
		open   string
		frames []string
		resume string   // when set, a second opening id after the frames
		after  []string // frames after the resume
		ends   []int64  // topic end offsets at the finish; nil = none
		want   trackerCounts
	}{
		{
			name:   "complete across partitions",
			open:   "v1:0-9.1-4",
			frames: []string{"v1:0-10.1-4", "v1:0-10.1-5", "v1:0-11.1-5", "v1:0-11.1-5.2-0"},
			ends:   []int64{12, 6, 1},
			want:   trackerCounts{Delivered: 4},
		},
		{
			name:   "a gap of two in one partition",
			open:   "v1:0-9",
			frames: []string{"v1:0-10", "v1:0-13", "v1:0-14"},
			want:   trackerCounts{Delivered: 3, Lost: 2},
		},
		{
			name:   "a frame that moves two partitions skips one record",
			open:   "v1:0-9.1-4",
			frames: []string{"v1:0-10.1-5"},
			want:   trackerCounts{Delivered: 1, Lost: 1},
		},
		{
			name:   "the same id twice is a duplicate",
			open:   "v1:0-9",
			frames: []string{"v1:0-10", "v1:0-10", "v1:0-11"},
			want:   trackerCounts{Delivered: 2, Dup: 1},
		},
		{
			name:   "an id that goes back re-delivers",
			open:   "v1:0-9.1-4",
			frames: []string{"v1:0-10.1-4", "v1:0-11.1-4", "v1:0-10.1-4", "v1:0-11.1-4", "v1:0-12.1-4"},
			want:   trackerCounts{Delivered: 3, Dup: 2},
		},
		{
			name:   "a gap and a duplicate together",
			open:   "v1:0-0.1-0.2-0",
			frames: []string{"v1:0-1.1-0.2-0", "v1:0-1.1-1.2-0", "v1:0-1.1-1.2-0", "v1:0-1.1-1.2-3"},
			want:   trackerCounts{Delivered: 3, Lost: 2, Dup: 1},
		},
		{
			name:   "an absent partition is owed from offset 0",
			open:   "v1:0-3",
			frames: []string{"v1:0-3.1-1"},
			want:   trackerCounts{Delivered: 1, Lost: 1},
		},
		{
			name:   "the missing tail is lost",
			open:   "v1:0-9.1-9",
			frames: []string{"v1:0-10.1-9"},
			ends:   []int64{13, 11},
			want:   trackerCounts{Delivered: 1, Lost: 3},
		},
		{
			name:   "an exact resume",
			open:   "v1:0-9",
			frames: []string{"v1:0-10"},
			resume: "v1:0-10",
			after:  []string{"v1:0-11", "v1:0-12"},
			ends:   []int64{13},
			want:   trackerCounts{Delivered: 3},
		},
		{
			name:   "a resume ahead of the client skips records",
			open:   "v1:0-9",
			frames: []string{"v1:0-10"},
			resume: "v1:0-15",
			after:  []string{"v1:0-16"},
			want:   trackerCounts{Delivered: 2, Lost: 5},
		},
		{
			name:   "a resume behind the client replays duplicates",
			open:   "v1:0-9",
			frames: []string{"v1:0-10", "v1:0-11"},
			resume: "v1:0-9",
			after:  []string{"v1:0-10", "v1:0-11", "v1:0-12"},
			want:   trackerCounts{Delivered: 3, Dup: 2},
		},
		{
			name:   "a malformed id",
			open:   "v1:0-9",
			frames: []string{"v1:0-10", "garbage", "v1:0-11"},
			want:   trackerCounts{Delivered: 2, BadIDs: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracker
			if err := tr.open(tc.open, now); err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.frames {
				tr.frame(id, &lazyClock{now})
			}
			if tc.resume != "" {
				if err := tr.open(tc.resume, now); err != nil {
					t.Fatal(err)
				}
				for _, id := range tc.after {
					tr.frame(id, &lazyClock{now})
				}
			}
			if tc.ends != nil {
				tr.finish(tc.ends)
			}
			if got := tr.counts(); got != tc.want {
				t.Fatalf("counts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTrackerTarget(t *testing.T) {
	var tr tracker
	t0 := time.Unix(100, 0)
	if err := tr.open("v1:0-4.1-4", t0); err != nil {
		t.Fatal(err)
	}
	tr.setTarget([]int64{6, 6}, t0)
	if !tr.reached().IsZero() || tr.caughtUp([]int64{6, 6}) {
		t.Fatal("target reached before the records arrived")
	}
	tr.frame("v1:0-5.1-4", &lazyClock{t0.Add(time.Second)})
	if !tr.reached().IsZero() {
		t.Fatal("target reached one record early")
	}
	tr.frame("v1:0-5.1-5", &lazyClock{t0.Add(2 * time.Second)})
	if got := tr.reached(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("reached = %v, want %v", got, t0.Add(2*time.Second))
	}
	if tr.last() != "v1:0-5.1-5" {
		t.Fatalf("last = %q", tr.last())
	}
}

// TestTrackerCompactIDs: compact ids are checked like v1 ones, through their checkpoints.
func TestTrackerCompactIDs(t *testing.T) {
	cps := newCheckpoints(nil, "positions")
	cps.once.Do(func() {}) // no Kafka: the checkpoints are given
	refA, refB := position.Ref{Partition: 0, Offset: 3}, position.Ref{Partition: 0, Offset: 9}
	cps.m[refA] = position.Checkpoint{Vector: position.MustParse("v1:0-5.1-7")}
	cps.m[refB] = position.Checkpoint{Vector: position.MustParse("v1:0-6.1-8")}
	id := func(ref position.Ref, pos string) string {
		b, ok := position.AppendCompact(nil, ref, cps.m[ref].Vector, position.MustParse(pos), 256)
		if !ok {
			t.Fatalf("AppendCompact(%v, %s) refused", ref, pos)
		}
		return string(b)
	}
	tr := tracker{cps: cps}
	now := time.Now()
	if err := tr.open("v1:0-5.1-7", now); err != nil {
		t.Fatal(err)
	}
	tr.frame(id(refA, "v1:0-6.1-7"), &lazyClock{now})       // delivered
	tr.frame(id(refA, "v1:0-6.1-8"), &lazyClock{now})       // delivered
	tr.frame(id(refA, "v1:0-6.1-8"), &lazyClock{now})       // duplicate
	tr.frame(id(refB, "v1:0-7.1-8"), &lazyClock{now})       // delivered, under a new checkpoint
	tr.frame(id(refB, "v1:0-7.1-8.2-1"), &lazyClock{now})   // delivered 1 and lost 1 (2-0)
	tr.frame("v1:0-8.1-8.2-1", &lazyClock{now})             // a v1 fallback frame: delivered
	tr.frame("v2:"+strings.Repeat("A", 4), &lazyClock{now}) // malformed
	want := trackerCounts{Delivered: 5, Lost: 1, Dup: 1, BadIDs: 1}
	if got := tr.counts(); got != want {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}
	if tr.v1Frames() != 1 {
		t.Fatalf("v1 frames = %d, want 1", tr.v1Frames())
	}
}

// TestCheckpointsCheckTheRecord: an id whose check is not its record's is an error, not that record's
// vector; an id without a check takes the record as it is.
func TestCheckpointsCheckTheRecord(t *testing.T) {
	cps := newCheckpoints(nil, "positions")
	cps.once.Do(func() {}) // no Kafka: the checkpoints are given
	cps.m[position.Ref{Partition: 0, Offset: 5}] = position.Checkpoint{Vector: position.MustParse("v1:0-5"), Sum: 9}
	for _, tc := range []struct {
		check uint8
		ok    bool
	}{{9, true}, {0, true}, {10, false}} {
		v, err := cps.base(position.Ref{Partition: 0, Offset: 5, Check: tc.check})
		if (err == nil) != tc.ok || tc.ok && v.String() != "v1:0-5" {
			t.Errorf("check %d: base = %v, %v; want ok %v", tc.check, v, err, tc.ok)
		}
	}
}
