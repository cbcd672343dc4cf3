package stream

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// fakeRing is a ring index: per partition, the lowest offset the ring holds and the sequence of that frame;
// the frame of offset o is at sequence seq+(o-low). It holds everything up to the head.
type fakeRing map[int32]struct{ low, seq int64 }

func (r fakeRing) Seek(p int32, off int64) (uint64, bool) {
	e, ok := r[p]
	if !ok || off < e.low {
		return 0, false
	}
	return uint64(e.seq + off - e.low), true //nolint:gosec // test values are small
}

var errWM = errors.New("kafka down")

// TestMakePlan: the planner's decisions, partition by partition, table by table, without any Kafka: the ring
// first when Kafka's low watermark allows it, Kafka ranges otherwise, resyncs for what retention took and for
// clients ahead of the log, the watermarks asked for only when needed, and a fresh high watermark before an
// ahead resync.
func TestMakePlan(t *testing.T) {
	wm := func(lowHigh ...int64) map[int32]feed.Watermarks {
		out := map[int32]feed.Watermarks{}
		for i := 0; i < len(lowHigh); i += 2 {
			out[int32(i/2)] = feed.Watermarks{Low: lowHigh[i], High: lowHigh[i+1]} //nolint:gosec // test values are small
		}
		return out
	}
	cases := []struct {
		name     string
		pos      string
		head     string
		resuming bool
		ring     fakeRing
		wm       map[int32]feed.Watermarks
		fresh    bool
		wmErr    error

		need      wmNeed
		err       error
		cursor    uint64
		wantPos   string
		ranges    []replay.Range
		retention []ResyncPartition
		ahead     []ResyncPartition
		skipped   int64
	}{
		{
			name: "at the head: nothing to ask", pos: "v1:0-9.1-9", head: "v1:0-9.1-9", resuming: true,
			cursor: 100, wantPos: "v1:0-9.1-9",
		},
		{
			name: "behind: the watermarks first", pos: "v1:0-5", head: "v1:0-9", resuming: true,
			ring: fakeRing{0: {0, 90}}, need: needCached,
		},
		{
			name: "the ring serves", pos: "v1:0-5.1-7", head: "v1:0-9.1-9", resuming: true,
			ring: fakeRing{0: {0, 90}, 1: {0, 50}}, wm: wm(0, 10, 0, 10),
			cursor: 58, wantPos: "v1:0-5.1-7",
		},
		{
			name: "the ring lacks one partition: a range", pos: "v1:0-5.1-2", head: "v1:0-9.1-9", resuming: true,
			ring: fakeRing{0: {0, 90}, 1: {5, 60}}, wm: wm(0, 10, 0, 10),
			cursor: 96, wantPos: "v1:0-5.1-2", ranges: []replay.Range{{Partition: 1, After: 2, Upto: 9}},
		},
		{
			name: "a partition absent from the id is read from its start", pos: "v1:0-9", head: "v1:0-9.1-4", resuming: true,
			ring: fakeRing{0: {0, 90}}, wm: wm(0, 10, 0, 5),
			cursor: 100, wantPos: "v1:0-9", ranges: []replay.Range{{Partition: 1, After: -1, Upto: 4}},
		},
		{
			name: "below the low watermark while resuming: retention, whatever the ring holds", pos: "v1:0-1", head: "v1:0-9", resuming: true,
			ring: fakeRing{0: {0, 90}}, wm: wm(4, 10),
			cursor: 100, wantPos: "v1:0-9", skipped: 8,
			retention: []ResyncPartition{{Partition: 0, Requested: 2, LowWatermark: 4, ResumesAt: 10, Skipped: 8}},
		},
		{
			name: "below the low watermark when starting: from the low watermark, which the position names", pos: "v1:", head: "v1:0-9",
			ring: fakeRing{0: {6, 96}}, wm: wm(4, 10),
			cursor: 100, wantPos: "v1:0-3", ranges: []replay.Range{{Partition: 0, After: 3, Upto: 9}},
		},
		{
			name: "starting, the ring serves from the low watermark", pos: "v1:", head: "v1:0-9.1-9",
			ring: fakeRing{0: {4, 94}, 1: {0, 50}}, wm: wm(4, 10, 0, 10),
			cursor: 50, wantPos: "v1:0-3",
		},
		{
			name: "a resume from a position at the log start: no resync", pos: "v1:0-3.1-6", head: "v1:0-9.1-9", resuming: true,
			ring: fakeRing{0: {6, 96}}, wm: wm(4, 10, 7, 10),
			cursor: 100, wantPos: "v1:0-3.1-6", ranges: []replay.Range{{Partition: 0, After: 3, Upto: 9}, {Partition: 1, After: 6, Upto: 9}},
		},
		{
			name: "watermarks down, the ring serves", pos: "v1:0-5", head: "v1:0-9", resuming: true,
			ring: fakeRing{0: {0, 90}}, wmErr: errWM, cursor: 96, wantPos: "v1:0-5",
		},
		{
			name: "watermarks down, the ring lacks it", pos: "v1:0-1", head: "v1:0-9", resuming: true,
			ring: fakeRing{0: {5, 95}}, wmErr: errWM, err: errWM,
		},
		{
			name: "ahead of a cached high watermark: ask again", pos: "v1:0-20", head: "v1:0-9", resuming: true,
			wm: wm(0, 10), need: needFresh,
		},
		{
			name: "ahead of a fresh high watermark: ahead resync", pos: "v1:0-20", head: "v1:0-9", resuming: true,
			wm: wm(0, 10), fresh: true, cursor: 100, wantPos: "v1:0-9",
			ahead: []ResyncPartition{{Partition: 0, Requested: 21, LowWatermark: 0, ResumesAt: 10}},
		},
		{
			name: "ahead of the pod, not of the log: the pod lags", pos: "v1:0-20", head: "v1:0-9", resuming: true,
			wm: wm(0, 30), fresh: true, cursor: 100, wantPos: "v1:0-20",
		},
		{
			name: "ahead where the head has nothing: dropped", pos: "v1:0-9.1-3", head: "v1:0-9", resuming: true,
			wm: wm(0, 10, 0, 0), fresh: true, cursor: 100, wantPos: "v1:0-9",
			ahead: []ResyncPartition{{Partition: 1, Requested: 4, LowWatermark: 0, ResumesAt: 0}},
		},
		{
			name: "the largest offset", pos: fmt.Sprintf("v1:0-%d", int64(math.MaxInt64)), head: "v1:0-9", resuming: true,
			wm: wm(0, 10), fresh: true, cursor: 100, wantPos: "v1:0-9",
			ahead: []ResyncPartition{{Partition: 0, Requested: math.MaxInt64, LowWatermark: 0, ResumesAt: 10}},
		},
		{
			name: "ahead with watermarks down", pos: "v1:0-20", head: "v1:0-9", resuming: true, wmErr: errWM, err: errWM,
		},
		{
			name: "a new stream ahead is not a resume", pos: "v1:0-20", head: "v1:0-9", cursor: 100, wantPos: "v1:0-20",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := planInput{
				pos: position.MustParse(tc.pos), head: position.MustParse(tc.head), c0: 100, resuming: tc.resuming,
				ring: tc.ring, wm: tc.wm, fresh: tc.fresh, wmErr: tc.wmErr,
			}
			before := in.pos.String()
			pl, err := makePlan(in)
			if in.pos.String() != before {
				t.Fatalf("the plan changed its input position to %s", in.pos)
			}
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err != nil || pl.need != tc.need {
				if pl.need != tc.need {
					t.Fatalf("need %d, want %d", pl.need, tc.need)
				}
				return
			}
			if tc.need != needNone {
				return
			}
			got := fmt.Sprintf("cursor %d pos %s ranges %v retention %v ahead %v skipped %d",
				pl.cursor, pl.pos, pl.ranges, pl.retention, pl.ahead, pl.skipped)
			want := fmt.Sprintf("cursor %d pos %s ranges %v retention %v ahead %v skipped %d",
				tc.cursor, tc.wantPos, tc.ranges, tc.retention, tc.ahead, tc.skipped)
			if got != want {
				t.Fatalf("plan\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestLikelyReads: the ranges whose first fetches start before the watermarks are known are exactly those
// the ring cannot serve.
func TestLikelyReads(t *testing.T) {
	got := likelyReads(position.MustParse("v1:0-5.1-2"), position.MustParse("v1:0-9.1-9.2-3"), fakeRing{0: {0, 90}, 1: {5, 60}})
	want := []replay.Range{{Partition: 1, After: 2, Upto: 9}, {Partition: 2, After: -1, Upto: 3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("likely reads %v, want %v", got, want)
	}
}
