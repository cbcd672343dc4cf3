package feed

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ssegate/ssegate/pkg/position"
)

// idSizeRun is a topic with compact ids fed records to random partitions in batches, whose checkpoints
// Kafka acknowledges a fixed number of records after they start: a model of a pod at a steady record rate
// (ackAfter records of acknowledgement time), with polls of batch records each.
type idSizeRun struct {
	parts, batch, ackAfter, inFlight int
}

// run feeds n records and returns the mean length of the frames' ids, and the checkpoints written.
func (m idSizeRun) run(tb testing.TB, n int) (idBytes float64, checkpoints int) {
	tb.Helper()
	r := newCompactRun(tb, int32(m.parts), Config{RingBytes: 64 << 20, CheckpointsInFlight: m.inFlight})
	rnd := rand.New(rand.NewPCG(1, 2))
	due := []int{0} // per checkpoint write, the record count at which Kafka acknowledges it
	acked, sent, total := 0, 0, 0
	for sent < n {
		// The poll's records arrive together once the last of them is written, at sent+batch: every
		// acknowledgement due by then has come.
		for acked < r.h.count() && due[acked] <= sent+m.batch {
			r.ack(acked, position.Ref{Partition: 0, Offset: int64(1000 + acked)})
			acked++
		}
		fs := make([]Fetched, 0, m.batch)
		for range m.batch {
			fs = append(fs, r.record(rnd.Int32N(int32(m.parts))))
		}
		r.tp.publish(fs)
		sent += m.batch
		for len(due) < r.h.count() {
			due = append(due, sent+m.ackAfter)
		}
		for _, id := range r.ids() {
			total += len(id)
		}
	}
	return float64(total) / float64(sent), r.h.count()
}

// BenchmarkCompactIDSize reports the mean compact id length (id-bytes/frame) at 256 partitions, by how many
// records arrive while a checkpoint waits for Kafka (at 1,000 records/s, ack=50 is 50 ms), how many records a
// poll brings at once, and how many checkpoints may be in flight. It measures the design, not a broker: see
// docs/benchmarks.md for the load tool's figures on a real one.
func BenchmarkCompactIDSize(b *testing.B) {
	for _, ack := range []int{3, 50, 200} {
		for _, batch := range []int{5, 40} {
			for _, inFlight := range []int{1, 4} {
				b.Run(fmt.Sprintf("ack=%d/batch=%d/inflight=%d", ack, batch, inFlight), func(b *testing.B) {
					var idBytes float64
					var cps int
					for b.Loop() {
						idBytes, cps = idSizeRun{parts: 256, batch: batch, ackAfter: ack, inFlight: inFlight}.run(b, 20000)
					}
					b.ReportMetric(idBytes, "id-bytes/frame")
					b.ReportMetric(float64(cps)/20, "checkpoints/1k-records")
				})
			}
		}
	}
}

// TestCompactIDSizeModel: in the model of BenchmarkCompactIDSize at 256 partitions, checkpoints in flight
// shorten ids while acknowledgements are slow, and a poll's checkpoint of its last position keeps the ids of
// polls of 40 records within 64 bytes when Kafka acknowledges quickly, one checkpoint at a time (one started
// at the frame that crossed the threshold left the next poll about 1.5 polls of moved partitions: 79 bytes).
func TestCompactIDSizeModel(t *testing.T) {
	one, _ := idSizeRun{parts: 256, batch: 5, ackAfter: 50, inFlight: 1}.run(t, 10000)
	four, _ := idSizeRun{parts: 256, batch: 5, ackAfter: 50, inFlight: 4}.run(t, 10000)
	t.Logf("50 records of acknowledgement time: %.1f id bytes one at a time, %.1f with 4 in flight", one, four)
	if four > one*0.9 {
		t.Errorf("4 checkpoints in flight give %.1f id bytes, one at a time %.1f: want at least 10%% fewer", four, one)
	}
	polls, _ := idSizeRun{parts: 256, batch: 40, ackAfter: 3, inFlight: 1}.run(t, 10000)
	t.Logf("polls of 40 records, 3 records of acknowledgement time: %.1f id bytes", polls)
	if polls > 64 {
		t.Errorf("%.1f id bytes with polls of 40 records, want at most 64", polls)
	}
}
