package valuefilter

import (
	"fmt"
	"testing"
)

// TestValueCacheBudget: the cache keeps the latest values within its budget, drops the oldest first, and its
// bookkeeping stays exact across the compaction of its order.
func TestValueCacheBudget(t *testing.T) {
	val := func(i int) []byte { return fmt.Appendf(nil, `{"seq":%06d}`, i) } // 14 bytes each
	per := entryCost(len(val(0)))
	c := newValueCache(100 * per)
	for i := range 10_000 {
		c.add(val(i), i)
		c.add(val(i), -1) // a second decode of the same value changes nothing
	}
	if c.len() != 100 || c.cost != 100*per {
		t.Fatalf("%d values costing %d kept, want 100 costing %d", c.len(), c.cost, 100*per)
	}
	for i := range 10_000 {
		v, ok := c.get(val(i))
		if want := i >= 9_900; ok != want || (ok && v != i) {
			t.Fatalf("value %d: %v %v, want kept %v", i, v, ok, want)
		}
	}
	if len(c.order)-c.head != 100 || c.head > 4096+10_000/2 {
		t.Fatalf("order holds %d live of %d (head %d): not compacted", len(c.order)-c.head, len(c.order), c.head)
	}
}

// TestDecodeSharedAcrossDrift: streams that read the same records thousands of records apart still share one
// decode of each (a count-bounded cache of 1,024 did not): the second pass over 5,000 records decodes none.
func TestDecodeSharedAcrossDrift(t *testing.T) {
	vals := make([][]byte, 5000)
	for i := range vals {
		vals[i] = fmt.Appendf(nil, `{"id":"drift-test-%d","amount":%d,"region":"eu"}`, i, i)
	}
	first := make([]any, len(vals))
	for i, v := range vals {
		first[i] = decode(v)
	}
	for i, v := range vals {
		// A shared decode is the very same map, not an equal one.
		if fmt.Sprintf("%p", decode(v)) != fmt.Sprintf("%p", first[i]) {
			t.Fatalf("value %d was decoded again 5,000 records later", i)
		}
	}
}

// BenchmarkDistinctFiltersDrift: BenchmarkDistinctFilters with the 1,000 streams spread over the last 5,000
// records of a topic, as streams that read at their own pace are: each op is one new record, which every
// stream evaluates as it reaches it.
func BenchmarkDistinctFiltersDrift(b *testing.B) {
	const streams, spread = 1000, 5000
	var ps []*Program
	for i := range streams {
		p, err := Compile(fmt.Sprintf(`value.amount > %d && value.region == "eu"`, i))
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	vals := make([][]byte, 1<<16)
	for i := range vals {
		vals[i] = fmt.Appendf(nil, `{"id":"o-%d","amount":%d,"region":"eu","status":"paid","items":[{"sku":"a","n":1}]}`, i, i%1000)
	}
	b.ReportAllocs()
	n := spread
	for b.Loop() {
		for s, p := range ps {
			p.Match(vals[(n-s*spread/streams)%len(vals)], []byte("o-1"), "message")
		}
		n++
	}
}
