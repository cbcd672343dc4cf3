package main

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

func TestParseConfigResume(t *testing.T) {
	env := func(string) string { return "" }
	c, err := parseConfig([]string{"--mode=resume"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Partitions != 1 || c.ResumeRecords != 20000 || c.ResumeCount != 10 || c.ResumeMinBehind != 1000 ||
		c.ResumeMaxBehind != 19000 || c.ResumeBlock != 1024 {
		t.Fatalf("resume defaults: %+v", c)
	}
	// --partitions given is kept; other modes keep their default.
	if c, err := parseConfig([]string{"--mode=resume", "--partitions=3"}, env, io.Discard); err != nil || c.Partitions != 3 {
		t.Fatalf("--partitions=3: %d, %v", c.Partitions, err)
	}
	if c, err := parseConfig(nil, env, io.Discard); err != nil || c.Partitions != 3 {
		t.Fatalf("steady: %d partitions, %v", c.Partitions, err)
	}
	for _, args := range [][]string{
		{"--mode=resume", "--resume-count=0"},
		{"--mode=resume", "--resume-min-behind=0"},
		{"--mode=resume", "--resume-min-behind=5000", "--resume-max-behind=4000"},
		{"--mode=resume", "--resume-max-behind=20000"}, // not less than the records written
		{"--mode=resume", "--resume-block=0"},
	} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
}

func TestBehinds(t *testing.T) {
	if got := behinds(10, 1000, 19000); !slices.Equal(got, []int{1000, 3000, 5000, 7000, 9000, 11000, 13000, 15000, 17000, 19000}) {
		t.Errorf("behinds(10, 1000, 19000) = %v", got)
	}
	if got := behinds(1, 1000, 19000); !slices.Equal(got, []int{1000}) {
		t.Errorf("behinds(1, ...) = %v", got)
	}
}

// written returns n records written round-robin over len(start) partitions after start, one ms apart.
func written(start []int64, n int) []sent {
	next := slices.Clone(start)
	t0 := time.Unix(1000, 0)
	var out []sent
	for i := range n {
		p := i % len(start)
		out = append(out, sent{Partition: int32(p), Offset: next[p], Timestamp: t0.Add(time.Duration(i) * time.Millisecond), Seq: int64(i)})
		next[p]++
	}
	return out
}

func TestPositionAt(t *testing.T) {
	start := []int64{5, 0, 7} // partition 1 had nothing before the tool wrote
	recs := written(start, 30)
	for _, tc := range []struct {
		have int
		want string
	}{
		{0, "v1:0-4.2-6"},        // nothing of the tool's: what was there before
		{1, "v1:0-5.2-6"},        // record 0 went to partition 0 at offset 5
		{2, "v1:0-5.1-0.2-6"},    // record 1 to partition 1 at 0
		{30, "v1:0-14.1-9.2-16"}, // all of them: 10 each
		{29, "v1:0-14.1-9.2-15"}, // all but the last (partition 2's)
		{16, "v1:0-10.1-4.2-11"}, // records 0..15: 6, 5, 5
	} {
		got, _ := positionAt(start, recs, tc.have).AppendText(nil)
		if string(got) != tc.want {
			t.Errorf("positionAt(have %d) = %s, want %s", tc.have, got, tc.want)
		}
		// The records after the position are exactly those the id does not cover.
		v := position.MustParse(tc.want)
		after := expectedAfter(recs, tc.have)
		if len(after) != len(recs)-tc.have {
			t.Fatalf("expectedAfter(%d): %d records", tc.have, len(after))
		}
		for _, r := range after {
			if off, ok := v.Offset(r.Partition); ok && r.Offset <= off {
				t.Errorf("have %d: record %d/%d is covered by %s", tc.have, r.Partition, r.Offset, tc.want)
			}
		}
	}
}

func TestExpectedAfterOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	recs := []sent{
		{Partition: 2, Offset: 0, Timestamp: t0, Seq: 0},
		{Partition: 0, Offset: 0, Timestamp: t0, Seq: 1}, // same time as the one before: partition 0 first
		{Partition: 1, Offset: 0, Timestamp: t0.Add(-time.Millisecond), Seq: 2},
		{Partition: 0, Offset: 1, Timestamp: t0.Add(time.Millisecond), Seq: 3},
	}
	var got []int64
	for _, r := range expectedAfter(recs, 0) {
		got = append(got, r.Seq)
	}
	if !slices.Equal(got, []int64{2, 1, 0, 3}) {
		t.Errorf("order %v, want by timestamp, ties by partition", got)
	}
}

func TestColdness(t *testing.T) {
	// One partition of 20,000 offsets in blocks of 1024: resumes 2,000 apart, nearest first, are all cold.
	ends := []int64{20000}
	var ps []position.Vector
	for _, b := range behinds(10, 1000, 19000) {
		var v position.Vector
		v.Set(0, int64(20000-b-1))
		ps = append(ps, v)
	}
	for i, c := range coldness(ps, ends, 1024) {
		if !c {
			t.Errorf("resume %d is not cold", i)
		}
	}
	// The same resumes farthest first: each later one starts in blocks the first read.
	slices.Reverse(ps)
	if got := coldness(ps, ends, 1024); !got[0] || slices.Contains(got[1:], true) {
		t.Errorf("farthest first: %v, want only the first cold", got)
	}
	// Three partitions, resumes 2,000 records (667 offsets a partition) apart: a block spans 3,072 records.
	ends = []int64{6667, 6667, 6666}
	recs := written([]int64{0, 0, 0}, 20000)
	ps = nil
	for _, b := range behinds(10, 1000, 19000) {
		ps = append(ps, positionAt([]int64{0, 0, 0}, recs, 20000-b))
	}
	if got := coldness(ps, ends, 1024); !slices.Contains(got, false) {
		t.Errorf("3 partitions: %v, want some resumes warm", got)
	}
}

func TestSeqOf(t *testing.T) {
	for _, tc := range []struct {
		data string
		want int64
		ok   bool
	}{
		{string(makeValue(123, 42, 200)), 42, true},
		{string(makeValue(123, -1, 0)), -1, true},
		{`{"ts":1}`, 0, false},
		{`{"ts":1,"seq":x}`, 0, false},
	} {
		got, ok := seqOf(tc.data)
		if got != tc.want || ok != tc.ok {
			t.Errorf("seqOf(%.40q) = %d, %v; want %d, %v", tc.data, got, ok, tc.want, tc.ok)
		}
	}
}

func TestStatsOf(t *testing.T) {
	runs := []resumeRun{{FirstFrame: 4}, {FirstFrame: 1}, {FirstFrame: 9}, {FirstFrame: 2}}
	if s := statsOf(runs); *s != (resumeStats{Count: 4, Min: 1, P50: 3, Max: 9}) {
		t.Errorf("statsOf = %+v", *s)
	}
	if s := statsOf(runs[:3]); s.P50 != 4 {
		t.Errorf("odd count: p50 %v, want the middle value 4", s.P50)
	}
	if statsOf(nil) != nil {
		t.Error("statsOf(nil) is not nil")
	}
}
