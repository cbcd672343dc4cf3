package position

import (
	"cmp"
	"fmt"
	"slices"
)

// Entry is one partition's position: the last offset seen in Partition.
type Entry struct {
	// Partition is the Kafka partition number, never negative.
	Partition int32
	// Offset is the last offset delivered or passed over in Partition,
	// never negative.
	Offset int64
}

// Vector is a client's position in a topic: a set of entries sorted by
// ascending Partition, without duplicates. A partition that is absent has not
// been seen at all.
//
// The zero Vector is the empty vector, equivalent to the id "v1:". Vectors are
// immutable by convention; the methods that change one (Set, UnmarshalText)
// have pointer receivers and mutate shared storage, see the package
// documentation for the rules.
type Vector struct {
	// e is sorted by strictly ascending Partition; all fields are >= 0.
	// nil and empty are both the empty vector.
	e []Entry
}

// FromEntries returns a Vector holding a sorted copy of es. It returns an
// error wrapping ErrNegative if a partition or offset is negative, and one
// wrapping ErrDuplicate if a partition appears twice. An empty es gives the
// empty vector.
func FromEntries(es []Entry) (Vector, error) {
	if len(es) == 0 {
		return Vector{}, nil
	}
	for _, x := range es {
		if x.Partition < 0 || x.Offset < 0 {
			return Vector{}, fmt.Errorf("%w: partition %d offset %d", ErrNegative, x.Partition, x.Offset)
		}
	}
	c := slices.Clone(es)
	slices.SortFunc(c, cmpEntry)
	for i := 1; i < len(c); i++ {
		if c[i].Partition == c[i-1].Partition {
			return Vector{}, fmt.Errorf("%w: partition %d", ErrDuplicate, c[i].Partition)
		}
	}
	return Vector{e: c}, nil
}

func cmpEntry(a, b Entry) int { return cmp.Compare(a.Partition, b.Partition) }

// Len returns the number of partitions in v.
func (v Vector) Len() int { return len(v.e) }

// At returns the i-th entry in ascending partition order. It panics if i is
// not in [0, Len()).
func (v Vector) At(i int) Entry { return v.e[i] }

// find returns the index of partition p in v, or where it would be inserted,
// and whether it is present.
func (v Vector) find(p int32) (int, bool) {
	// A hand-written binary search: slices.BinarySearchFunc would need a
	// closure per call on this hot path.
	lo, hi := 0, len(v.e)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v.e[m].Partition < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(v.e) && v.e[lo].Partition == p
}

// Offset returns the offset recorded for partition p, and false if p is
// absent from v.
func (v Vector) Offset(p int32) (int64, bool) {
	i, ok := v.find(p)
	if !ok {
		return 0, false
	}
	return v.e[i].Offset, true
}

// Set records off as the position in partition p, inserting p or replacing
// its offset, and keeps v sorted. Replacing does not allocate; inserting
// allocates only when the entries slice must grow. Set panics if p or off is
// negative, which is a programming error. Set mutates storage that plain
// copies of v share; see the package documentation.
func (v *Vector) Set(p int32, off int64) {
	if p < 0 || off < 0 {
		panic(fmt.Sprintf("position: Set(%d, %d) with a negative argument", p, off))
	}
	i, ok := v.find(p)
	if ok {
		v.e[i].Offset = off
		return
	}
	v.e = slices.Insert(v.e, i, Entry{Partition: p, Offset: off})
}

// Clone returns a copy of v that shares no storage with it.
func (v Vector) Clone() Vector {
	if len(v.e) == 0 {
		return Vector{}
	}
	return Vector{e: slices.Clone(v.e)}
}

// Equal reports whether v and w hold the same entries. All empty vectors are
// equal.
func (v Vector) Equal(w Vector) bool { return slices.Equal(v.e, w.e) }

// Restrict returns a new Vector with only the entries of v whose partition is
// in parts. parts may be unsorted and may repeat partitions; partitions in
// parts that v lacks are ignored. The result shares no storage with v.
func (v Vector) Restrict(parts []int32) Vector {
	var out []Entry
	for _, p := range parts {
		i, ok := v.find(p)
		if !ok {
			continue
		}
		if out == nil {
			out = make([]Entry, 0, min(len(parts), len(v.e)))
		}
		out = append(out, v.e[i])
	}
	if len(out) < 2 {
		return Vector{e: out}
	}
	slices.SortFunc(out, cmpEntry)
	// Entries for equal partitions are identical, so Compact is enough.
	return Vector{e: slices.Compact(out)}
}

// Order is the result of Compare.
type Order int

// The possible results of Compare.
const (
	// Equal means both vectors hold the same position everywhere.
	Equal Order = iota
	// Before means a is behind or level with b in every partition, and
	// behind in at least one.
	Before
	// After means a is ahead of or level with b in every partition, and
	// ahead in at least one.
	After
	// Concurrent means each vector is ahead of the other somewhere.
	Concurrent
)

// String returns the lower-case name of o, such as "before".
func (o Order) String() string {
	switch o {
	case Equal:
		return "equal"
	case Before:
		return "before"
	case After:
		return "after"
	case Concurrent:
		return "concurrent"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// Compare compares a and b partition by partition. A partition absent from a
// vector counts as -1, before offset 0, since nothing has been seen there.
// It returns Equal, Before (a <= b everywhere, a != b), After (the reverse)
// or Concurrent (each is ahead somewhere).
func Compare(a, b Vector) Order {
	var aAhead, bAhead bool
	i, j := 0, 0
	for (i < len(a.e) || j < len(b.e)) && (!aAhead || !bAhead) {
		switch {
		case j == len(b.e) || (i < len(a.e) && a.e[i].Partition < b.e[j].Partition):
			// Only a has this partition, and any offset beats absent.
			aAhead = true
			i++
		case i == len(a.e) || b.e[j].Partition < a.e[i].Partition:
			bAhead = true
			j++
		default:
			if a.e[i].Offset > b.e[j].Offset {
				aAhead = true
			} else if a.e[i].Offset < b.e[j].Offset {
				bAhead = true
			}
			i++
			j++
		}
	}
	switch {
	case aAhead && bAhead:
		return Concurrent
	case aAhead:
		return After
	case bAhead:
		return Before
	}
	return Equal
}
