package memlog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// truthOffsetsAfter proves OffsetsAfter, on a partition of records stamped a second apart and an empty one:
// the first record at or after the time, to the millisecond (Kafka lists by millisecond); the high watermark
// when no record is at or after it (kadm's answer); transaction markers count as records stamped when the
// transaction ended, aborted and open transactions' records as records; records deleted do not count.
func truthOffsetsAfter(t *testing.T) {
	p := newPair(t, 2)
	base := time.UnixMilli(time.Now().Add(-10 * time.Minute).UnixMilli())
	sec := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	p.produce(t, 0, sec(0), "r0")
	p.produce(t, 0, sec(1), "r1")
	p.produce(t, 0, sec(2), "r2")
	after := func(at time.Time) func(kc feed.Cluster) string {
		return func(kc feed.Cluster) string {
			m, err := kc.OffsetsAfter(p.ctx, p.topic, at)
			return fmt.Sprint(m, err)
		}
	}
	type when struct {
		name string
		at   time.Time
	}
	check := func(t *testing.T, cases ...when) {
		t.Helper()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { p.agree(t, c.name, after(c.at)) })
		}
	}
	check(t,
		when{"before the first record", sec(-1)},
		when{"at the first record", sec(0)},
		when{"at a record", sec(1)},
		when{"within a record's millisecond", sec(1.0005)},
		when{"between records", sec(1.5)},
		when{"after the last record", sec(3)},
		when{"in the future", time.Now().Add(time.Hour)},
	)

	// Transactions of records stamped in the past, ended now: their markers are stamped now.
	x := p.begin(t, "aborted")
	x.produce(t, 0, sec(4), "a0")
	check(t,
		when{"at an open transaction's record", sec(4)},
		when{"after an open transaction's record", sec(5)},
	)
	x.end(t, false)
	check(t,
		when{"at an aborted record", sec(4)},
		when{"after an aborted record, before its marker", sec(5)},
	)
	x = p.begin(t, "committed")
	x.produce(t, 0, sec(6), "c0")
	x.end(t, true)
	check(t,
		when{"at a record after a marker stamped later", sec(6)},
		when{"after the markers", time.Now().Add(time.Hour)},
	)

	p.deleteRecords(t, 0, 2)
	check(t,
		when{"before the log start", sec(-1)},
		when{"at a deleted record", sec(1)},
	)
}

// truthListOffsets proves ListOffsets of the three kinds on two partitions: the last stable offset held at
// an open transaction's first record, with records after it, and released when it commits; the log start
// after DeleteRecords, up to the high watermark; and an open transaction whose records DeleteRecords passed,
// which holds the last stable offset at the log start until it ends.
func truthListOffsets(t *testing.T) {
	p := newPair(t, 2)
	see := func(kc feed.Cluster) string {
		var s string
		for _, kind := range []feed.OffsetKind{feed.LogStart, feed.LastStable, feed.LogEnd} {
			m, err := kc.ListOffsets(p.ctx, kind, p.topic)
			s += fmt.Sprint(" ", m[p.topic], err)
		}
		return "start, stable, end:" + s
	}
	var x *txn
	for _, step := range []struct {
		name string
		do   func(t *testing.T)
	}{
		{"empty", func(*testing.T) {}},
		{"records", func(t *testing.T) {
			p.produce(t, 0, time.Time{}, "p0", "p1")
			p.produce(t, 1, time.Time{}, "q0")
		}},
		{"an open transaction with records after it", func(t *testing.T) {
			x = p.begin(t, "a")
			x.produce(t, 0, time.Time{}, "o0", "o1")
			p.produce(t, 0, time.Time{}, "p2")
		}},
		{"committed", func(t *testing.T) { x.end(t, true) }},
		{"records deleted", func(t *testing.T) { p.deleteRecords(t, 0, 3) }},
		{"records deleted up to the end", func(t *testing.T) { p.deleteRecords(t, 1, 1) }},
		{"an open transaction passed by DeleteRecords", func(t *testing.T) {
			x = p.begin(t, "b")
			x.produce(t, 0, time.Time{}, "b0", "b1")
			p.produce(t, 0, time.Time{}, "p3")
			p.deleteRecords(t, 0, 7)
		}},
		{"all its records deleted", func(t *testing.T) { p.deleteRecords(t, 0, 9) }},
		{"a record after them", func(t *testing.T) { p.produce(t, 0, time.Time{}, "p4") }},
		{"and it commits", func(t *testing.T) { x.end(t, true) }},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.do(t)
			p.agree(t, step.name, see)
		})
	}
}
