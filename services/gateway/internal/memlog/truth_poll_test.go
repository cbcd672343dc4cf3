package memlog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// truthPoll proves what Poll's fetches say of a partition of plain records, a committed transaction, an
// aborted one and an open one: the committed records; First and Next past transaction markers and aborted
// records (a read from a marker or an aborted record starts at the first marker after it); LastStable, held
// at the open transaction; and LogStart, moved by DeleteRecords while the reader waits.
func truthPoll(t *testing.T) {
	p := newPair(t, 1)
	p.produce(t, 0, time.Time{}, "p0", "p1") // 0, 1
	x := p.begin(t, "committed")
	x.produce(t, 0, time.Time{}, "c0", "c1") // 2, 3
	x.end(t, true)                           // 4
	x = p.begin(t, "aborted")
	x.produce(t, 0, time.Time{}, "a0") // 5
	x.end(t, false)                    // 6
	open := p.begin(t, "open")
	open.produce(t, 0, time.Time{}, "o0") // 7
	p.agree(t, "last stable offset", func(kc feed.Cluster) string {
		m, err := kc.ListOffsets(p.ctx, feed.LastStable, p.topic)
		return fmt.Sprint(m, err)
	})

	// Each case reads with a new reader of each from an offset, up to the open transaction.
	for _, c := range []struct {
		name string
		from int64
	}{
		{"from the log start", feed.AtLogStart},
		{"from a plain record", 1},
		{"from a committed record", 3},
		{"from a commit marker", 4},
		{"from an aborted record", 5},
		{"from an abort marker", 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			mc, kc := p.mem.Client(), p.kafkaReader(t)
			defer mc.Close()
			mc.Assign(map[string]map[int32]int64{p.topic: {0: c.from}})
			kc.Assign(map[string]map[int32]int64{p.topic: {0: c.from}})
			want := pollUntil(t, p.ctx, kc, 0, 7)
			if got := pollUntil(t, p.ctx, mc, 0, 7); got.String() != want.String() {
				t.Fatalf("memlog %v\nkafka  %v", got, want)
			}
			t.Logf("%v", want)
		})
	}

	t.Run("log start moved while waiting", func(t *testing.T) {
		p.mc.Assign(map[string]map[int32]int64{p.topic: {0: feed.AtLogStart}})
		p.kc.Assign(map[string]map[int32]int64{p.topic: {0: feed.AtLogStart}})
		for _, kc := range []feed.Cluster{p.mc, p.kc} {
			pollUntil(t, p.ctx, kc, 0, 7)
		}
		// Both wait at the open transaction; the log start moves, it commits and a record follows.
		p.deleteRecords(t, 0, 2)
		open.end(t, true)                  // 8
		p.produce(t, 0, time.Time{}, "p2") // 9
		want := pollUntil(t, p.ctx, p.kc, 0, 10)
		if got := pollUntil(t, p.ctx, p.mc, 0, 10); got.String() != want.String() {
			t.Fatalf("memlog %v\nkafka  %v", got, want)
		}
		t.Logf("%v", want)
	})
}
