package position

import (
	"errors"
	"math"
	"slices"
	"testing"
)

type setOp struct {
	p   int32
	off int64
}

func TestSet(t *testing.T) {
	tests := []struct {
		name  string
		start string
		ops   []setOp
		want  string
	}{
		{"into zero vector", "", []setOp{{3, 9}}, "v1:3-9"},
		{"into parsed empty", "v1:", []setOp{{0, 0}}, "v1:0-0"},
		{"insert front", "v1:5-1.6-1", []setOp{{1, 7}}, "v1:1-7.5-1.6-1"},
		{"insert middle", "v1:1-1.9-1", []setOp{{4, 2}}, "v1:1-1.4-2.9-1"},
		{"insert end", "v1:1-1", []setOp{{2, 2}}, "v1:1-1.2-2"},
		{"replace", "v1:0-5.1-6", []setOp{{1, 60}}, "v1:0-5.1-60"},
		{"replace with lower offset", "v1:0-5", []setOp{{0, 1}}, "v1:0-1"},
		{"replace with zero", "v1:0-5", []setOp{{0, 0}}, "v1:0-0"},
		{"unsorted inserts", "", []setOp{{3, 3}, {1, 1}, {2, 2}, {0, 0}}, "v1:0-0.1-1.2-2.3-3"},
		{"insert then replace", "", []setOp{{2, 1}, {2, 2}, {2, 3}}, "v1:2-3"},
		{"max values", "", []setOp{{math.MaxInt32, math.MaxInt64}, {0, math.MaxInt64}}, "v1:0-9223372036854775807.2147483647-9223372036854775807"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v Vector
			if tc.start != "" {
				v = MustParse(tc.start)
			}
			for _, op := range tc.ops {
				v.Set(op.p, op.off)
				if off, ok := v.Offset(op.p); !ok || off != op.off {
					t.Fatalf("after Set(%d, %d), Offset = %d, %v", op.p, op.off, off, ok)
				}
			}
			if got := v.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSetPanicsOnNegative(t *testing.T) {
	tests := []struct {
		name string
		op   setOp
	}{
		{"negative partition", setOp{-1, 0}},
		{"negative offset", setOp{0, -1}},
		{"min values", setOp{math.MinInt32, math.MinInt64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := MustParse("v1:0-1")
			defer func() {
				if recover() == nil {
					t.Errorf("Set(%d, %d) did not panic", tc.op.p, tc.op.off)
				}
				if v.String() != "v1:0-1" {
					t.Errorf("panicking Set changed the vector to %v", v)
				}
			}()
			v.Set(tc.op.p, tc.op.off)
		})
	}
}

func TestOffset(t *testing.T) {
	v := MustParse("v1:0-10.2-20.7-70.2147483647-9223372036854775807")
	tests := []struct {
		name string
		v    Vector
		p    int32
		want int64
		ok   bool
	}{
		{"first", v, 0, 10, true},
		{"middle", v, 2, 20, true},
		{"last", v, math.MaxInt32, math.MaxInt64, true},
		{"gap", v, 1, 0, false},
		{"between", v, 5, 0, false},
		{"negative", v, -1, 0, false},
		{"zero vector", Vector{}, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.v.Offset(tc.p)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Offset(%d) = %d, %v, want %d, %v", tc.p, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestRestrict(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		parts []int32
		want  string
	}{
		{"nil parts", "v1:0-1.1-2", nil, "v1:"},
		{"empty vector", "v1:", []int32{0, 1}, "v1:"},
		{"all", "v1:0-1.1-2", []int32{0, 1}, "v1:0-1.1-2"},
		{"subset", "v1:0-1.1-2.2-3.3-4", []int32{1, 3}, "v1:1-2.3-4"},
		{"unsorted", "v1:0-1.1-2.2-3.3-4", []int32{3, 0, 2}, "v1:0-1.2-3.3-4"},
		{"repeated", "v1:0-1.1-2.2-3", []int32{2, 2, 0, 2, 0}, "v1:0-1.2-3"},
		{"absent ignored", "v1:0-1.5-2", []int32{9, 5, 3}, "v1:5-2"},
		{"negative ignored", "v1:0-1", []int32{-1, 0}, "v1:0-1"},
		{"none present", "v1:0-1", []int32{4, 5}, "v1:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := MustParse(tc.id)
			parts := slices.Clone(tc.parts)
			got := v.Restrict(tc.parts)
			if got.String() != tc.want {
				t.Errorf("Restrict(%v) = %s, want %s", tc.parts, got, tc.want)
			}
			if !slices.Equal(parts, tc.parts) {
				t.Errorf("Restrict modified parts: %v", tc.parts)
			}
			// The result is independent of v.
			if got.Len() > 0 {
				got.Set(got.At(0).Partition, 999)
				if v.String() != tc.id {
					t.Errorf("Set on the restricted vector changed the original to %s", v)
				}
			}
		})
	}
}

func TestClone(t *testing.T) {
	tests := []struct {
		name string
		id   string
	}{
		{"empty", "v1:"},
		{"one", "v1:0-1"},
		{"three", "v1:0-1.1-2.2-3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := MustParse(tc.id)
			c := v.Clone()
			if !c.Equal(v) {
				t.Fatalf("Clone() = %s, want %s", c, v)
			}
			c.Set(0, 777)
			c.Set(100, 1)
			if v.String() != tc.id {
				t.Errorf("Set on the clone changed the original to %s", v)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b Vector
		want bool
	}{
		{"zero and parsed empty", Vector{}, MustParse("v1:"), true},
		{"zero and restricted to nothing", Vector{}, MustParse("v1:0-1").Restrict(nil), true},
		{"same", MustParse("v1:0-1.2-3"), MustParse("v1:0-1.2-3"), true},
		{"other offset", MustParse("v1:0-1.2-3"), MustParse("v1:0-1.2-4"), false},
		{"other partition", MustParse("v1:0-1.2-3"), MustParse("v1:0-1.3-3"), false},
		{"prefix", MustParse("v1:0-1"), MustParse("v1:0-1.2-3"), false},
		{"empty and non-empty", Vector{}, MustParse("v1:0-0"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Equal(tc.b); got != tc.want {
				t.Errorf("%s.Equal(%s) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Equal(tc.a); got != tc.want {
				t.Errorf("%s.Equal(%s) = %v, want %v", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want Order
	}{
		{"both empty", "v1:", "v1:", Equal},
		{"equal", "v1:0-5.1-6", "v1:0-5.1-6", Equal},
		{"before in one partition", "v1:0-5.1-6", "v1:0-5.1-7", Before},
		{"before everywhere", "v1:0-4.1-6", "v1:0-5.1-7", Before},
		{"after", "v1:0-9.1-6", "v1:0-5.1-6", After},
		{"concurrent", "v1:0-9.1-6", "v1:0-5.1-7", Concurrent},
		{"empty before anything", "v1:", "v1:3-0", Before},
		{"absent is before offset 0", "v1:0-1", "v1:0-1.1-0", Before},
		{"extra partition is after", "v1:0-1.5-0", "v1:0-1", After},
		{"absent on each side", "v1:0-1", "v1:1-1", Concurrent},
		{"absent vs ahead elsewhere", "v1:0-9", "v1:0-1.1-0", Concurrent},
		{"interleaved partitions", "v1:0-1.2-1.4-1", "v1:1-1.3-1", Concurrent},
		{"trailing absent in a", "v1:0-1", "v1:0-2.7-0", Before},
		{"max values", "v1:2147483647-9223372036854775807", "v1:2147483647-9223372036854775806", After},
	}
	inverse := map[Order]Order{Equal: Equal, Before: After, After: Before, Concurrent: Concurrent}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := MustParse(tc.a), MustParse(tc.b)
			if got := Compare(a, b); got != tc.want {
				t.Errorf("Compare(%s, %s) = %v, want %v", a, b, got, tc.want)
			}
			if got := Compare(b, a); got != inverse[tc.want] {
				t.Errorf("Compare(%s, %s) = %v, want %v", b, a, got, inverse[tc.want])
			}
		})
	}
}

func TestOrderString(t *testing.T) {
	tests := []struct {
		o    Order
		want string
	}{
		{Equal, "equal"},
		{Before, "before"},
		{After, "after"},
		{Concurrent, "concurrent"},
		{Order(9), "Order(9)"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.o.String(); got != tc.want {
				t.Errorf("Order(%d).String() = %q, want %q", int(tc.o), got, tc.want)
			}
		})
	}
}

func TestFromEntries(t *testing.T) {
	tests := []struct {
		name string
		es   []Entry
		want string
		err  error
	}{
		{"nil", nil, "v1:", nil},
		{"empty", []Entry{}, "v1:", nil},
		{"sorted", []Entry{{0, 1}, {1, 2}}, "v1:0-1.1-2", nil},
		{"unsorted", []Entry{{9, 1}, {0, 2}, {4, 3}}, "v1:0-2.4-3.9-1", nil},
		{"duplicate", []Entry{{1, 1}, {0, 0}, {1, 2}}, "", ErrDuplicate},
		{"negative partition", []Entry{{0, 1}, {-1, 2}}, "", ErrNegative},
		{"negative offset", []Entry{{0, -1}}, "", ErrNegative},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.es)
			v, err := FromEntries(tc.es)
			if !errors.Is(err, tc.err) {
				t.Fatalf("FromEntries(%v) error = %v, want %v", tc.es, err, tc.err)
			}
			if err == nil && v.String() != tc.want {
				t.Errorf("FromEntries(%v) = %s, want %s", tc.es, v, tc.want)
			}
			if !slices.Equal(in, tc.es) {
				t.Errorf("FromEntries modified its input to %v", tc.es)
			}
			if err == nil && v.Len() > 0 {
				v.Set(v.At(0).Partition, 12345)
				if !slices.Equal(in, tc.es) {
					t.Errorf("FromEntries shares storage with its input")
				}
			}
		})
	}
}

func TestAllocs(t *testing.T) {
	v3 := benchVector(3)
	v64 := benchVector(64)
	id3 := v3.String()
	idBytes := []byte(id3)
	buf := make([]byte, 0, 4096)
	var u Vector
	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		{"AppendText 3", 0, func() { buf, _ = v3.AppendText(buf[:0]) }},
		{"AppendText 64", 0, func() { buf, _ = v64.AppendText(buf[:0]) }},
		{"Set existing", 0, func() { v64.Set(31, 42) }},
		{"Offset", 0, func() { _, _ = v64.Offset(40) }},
		{"Compare", 0, func() { _ = Compare(v3, v64) }},
		{"Equal", 0, func() { _ = v64.Equal(v3) }},
		{"Parse empty", 0, func() { _, _ = Parse(Prefix) }},
		{"Parse only allocates entries", 1, func() { _, _ = Parse(id3) }},
		{"UnmarshalText only allocates entries", 1, func() {
			if err := u.UnmarshalText(idBytes); err != nil {
				panic(err)
			}
		}},
		{"String", 1, func() { _ = v64.String() }},
		{"MarshalText", 1, func() { _, _ = v64.MarshalText() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, tc.f); got > tc.max {
				t.Errorf("%v allocations per run, want at most %v", got, tc.max)
			}
		})
	}
}

// benchVector returns a vector with partitions 0..n-1 and realistic offsets.
func benchVector(n int) Vector {
	var v Vector
	for p := range n {
		v.Set(int32(p), 48_000_000+int64(p)*7919)
	}
	return v
}

func TestLongestVectorFits(t *testing.T) {
	// MaxLen promises that any 1056 entries fit, even at maximum values.
	var v Vector
	for p := range int32(1056) {
		v.Set(math.MaxInt32-p, math.MaxInt64)
	}
	s := v.String()
	if len(s) > MaxLen {
		t.Fatalf("1056 maximal entries take %d bytes, more than MaxLen", len(s))
	}
	if w, err := Parse(s); err != nil || !w.Equal(v) {
		t.Fatalf("Parse of 1056 maximal entries: %v", err)
	}
	v.Set(0, math.MaxInt64)
	v.Set(1, math.MaxInt64)
	if _, err := Parse(v.String()); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Parse of %d bytes = %v, want ErrTooLong", len(v.String()), err)
	}
}
