package main

import (
	"io"
	"slices"
	"strconv"
	"strings"
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
		{"--mode=resume", "--resume-max-behind=20000", "--resume-records=20000"}, // not less than the records written
		{"--mode=resume", "--resume-records=10000"},                              // the default range is 19,000 behind
		{"--mode=resume", "--resume-block=0"},
		{"--mode=resume", "--resume-count=1001"},
		{"--mode=resume", "--resume-block=2097152"},
		{"--mode=resume", "--resume-conn=reuse"},
		{"--mode=resume", "--resume-conn="},
	} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
}

func TestParseConfigResumeConn(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode=resume"}, resumeFresh},
		{[]string{"--mode=resume", "--resume-conn=fresh"}, resumeFresh},
		{[]string{"--mode=resume", "--resume-conn=open"}, resumeOpen},
	} {
		c, err := parseConfig(tc.args, env, io.Discard)
		if err != nil || c.ResumeConn != tc.want {
			t.Errorf("parseConfig(%v): --resume-conn %q, %v; want %q", tc.args, c.ResumeConn, err, tc.want)
		}
	}
	_, err := parseConfig([]string{"--mode=resume", "--resume-conn=keep-alive"}, env, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--resume-conn") {
		t.Errorf("--resume-conn=keep-alive: %v, want a refusal naming the flag", err)
	}
}

// TestParseConfigResumeRange checks the range the resumes get by default: 1,000 - 19,000 behind of 20,000
// records while that keeps them P x 1025 records apart, wider when not, and flags given kept as they are.
func TestParseConfigResumeRange(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args               []string
		maxBehind, records int
	}{
		{[]string{"--mode=resume"}, 19000, 20000},
		{[]string{"--mode=resume", "--partitions=1"}, 19000, 20000},
		{[]string{"--mode=resume", "--partitions=3"}, 1000 + 9*3075, 1000 + 9*3075 + 1000},
		{[]string{"--mode=resume", "--partitions=12"}, 1000 + 9*12300, 1000 + 9*12300 + 1000},
		{[]string{"--mode=resume", "--partitions=3", "--resume-count=5"}, 19000, 20000}, // 4,500 apart: enough
		{[]string{"--mode=resume", "--partitions=12", "--resume-count=2", "--resume-min-behind=7000"}, 7000 + 12300, 7000 + 12300 + 1000},
		{[]string{"--mode=resume", "--resume-min-behind=5000"}, 19000, 20000},
		{[]string{"--mode=resume", "--partitions=12", "--resume-max-behind=50000"}, 50000, 51000},
		{[]string{"--mode=resume", "--partitions=12", "--resume-records=200000"}, 1000 + 9*12300, 200000},
		{[]string{"--mode=resume", "--resume-block=4096"}, 1000 + 9*4097, 1000 + 9*4097 + 1000},
	} {
		c, err := parseConfig(tc.args, env, io.Discard)
		if err != nil {
			t.Errorf("parseConfig(%v): %v", tc.args, err)
			continue
		}
		if c.ResumeMaxBehind != tc.maxBehind || c.ResumeRecords != tc.records {
			t.Errorf("parseConfig(%v): --resume-max-behind %d, --resume-records %d; want %d, %d",
				tc.args, c.ResumeMaxBehind, c.ResumeRecords, tc.maxBehind, tc.records)
		}
	}
}

// TestDefaultRangeIsCold checks that the default range keeps every resume of the cold phase in blocks no
// earlier one read, for the partition counts the docs report, on a topic that already held records in some
// partitions; and that the one-partition range is not cold with several partitions, so the check can fail.
func TestDefaultRangeIsCold(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct{ parts, count int }{{1, 10}, {3, 10}, {12, 10}, {3, 5}, {12, 3}, {2, 40}} {
		args := []string{"--mode=resume", "--partitions=" + strconv.Itoa(tc.parts), "--resume-count=" + strconv.Itoa(tc.count)}
		c, err := parseConfig(args, env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		start := make([]int64, tc.parts)
		start[tc.parts-1] = 1 // the tool's warm-up record
		if tc.parts > 2 {
			start[1] = 700
		}
		cold := coldAt(start, c.ResumeRecords, c.ResumeCount, c.ResumeMinBehind, c.ResumeMaxBehind, c.ResumeBlock)
		if slices.Contains(cold, false) {
			t.Errorf("%v: %d records, %d..%d behind: coldness %v", args, c.ResumeRecords, c.ResumeMinBehind, c.ResumeMaxBehind, cold)
		}
		if tc.parts > 1 && tc.count == 10 {
			if cold := coldAt(start, 20000, 10, 1000, 19000, 1024); !slices.Contains(cold, false) {
				t.Errorf("%d partitions with the one-partition range: all cold", tc.parts)
			}
		}
	}
}

// coldAt returns the coldness of count resumes minBehind..maxBehind behind, records written round-robin after
// start.
func coldAt(start []int64, records, count, minBehind, maxBehind int, block int64) []bool {
	recs := written(start, records)
	ends := slices.Clone(start)
	for _, r := range recs {
		ends[r.Partition] = r.Offset + 1
	}
	var ps []position.Vector
	for _, b := range behinds(count, minBehind, maxBehind) {
		ps = append(ps, positionAt(start, recs, records-b))
	}
	return coldness(ps, ends, block)
}

func TestNotColdSuggestsARange(t *testing.T) {
	cfg := config{Partitions: 1, ResumeCount: 10, ResumeMinBehind: 1000, ResumeBlock: 1024}
	err := notCold(cfg, 3, 1, 3000)
	for _, want := range []string{"--resume-max-behind=28675", "--resume-records=29675", "--partitions=3", "3 partitions"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("notCold: %v, want it to say %q", err, want)
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
func written(start []int64, n int) []sent { return writtenEvery(start, n, time.Millisecond) }

// writtenEvery returns n records written round-robin over len(start) partitions after start, gap apart: with
// a gap under a millisecond, neighbors share Kafka's timestamp.
func writtenEvery(start []int64, n int, gap time.Duration) []sent {
	next := slices.Clone(start)
	t0 := time.Unix(1000, 0)
	var out []sent
	for i := range n {
		p := i % len(start)
		out = append(out, sent{Partition: int32(p), Offset: next[p], Timestamp: t0.Add(time.Duration(i) * gap), Seq: int64(i)})
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
		// The records owed after the position are exactly those the id does not cover.
		v := position.MustParse(tc.want)
		o := newOwed(recs, tc.have, v)
		n := 0
		for _, q := range o.parts {
			for _, r := range q {
				n++
				if off, ok := v.Offset(r.Partition); ok && r.Offset <= off {
					t.Errorf("have %d: record %d/%d is covered by %s", tc.have, r.Partition, r.Offset, tc.want)
				}
			}
		}
		if n != len(recs)-tc.have || o.left != n {
			t.Fatalf("newOwed(%d): %d records (left %d), want %d", tc.have, n, o.left, len(recs)-tc.have)
		}
	}
}

// TestPositionAtManyPartitions checks the ids of 12 partitions, some of which held records before: every
// partition is named once it has any record, at its start plus the records it got, less one.
func TestPositionAtManyPartitions(t *testing.T) {
	const parts = 12
	start := make([]int64, parts)
	start[3], start[11] = 40, 1
	recs := written(start, 5000)
	for _, have := range []int{0, 5, 11, 12, 13, 1000, 4999, 5000} {
		v := positionAt(start, recs, have)
		for p := range parts {
			got := int64(0)
			for i := range have {
				if i%parts == p {
					got++
				}
			}
			off, ok := v.Offset(int32(p))
			switch last := start[p] + got - 1; {
			case last < 0 && ok:
				t.Errorf("have %d: partition %d has nothing yet, but the id names it at %d", have, p, off)
			case last >= 0 && (!ok || off != last):
				t.Errorf("have %d: partition %d at %d (%v), want %d", have, p, off, ok, last)
			}
		}
	}
	id, _ := positionAt(start, recs, 5000).AppendText(nil)
	if want := "v1:0-416.1-416.2-416.3-456.4-416.5-416.6-416.7-416.8-415.9-415.10-415.11-416"; string(id) != want {
		t.Errorf("12 partitions after 5000 records: %s, want %s", id, want)
	}
}

func TestReplayOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	recs := []sent{
		{Partition: 2, Offset: 0, Timestamp: t0.Add(300 * time.Microsecond), Seq: 0},
		{Partition: 0, Offset: 0, Timestamp: t0.Add(700 * time.Microsecond), Seq: 1}, // the same millisecond: partition 0 first
		{Partition: 1, Offset: 0, Timestamp: t0.Add(-time.Millisecond), Seq: 2},
		{Partition: 0, Offset: 1, Timestamp: t0.Add(time.Millisecond), Seq: 3},
	}
	slices.SortStableFunc(recs, replayOrder)
	var got []int64
	for _, r := range recs {
		got = append(got, r.Seq)
	}
	if !slices.Equal(got, []int64{2, 1, 0, 3}) {
		t.Errorf("order %v, want by timestamp to the millisecond, ties by partition", got)
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
	if s := statsOf(runs); *s != (resumeStats{Count: 4, First: 4, Min: 1, P50: 3, Max: 9}) {
		t.Errorf("statsOf = %+v", *s)
	}
	if s := statsOf(runs[1:]); s.First != 1 {
		t.Errorf("first %v, want the first run's 1, not the fastest or the middle", s.First)
	}
	if s := statsOf(runs[:3]); s.P50 != 4 {
		t.Errorf("odd count: p50 %v, want the middle value 4", s.P50)
	}
	if statsOf(nil) != nil {
		t.Error("statsOf(nil) is not nil")
	}
}

func TestResumeSummary(t *testing.T) {
	r := result{
		Mode: modeResume, Connections: 20, Opened: 20, Partitions: 12, ResumeConn: resumeFresh,
		Cold: &resumeStats{Count: 10, First: 7.5, Min: 1.25, P50: 3, Max: 9},
		Warm: &resumeStats{Count: 10, First: 0.5, Min: 0.25, P50: 0.5, Max: 1},
	}
	r.judge(config{Mode: modeResume})
	s := r.summary()
	for _, want := range []string{
		"result=ok", " partitions=12 resume_conn=fresh cold_first=7.50ms cold_first_frame(n=10) min=1.25ms p50=3.00ms max=9.00ms",
		" warm_first_frame(n=10) min=0.25ms",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q: no %q", s, want)
		}
	}
	if strings.Contains(s, "warm_first=") {
		t.Errorf("summary %q: the warm phase's first resume is not the gateway's first", s)
	}
}
