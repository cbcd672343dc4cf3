package main

import (
	"math"
	"testing"
	"time"
)

func TestBucketBoundsRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, 65, 100, 1000, 4095, 4096, 123456, 1 << 30, 1<<40 - 1} {
		i := bucketOf(v)
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Errorf("value %d in bucket %d [%d, %d]", v, i, lo, hi)
		}
		if v >= histLinear && float64(hi-lo+1)/float64(lo) > 1.0/histSub+1e-9 {
			t.Errorf("bucket %d [%d, %d] wider than 1/%d of its values", i, lo, hi, histSub)
		}
	}
	// Buckets tile the range without holes or overlaps.
	for i := 1; i < histBuckets; i++ {
		_, prevHi := bucketBounds(i - 1)
		lo, _ := bucketBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ends at %d", i, lo, prevHi)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values func(record func(time.Duration))
		q      float64
		want   time.Duration
		relTol float64
	}{
		{"empty", func(func(time.Duration)) {}, 0.5, 0, 0},
		{"single exact", func(r func(time.Duration)) { r(42 * time.Microsecond) }, 0.99, 42 * time.Microsecond, 0},
		{"uniform 1..1000us p50", func(r func(time.Duration)) {
			for i := 1; i <= 1000; i++ {
				r(time.Duration(i) * time.Microsecond)
			}
		}, 0.5, 500 * time.Microsecond, 0.03},
		{"uniform 1..1000us p99", func(r func(time.Duration)) {
			for i := 1; i <= 1000; i++ {
				r(time.Duration(i) * time.Microsecond)
			}
		}, 0.99, 990 * time.Microsecond, 0.03},
		{"tail p999 sees the outlier", func(r func(time.Duration)) {
			for range 998 {
				r(time.Millisecond)
			}
			r(2 * time.Second)
			r(2 * time.Second)
		}, 0.999, 2 * time.Second, 0.03},
		{"p99 ignores one outlier in 1000", func(r func(time.Duration)) {
			for range 999 {
				r(time.Millisecond)
			}
			r(5 * time.Second)
		}, 0.99, time.Millisecond, 0.03},
		{"negative counts as zero", func(r func(time.Duration)) { r(-time.Second) }, 0.5, 0, 0},
		{"the last rank is the exact max", func(r func(time.Duration)) { r(100_000 * time.Microsecond) }, 1, 100 * time.Millisecond, 0},
		{"max caps the midpoint", func(r func(time.Duration)) {
			r(2048 * time.Microsecond) // the lowest value of its bucket [2048, 2111]
			r(2048 * time.Microsecond)
		}, 0.5, 2048 * time.Microsecond, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			tc.values(h.Record)
			got := h.Quantile(tc.q)
			if tc.want == 0 {
				if got != 0 {
					t.Fatalf("Quantile(%v) = %v, want 0", tc.q, got)
				}
				return
			}
			if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > tc.relTol {
				t.Fatalf("Quantile(%v) = %v, want %v (+-%.0f%%)", tc.q, got, tc.want, tc.relTol*100)
			}
		})
	}
}
