package feed

import (
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

const miB = 1 << 20

// traffic publishes n frames of size bytes into r.
func traffic(r *ring.Ring, n, size int) {
	var b ring.Batch
	frame := make([]byte, size)
	for i := range n {
		b.Reset()
		b.Add(append(b.Buf(), frame...), 0, int64(i), nil)
		r.Publish(&b, []byte("id"))
	}
}

func TestRingCapacities(t *testing.T) {
	names := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []int64
		wantErr string
	}{
		{"no budget: ring bytes each", Config{RingBytes: 4 * miB}, []int64{4 * miB, 4 * miB, 4 * miB}, ""},
		{"no budget: an override", Config{RingBytes: 4 * miB, TopicRingBytes: map[string]int64{"b": miB}}, []int64{4 * miB, miB, 4 * miB}, ""},
		{"no budget, no ring bytes", Config{}, nil, "ring bytes of topic a must be positive"},
		{"budget: equal at start", Config{RingBudget: 30 * miB, RingFloor: miB}, []int64{10 * miB, 10 * miB, 10 * miB}, ""},
		{
			"budget: override fixed, rest equal",
			Config{RingBudget: 30 * miB, RingFloor: miB, TopicRingBytes: map[string]int64{"a": 10 * miB}},
			[]int64{10 * miB, 10 * miB, 10 * miB},
			"",
		},
		{"budget: ring bytes not used", Config{RingBytes: 64 * miB, RingBudget: 3 * miB, RingFloor: miB}, []int64{miB, miB, miB}, ""},
		{"budget below the floors", Config{RingBudget: 2 * miB, RingFloor: miB}, nil, "less than the overrides and a floor"},
		{"budget below the overrides", Config{RingBudget: 10 * miB, RingFloor: miB, TopicRingBytes: map[string]int64{"a": 9 * miB}}, nil, "less than the overrides"},
		{"budget without a floor", Config{RingBudget: 10 * miB}, nil, "ring floor must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := ringCapacities(tc.cfg, names)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("= %v, %v, want %v", got, err, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("= %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestBalancer: a budget follows the topics' traffic, with the smoothing, the floor and an override, and the
// capacities never add up to more than the budget.
func TestBalancer(t *testing.T) {
	names := []string{"busy", "fixed", "idle", "quiet"}
	cfg := Config{RingBudget: 40 * miB, RingFloor: 2 * miB, TopicRingBytes: map[string]int64{"fixed": 6 * miB}}
	caps, b, err := ringCapacities(cfg, names)
	if err != nil {
		t.Fatal(err)
	}
	rings := map[string]*ring.Ring{}
	for i, name := range names {
		r, _ := ring.New(int(caps[i]), 0)
		rings[name] = r
		b.rings = append(b.rings, r)
	}
	capOf := func(name string) int64 { return int64(rings[name].Stats().Capacity) }
	check := func(when string) {
		t.Helper()
		var sum int64
		for _, name := range names {
			sum += capOf(name)
			if capOf(name) < cfg.RingFloor {
				t.Fatalf("%s: %s below the floor: %d", when, name, capOf(name))
			}
		}
		if sum > cfg.RingBudget {
			t.Fatalf("%s: capacities add up to %d, over the budget %d", when, sum, cfg.RingBudget)
		}
		if capOf("fixed") != 6*miB {
			t.Fatalf("%s: the override is %d", when, capOf("fixed"))
		}
	}
	check("at start")
	if capOf("busy") != capOf("idle") {
		t.Fatalf("at start the topics without an override share equally: %d and %d", capOf("busy"), capOf("idle"))
	}
	now := time.Unix(1000, 0)
	b.at = now
	// 10 s: busy 3 MB/s, quiet 1 MB/s, fixed much more (it keeps its size anyway), idle nothing.
	traffic(rings["busy"], 3000, 10000)
	traffic(rings["quiet"], 1000, 10000)
	traffic(rings["fixed"], 10000, 10000)
	now = now.Add(10 * time.Second)
	b.step(now)
	check("after the first measurement")
	if capOf("idle") != cfg.RingFloor {
		t.Fatalf("idle topic: %d, want the floor", capOf("idle"))
	}
	// 32 MiB after the override and the idle topic's floor, split 3:1.
	if got, want := capOf("busy"), int64(24*miB); got < want-2 || got > want {
		t.Fatalf("busy: %d, want about %d", got, want)
	}
	if got, want := capOf("quiet"), int64(8*miB); got < want-2 || got > want {
		t.Fatalf("quiet: %d, want about %d", got, want)
	}
	if st := rings["busy"].Stats(); st.Memory > st.Capacity {
		t.Fatalf("busy ring holds %d over its capacity %d", st.Memory, st.Capacity)
	}
	// The traffic moves to the quiet topic: its share grows over the half-life, not at once.
	for i := range 12 {
		traffic(rings["quiet"], 3000, 10000)
		now = now.Add(10 * time.Second)
		b.step(now)
		check("while the traffic moves")
		if i == 0 && capOf("quiet") >= capOf("busy") {
			t.Fatalf("after 10 s the quiet topic already has %d, the busy one %d: not smoothed", capOf("quiet"), capOf("busy"))
		}
	}
	// Two half-lives: busy's rate is down to a quarter (0.75 MB/s), quiet's up to 2.5 MB/s.
	if capOf("quiet") < 3*capOf("busy") {
		t.Fatalf("after two minutes: quiet %d busy %d, want the quiet one to have more than 3 times as much", capOf("quiet"), capOf("busy"))
	}
	for _, r := range rings {
		if st := r.Stats(); st.Memory > st.Capacity && st.Frames > 1 {
			t.Fatalf("a ring holds %d over its capacity %d", st.Memory, st.Capacity)
		}
	}
}
