package auth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestScopeForTopic: per_topic entries narrow the topics their patterns match, on top of the scope's own keys,
// events and filter: lists intersect (a missing one allows any value), filters add up, and an entry matching no
// topic changes nothing.
func TestScopeForTopic(t *testing.T) {
	s, err := parseScope([]byte(`{"topics": ["*"], "keys": ["u1", "u2", "u3"], "filter": "value.ok",
		"per_topic": {
			"orders": {"keys": ["u1", "u9"]},
			"pay*": {"events": ["paid"], "filter": "value.amount > 0"},
			"payments": {"keys": ["u2"], "events": ["paid", "refunded"]},
			"prices": {"keys": []}
		}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic                 string
		keys, events, filters []string
		keysNil, eventsNil    bool
	}{
		{topic: "audit", keys: []string{"u1", "u2", "u3"}, eventsNil: true, filters: []string{"value.ok"}},
		{topic: "orders", keys: []string{"u1"}, eventsNil: true, filters: []string{"value.ok"}},
		{topic: "payouts", keys: []string{"u1", "u2", "u3"}, events: []string{"paid"}, filters: []string{"value.ok", "value.amount > 0"}},
		{topic: "payments", keys: []string{"u2"}, events: []string{"paid"}, filters: []string{"value.ok", "value.amount > 0"}},
		{topic: "prices", keys: []string{}, eventsNil: true, filters: []string{"value.ok"}},
	} {
		keys, events, filters := s.ForTopic(tc.topic)
		if !slices.Equal(keys, tc.keys) || (keys == nil) != tc.keysNil || !slices.Equal(events, tc.events) ||
			(events == nil) != tc.eventsNil || !slices.Equal(filters, tc.filters) {
			t.Errorf("%s: keys %q events %q filters %q, want %q %q %q", tc.topic, keys, events, filters, tc.keys, tc.events, tc.filters)
		}
	}
	// Without a scope-wide list, an entry's list is the topic's.
	s, err = parseScope([]byte(`{"topics": ["a", "b"], "per_topic": {"a": {"keys": ["k1"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if keys, _, _ := s.ForTopic("a"); !slices.Equal(keys, []string{"k1"}) {
		t.Errorf("a: keys %q", keys)
	}
	if keys, _, filters := s.ForTopic("b"); keys != nil || filters != nil {
		t.Errorf("b: keys %q filters %q, want none", keys, filters)
	}
}

// TestScopeRefusesBadPerTopic: a per_topic entry of the wrong shape refuses the whole claim, naming the entry.
func TestScopeRefusesBadPerTopic(t *testing.T) {
	many := make([]string, maxPerTopic+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"t%d": {"keys": ["k"]}`, i)
	}
	for _, tc := range []struct{ claim, says string }{
		{`{"topics": ["*"], "per_topic": null}`, "null"},
		{`{"topics": ["*"], "per_topic": ["a"]}`, "topics list"},
		{`{"topics": ["*"], "per_topic": {"a": null}}`, `per_topic "a"`},
		{`{"topics": ["*"], "per_topic": {"a": {"key": ["k"]}}}`, `per_topic "a"`},
		{`{"topics": ["*"], "per_topic": {"a": {"keys": null}}}`, `per_topic "a"`},
		{`{"topics": ["*"], "per_topic": {"a": {"keys": [""]}}}`, `per_topic "a": keys: empty value`},
		{`{"topics": ["*"], "per_topic": {"a": {"filter": ""}}}`, `per_topic "a": filter`},
		{`{"topics": ["*"], "per_topic": {"a[": {"keys": ["k"]}}}`, `per_topic: "a[" is not a topic pattern`},
		{`{"topics": ["*"], "per_topic": {"": {"keys": ["k"]}}}`, `per_topic: "" is not a topic pattern`},
		{`{"topics": ["*"], "per_topic": {` + strings.Join(many, ",") + `}}`, "more than 64"},
		{`{"topics": ["*"], "per_topic": {"a": {"filter": "` + strings.Repeat("x", maxFilter+1) + `"}}}`, "filter"},
	} {
		if _, err := parseScope([]byte(tc.claim)); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%.80s: %v, want an error saying %q", tc.claim, err, tc.says)
		}
	}
}
