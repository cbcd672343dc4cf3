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

// TestProgramCacheBudget: compiled programs are kept within their memory budget, whatever their sizes: large
// ones (1 KB with regexes) are fewer, the least recently used go first, and one in use stays.
func TestProgramCacheBudget(t *testing.T) {
	c := newProgramCache(1 << 20)
	large := func(i int) *Program {
		expr := fmt.Sprintf(`value.a == %d && key.matches("[a-z]{1,400}") && type.matches("[a-z]{1,400}")`, i)
		p, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := large(0)
	if first.cost < programCost(len(first.src), 1600) {
		t.Fatalf("a program with two regexes of 801 instructions is counted %d bytes", first.cost)
	}
	c.add(first)
	for i := 1; i < 1000; i++ {
		c.add(large(i))
		if _, ok := c.get(first.src); !ok {
			t.Fatalf("after %d more, the program used each time was dropped", i)
		}
		if c.cost > c.budget || c.cost != sumCost(c) {
			t.Fatalf("after %d programs: %d bytes counted (%d summed), budget %d", i+1, c.cost, sumCost(c), c.budget)
		}
	}
	if n := len(c.m); n < 4 || n > (1<<20)/first.cost {
		t.Errorf("%d large programs kept in 1 MiB", n)
	}
	if _, ok := c.get(large(1).src); ok {
		t.Error("the least recently used program was kept")
	}
}

func sumCost(c *programCache) int {
	n := 0
	for _, e := range c.m {
		n += e.Value.(*Program).cost
	}
	return n
}

// TestProgramsWithinBudget: the pod's compiled programs stay within ProgramsBytes however large they are:
// 400 distinct filters of two 801-instruction regexes (about 53 MB estimated) do not all stay.
func TestProgramsWithinBudget(t *testing.T) {
	programs.purge()
	defer programs.purge()
	for i := range 400 {
		if _, err := Compile(fmt.Sprintf(`value.a == %d && key.matches("[a-z]{1,400}") && type.matches("[a-z]{1,400}")`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := sumCost(programs); got > ProgramsBytes || len(programs.m) == 400 {
		t.Errorf("%d programs kept, %d bytes estimated, budget %d", len(programs.m), got, ProgramsBytes)
	}
}
