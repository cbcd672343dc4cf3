package memlog_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// outOfRange is what franz-go logs when a fetch answers OFFSET_OUT_OF_RANGE and it resets the partition's
// offset: a subtest that means to prove the reset checks that it happened.
const outOfRange = "OFFSET_OUT_OF_RANGE"

// truthRetention proves what a reader sees when retention (DeleteRecords) passes the offset it reads next,
// which the feed reports as a resync (feed.Topic.gap): its next fetch starts at the new log start, First
// and LogStart past the offset, with no error, in three cases:
//   - before the reader is assigned: franz-go bounds an exact offset by the log start when it starts the
//     partition;
//   - after it is assigned, before its first poll: the fetch answers OFFSET_OUT_OF_RANGE and, nothing
//     consumed yet, franz-go resets to ConsumeResetOffset (the gateway keeps the default, RewindOffset, which
//     with nothing consumed is the log start);
//   - after a first poll: the fetch answers OFFSET_OUT_OF_RANGE and franz-go resumes at the log start,
//     whatever ConsumeResetOffset says, as the offset is below the log start.
//
// memlog reads from its low watermark in every case.
//
// franz-go fetches ahead of Poll: a record readable at the offset would be fetched before DeleteRecords
// removes it, and the poll would return it. So the records retention removes are an open transaction's,
// which a read_committed fetch does not return; the transaction commits after DeleteRecords, and the poll
// then reads its records left. The two OFFSET_OUT_OF_RANGE cases check franz-go's log to know that the
// reset happened.
func truthRetention(t *testing.T) {
	t.Run("before the reader was assigned", func(t *testing.T) {
		p := newPair(t, 1)
		p.produce(t, 0, time.Time{}, "p0", "p1", "p2", "p3", "p4")
		p.deleteRecords(t, 0, 3)
		// franz-go bounds an exact offset by the log start when it starts the partition: no fetch is out
		// of range.
		assign := map[string]map[int32]int64{p.topic: {0: 1}}
		p.mc.Assign(assign)
		p.kc.Assign(assign)
		compare(t, p, p.kc, 1, 5)
	})
	t.Run("after assign before the first poll", func(t *testing.T) {
		p := newPair(t, 1)
		p.produce(t, 0, time.Time{}, "p0", "p1")
		fetches, log := &fetchCounter{}, &logSaw{want: outOfRange}
		kc := p.kafkaReader(t, kgo.WithHooks(fetches), kgo.WithLogger(log))
		assign := map[string]map[int32]int64{p.topic: {0: 2}}
		p.mc.Assign(assign)
		kc.Assign(assign)
		x := p.begin(t, "held")
		x.produce(t, 0, time.Time{}, "t0", "t1", "t2") // 2, 3, 4
		fetches.waitFetches(t, 2)                      // Kafka's reader fetches at 2
		p.deleteRecords(t, 0, 4)
		x.end(t, true) // 5
		compare(t, p, kc, 2, 6)
		if !log.saw.Load() {
			t.Errorf("franz-go never reset an out of range offset (no %s in its log)", outOfRange)
		}
	})
	t.Run("after a first poll", func(t *testing.T) {
		p := newPair(t, 1)
		p.produce(t, 0, time.Time{}, "p0", "p1")
		fetches, log := &fetchCounter{}, &logSaw{want: outOfRange}
		kc := p.kafkaReader(t, kgo.WithHooks(fetches), kgo.WithLogger(log))
		assign := map[string]map[int32]int64{p.topic: {0: feed.AtLogStart}}
		p.mc.Assign(assign)
		kc.Assign(assign)
		for _, c := range []feed.Cluster{p.mc, kc} {
			if r := pollUntil(t, p.ctx, c, 0, 2); r.next != 2 {
				t.Fatalf("the first poll: %v", r)
			}
		}
		x := p.begin(t, "held")
		x.produce(t, 0, time.Time{}, "t0", "t1", "t2") // 2, 3, 4
		fetches.waitFetches(t, 2)                      // Kafka's reader fetches at 2
		p.deleteRecords(t, 0, 4)
		x.end(t, true) // 5
		compare(t, p, kc, 2, 6)
		if !log.saw.Load() {
			t.Errorf("franz-go never reset an out of range offset (no %s in its log)", outOfRange)
		}
	})
}

// compare polls p's memlog reader and kc up to offset until and checks that they covered the same, and that
// retention passed x, the offset the reader was to read next: the first fetch starts at the log start, past
// x (First), and says so (LogStart of the last fetch, as the log start does not move again).
func compare(t *testing.T, p *pair, kc feed.Cluster, x, until int64) {
	t.Helper()
	want := pollUntil(t, p.ctx, kc, 0, until)
	got := pollUntil(t, p.ctx, p.mc, 0, until)
	if got.String() != want.String() {
		t.Fatalf("memlog %v\nkafka  %v", got, want)
	}
	start, err := kc.ListOffsets(p.ctx, feed.LogStart, p.topic)
	if err != nil {
		t.Fatal(err)
	}
	if low := start[p.topic][0]; low <= x || want.first != low || want.start != low {
		t.Errorf("read next %d, log start %d: kafka's poll %v", x, low, want)
	}
	t.Logf("read next %d: %v", x, want)
}
