package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram layout: values are microseconds. Below histLinear every value has its own bucket; above, each
// power of two is split into histSub buckets, so a bucket is at most 1/histSub (about 3%) wide relative to
// its values. histBuckets covers up to 2^40 us (about 12 days), far more than any latency.
const (
	histSubBits = 5
	histSub     = 1 << histSubBits // buckets per power of two above histLinear
	histLinear  = 2 * histSub      // values below this are exact
	histMaxBits = 40
	histBuckets = histLinear + (histMaxBits-histSubBits)*histSub
)

// histogram counts latencies in log-linear microsecond buckets. Record is safe for concurrent use by any
// number of connection goroutines (one atomic add); the read methods may run at the same time and see a
// consistent-enough snapshot for a report.
type histogram struct {
	counts [histBuckets]atomic.Int64
	total  atomic.Int64
	max    atomic.Int64
}

// bucketOf returns the bucket index of v microseconds.
func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	if v < histLinear {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1 // >= 1: top histSubBits+1 bits kept
	if shift > histMaxBits-histSubBits {
		return histBuckets - 1
	}
	mant := int(v >> shift) // in [histSub, 2*histSub)
	return histLinear + (shift-1)*histSub + (mant - histSub)
}

// bucketBounds returns the smallest and largest value (microseconds) that fall in bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < histLinear {
		return int64(i), int64(i)
	}
	shift := (i-histLinear)/histSub + 1
	mant := int64((i-histLinear)%histSub + histSub)
	return mant << shift, (mant+1)<<shift - 1
}

// Record adds one latency. Negative durations (clock steps) count as zero.
func (h *histogram) Record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[bucketOf(us)].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			break
		}
	}
}

// Count returns the number of recorded values.
func (h *histogram) Count() int64 { return h.total.Load() }

// Max returns the largest recorded value, exactly.
func (h *histogram) Max() time.Duration { return time.Duration(h.max.Load()) * time.Microsecond }

// Quantile returns the value at quantile q (0 < q <= 1): the midpoint of the bucket holding the
// ceil(q*count)-th smallest value, capped by the exact maximum (which is also the answer for the last
// rank). Zero when nothing was recorded.
func (h *histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.999999)
	rank = max(rank, 1)
	if rank >= n {
		return h.Max()
	}
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			lo, hi := bucketBounds(i)
			v := min(lo+(hi-lo)/2, h.max.Load())
			return time.Duration(v) * time.Microsecond
		}
	}
	return h.Max()
}

// merge adds o's values to h. Neither may be recorded into meanwhile for the sum to be exact.
func (h *histogram) merge(o *histogram) {
	for i := range o.counts {
		if n := o.counts[i].Load(); n > 0 {
			h.counts[i].Add(n)
		}
	}
	h.total.Add(o.total.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
}
