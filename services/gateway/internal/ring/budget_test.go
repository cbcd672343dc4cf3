package ring

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name          string
		budget, floor int64
		shares        []Share
		want          []int64
	}{
		{"no traffic: equal", 8 * MiB, MiB, []Share{{}, {}, {}, {}}, []int64{2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB}},
		{"by traffic", 10 * MiB, MiB, []Share{{Rate: 1}, {Rate: 4}}, []int64{2 * MiB, 8 * MiB}},
		{"only the ratio matters", 10 * MiB, MiB, []Share{{Rate: 1000}, {Rate: 4000}}, []int64{2 * MiB, 8 * MiB}},
		{"an idle topic gets the floor", 10 * MiB, MiB, []Share{{Rate: 0}, {Rate: 3}, {Rate: 6}}, []int64{MiB, 3 * MiB, 6 * MiB}},
		{
			"a share below the floor is raised, the others share the rest", 12 * MiB, 2 * MiB,
			[]Share{{Rate: 1}, {Rate: 50}, {Rate: 50}},
			[]int64{2 * MiB, 5 * MiB, 5 * MiB},
		},
		{
			"the floor raises one, then another", 20 * MiB, 2 * MiB,
			[]Share{{Rate: 1}, {Rate: 9}, {Rate: 90}},
			[]int64{2 * MiB, 2 * MiB, 16 * MiB},
		},
		{
			"an override is fixed, whatever the traffic", 10 * MiB, MiB,
			[]Share{{Rate: 100, Fixed: 2 * MiB}, {Rate: 1}, {Rate: 3}},
			[]int64{2 * MiB, 2 * MiB, 6 * MiB},
		},
		{
			"an idle override keeps its size", 10 * MiB, MiB,
			[]Share{{Fixed: 4 * MiB}, {Rate: 1}},
			[]int64{4 * MiB, 6 * MiB},
		},
		{"only overrides", 10 * MiB, MiB, []Share{{Fixed: 3 * MiB}, {Fixed: MiB}}, []int64{3 * MiB, MiB}},
		{"floors take the whole budget", 3 * MiB, MiB, []Share{{Rate: 1}, {Rate: 100}, {}}, []int64{MiB, MiB, MiB}},
		{"one topic gets everything", 64 * MiB, MiB, []Share{{Rate: 5}}, []int64{64 * MiB}},
		{"negative rate counts as none", 4 * MiB, MiB, []Share{{Rate: -5}, {Rate: 1}}, []int64{MiB, 3 * MiB}},
		{"budget too small: floors, over budget", 2 * MiB, MiB, []Share{{Fixed: MiB}, {}, {}}, []int64{MiB, MiB, MiB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(tc.budget, tc.floor, tc.shares)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Split(%d, %d, %+v) = %v, want %v", tc.budget, tc.floor, tc.shares, got, tc.want)
			}
		})
	}
}

// TestSplitProperties splits random budgets: the sum is never above the budget (and within a byte per ring
// of it, unless every ring has an override), no ring without an override is below the floor, overrides are kept, and a ring with more traffic
// never gets less than one with less.
func TestSplitProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rng.IntN(20)
		floor := int64(64<<10) + rng.Int64N(4<<20)
		shares := make([]Share, n)
		var fixed int64
		for i := range shares {
			switch rng.IntN(5) {
			case 0:
				shares[i].Fixed = floor + rng.Int64N(16<<20)
				fixed += shares[i].Fixed
			case 1: // idle
			default:
				shares[i].Rate = rng.ExpFloat64() * 1e6
			}
		}
		budget := fixed + floor*int64(n) + rng.Int64N(1<<30)
		got := Split(budget, floor, shares)
		var sum int64
		for i, c := range got {
			sum += c
			if shares[i].Fixed > 0 && c != shares[i].Fixed {
				t.Fatalf("override %d became %d", shares[i].Fixed, c)
			}
			if c < floor {
				t.Fatalf("ring %d: %d below the floor %d (%+v)", i, c, floor, shares)
			}
			for j := range got {
				if shares[i].Fixed == 0 && shares[j].Fixed == 0 && shares[i].Rate > shares[j].Rate && got[i] < got[j] {
					t.Fatalf("ring %d (rate %g) got %d, less than ring %d (rate %g) with %d", i, shares[i].Rate, c, j, shares[j].Rate, got[j])
				}
			}
		}
		allFixed := !slices.ContainsFunc(shares, func(s Share) bool { return s.Fixed == 0 })
		if sum > budget || (!allFixed && sum < budget-int64(n)) {
			t.Fatalf("sum %d for budget %d (%d rings)", sum, budget, n)
		}
	}
}
