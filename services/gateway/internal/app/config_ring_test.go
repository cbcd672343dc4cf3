package app

import (
	"maps"
	"strings"
	"testing"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// TestRingSettings loads the ring settings from the environment and the file, and checks what the feed gets.
func TestRingSettings(t *testing.T) {
	three := map[string]string{"SSEGATE_TOPICS": "a,b,c"}
	env := func(kv ...string) map[string]string {
		m := withEnv(three)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		yaml string
		want feed.Config
	}{
		{
			"defaults: 64MiB per topic", env(), "",
			feed.Config{RingBytes: 64 << 20, RingFloor: 1 << 20, TopicRingBytes: map[string]int64{}},
		},
		{
			"ring-bytes and a topic's own", env("SSEGATE_RING_BYTES", "8MiB", "SSEGATE_TOPIC_RING_BYTES", "b=1MiB"), "",
			feed.Config{RingBytes: 8 << 20, RingFloor: 1 << 20, TopicRingBytes: map[string]int64{"b": 1 << 20}},
		},
		{
			"a budget", env("SSEGATE_RING_BUDGET", "512MiB"), "",
			feed.Config{RingBytes: 64 << 20, RingBudget: 512 << 20, RingFloor: 1 << 20, TopicRingBytes: map[string]int64{}},
		},
		{
			"a budget, a floor and overrides from the file", env(), "ring-budget: 1GiB\nring-floor: 16MiB\ntopic-ring-bytes:\n  a: 256MiB\n  c: 64MiB\n",
			feed.Config{RingBytes: 64 << 20, RingBudget: 1 << 30, RingFloor: 16 << 20, TopicRingBytes: map[string]int64{"a": 256 << 20, "c": 64 << 20}},
		},
		{
			"floors and overrides exactly the budget", env("SSEGATE_RING_BUDGET", "3MiB", "SSEGATE_TOPIC_RING_BYTES", "a=1MiB"), "",
			feed.Config{RingBytes: 64 << 20, RingBudget: 3 << 20, RingFloor: 1 << 20, TopicRingBytes: map[string]int64{"a": 1 << 20}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, nil, tc.env, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			var got feed.Config
			if err := c.ringFeed(&got); err != nil {
				t.Fatal(err)
			}
			if got.RingBytes != tc.want.RingBytes || got.RingBudget != tc.want.RingBudget || got.RingFloor != tc.want.RingFloor ||
				!maps.Equal(got.TopicRingBytes, tc.want.TopicRingBytes) {
				t.Fatalf("feed ring settings %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRingSettingsInvalid: every bad value or combination of the ring settings stops the gateway with an
// error naming the setting and saying what is wrong.
func TestRingSettingsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{
			"ring-bytes too small", nil,
			map[string]string{"SSEGATE_RING_BYTES": "1KiB"},
			[]string{"ring-bytes (SSEGATE_RING_BYTES)", "at least 64KiB"},
		},
		{
			"ring-budget not a size", nil,
			map[string]string{"SSEGATE_RING_BUDGET": "lots"},
			[]string{"ring-budget", "SSEGATE_RING_BUDGET", "want a size in bytes"},
		},
		{"ring-budget negative", []string{"--ring-budget=-1"}, nil, []string{"ring-budget", "want a size in bytes"}},
		{
			"ring-budget too small", nil,
			map[string]string{"SSEGATE_RING_BUDGET": "1000"},
			[]string{"ring-budget (SSEGATE_RING_BUDGET)", "0 (none", "at least 64KiB"},
		},
		{
			"ring-floor too small", nil,
			map[string]string{"SSEGATE_RING_BUDGET": "1GiB", "SSEGATE_RING_FLOOR": "4KiB"},
			[]string{"ring-floor (SSEGATE_RING_FLOOR)", "at least 64KiB"},
		},
		{
			"ring-floor without a budget", nil,
			map[string]string{"SSEGATE_RING_FLOOR": "4MiB"},
			[]string{"ring-floor (SSEGATE_RING_FLOOR)", "only goes with ring-budget"},
		},
		{
			"ring-bytes with a budget", nil,
			map[string]string{"SSEGATE_RING_BUDGET": "1GiB", "SSEGATE_RING_BYTES": "64MiB"},
			[]string{"ring-budget (SSEGATE_RING_BUDGET)", "not with ring-bytes", "topic-ring-bytes"},
		},
		{
			"ring-bytes as a flag with a budget in the file",
			[]string{"--ring-bytes=8MiB"},
			map[string]string{"SSEGATE_RING_BUDGET": "1GiB"},
			[]string{"not with ring-bytes"},
		},
		{
			"floors over the budget", nil,
			map[string]string{"SSEGATE_TOPICS": "a,b,c,d", "SSEGATE_RING_BUDGET": "6MiB", "SSEGATE_RING_FLOOR": "2MiB"},
			[]string{"ring-budget (SSEGATE_RING_BUDGET)", "6MiB is less than 4 topics x ring-floor 2MiB", "= 8MiB", "lower ring-floor"},
		},
		{
			"overrides and floors over the budget", nil,
			map[string]string{"SSEGATE_TOPICS": "a,b,c", "SSEGATE_RING_BUDGET": "9MiB", "SSEGATE_TOPIC_RING_BYTES": "a=8MiB"},
			[]string{"9MiB is less than 2 topics x ring-floor 1MiB plus the topics' own sizes 8MiB = 10MiB"},
		},
		{
			"overrides over the budget", nil,
			map[string]string{"SSEGATE_TOPICS": "a,b", "SSEGATE_RING_BUDGET": "10MiB", "SSEGATE_TOPIC_RING_BYTES": "a=8MiB,b=4MiB"},
			[]string{"ring-budget (SSEGATE_RING_BUDGET)", "add up to 12MiB, more than the budget of 10MiB"},
		},
		{
			"override of a topic not served", nil,
			map[string]string{"SSEGATE_TOPIC_RING_BYTES": "x=8MiB"},
			[]string{"topic-ring-bytes (SSEGATE_TOPIC_RING_BYTES)", `"x" is not one of the served topics`},
		},
		{
			"override not a size", nil,
			map[string]string{"SSEGATE_TOPIC_RING_BYTES": "orders=big"},
			[]string{"topic-ring-bytes (SSEGATE_TOPIC_RING_BYTES)", "topic orders", "want a size in bytes"},
		},
		{
			"override too small", nil,
			map[string]string{"SSEGATE_TOPIC_RING_BYTES": "orders=1KiB"},
			[]string{"topic-ring-bytes (SSEGATE_TOPIC_RING_BYTES)", "topic orders: must be at least 64KiB"},
		},
		{
			"override without a size", nil,
			map[string]string{"SSEGATE_TOPIC_RING_BYTES": "orders"},
			[]string{"topic-ring-bytes", "want key=value pairs"},
		},
		{
			"override given twice", nil,
			map[string]string{"SSEGATE_TOPIC_RING_BYTES": "orders=1MiB,orders=2MiB"},
			[]string{"topic-ring-bytes", "given more than once"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(t, tc.args, withEnv(tc.env), "")
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
