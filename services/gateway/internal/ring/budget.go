package ring

import "slices"

// Share is what Split knows of one ring sharing a budget.
type Share struct {
	// Rate is the ring's traffic, such as its smoothed frame bytes per second; only the ratios between rings
	// matter. Zero or negative counts as no traffic.
	Rate float64
	// Fixed, when positive, is the ring's own capacity (an override), taken out of the budget as it is.
	Fixed int64
}

// Split divides budget between rings: a ring with a Fixed capacity gets it, and the others share the rest in
// proportion to their rates, none below floor. A ring whose share would be below floor gets floor and the
// others share what is left after it (water-filling), so traffic decides only the part above the floors. When
// no ring without a fixed capacity has traffic, they share the rest equally.
//
// The capacities never add up to more than budget when budget holds the fixed capacities and a floor for
// every other ring; otherwise the fixed ones are kept and the others get floor, and the sum is over budget.
// Callers validate that first. Rounding is down, so up to one byte per ring stays unassigned.
func Split(budget, floor int64, shares []Share) []int64 {
	out := make([]int64, len(shares))
	rest := budget
	var free []int // rings without a fixed capacity, still to be sized
	for i, s := range shares {
		if s.Fixed > 0 {
			out[i] = s.Fixed
			rest -= s.Fixed
			continue
		}
		free = append(free, i)
	}
	if len(free) == 0 {
		return out
	}
	if rest < floor*int64(len(free)) {
		for _, i := range free {
			out[i] = floor
		}
		return out
	}
	rate := func(i int) float64 { return max(shares[i].Rate, 0) }
	for {
		var total float64
		for _, i := range free {
			total += rate(i)
		}
		if total == 0 {
			each := rest / int64(len(free))
			for _, i := range free {
				out[i] = each
			}
			return out
		}
		// Rings whose proportional share is below the floor get the floor; the others are sized again from
		// what is left. Each round fixes at least one ring or ends.
		below := free[:0:0]
		for _, i := range free {
			if float64(rest)*rate(i)/total < float64(floor) {
				below = append(below, i)
			}
		}
		if len(below) == 0 {
			for _, i := range free {
				out[i] = max(floor, int64(float64(rest)*rate(i)/total))
			}
			trim(out, free, rest)
			return out
		}
		for _, i := range below {
			out[i] = floor
			rest -= floor
		}
		free = slices.DeleteFunc(free, func(i int) bool { return slices.Contains(below, i) })
		if len(free) == 0 {
			return out
		}
	}
}

// trim takes back what floating-point rounding may have given the rings in free beyond rest, from the
// largest ones, never below what they would get anyway.
func trim(out []int64, free []int, rest int64) {
	var sum int64
	for _, i := range free {
		sum += out[i]
	}
	for sum > rest {
		big := free[0]
		for _, i := range free {
			if out[i] > out[big] {
				big = i
			}
		}
		d := min(sum-rest, out[big]/2)
		out[big] -= d
		sum -= d
	}
}
