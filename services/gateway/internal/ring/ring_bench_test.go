package ring

import (
	"fmt"
	"testing"
)

// BenchmarkFanout measures the ring's side of fan-out: publish one 200-byte frame, then let every subscriber
// read it, as the connections do after a wake-up. Reported per published frame; allocations must not grow
// with the number of subscribers (the one allocation per publish is the new wake channel).
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			r, _ := New(64<<20, 0)
			frame := make([]byte, 200)
			cursors := make([]uint64, subs)
			spans := make([][]byte, 0, 16)
			var batch Batch
			id := []byte("v1:0-123456.1-123456.2-123456")
			key := []byte("order-12345")
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)) * int64(subs))
			for i := 0; b.Loop(); i++ {
				batch.Reset()
				batch.Add(append(batch.Buf(), frame...), int32(i%3), int64(i), key)
				r.Publish(&batch, id)
				for s := range cursors {
					spans, cursors[s], _, _ = r.Read(cursors[s], spans[:0], 64<<10)
				}
			}
		})
	}
}
