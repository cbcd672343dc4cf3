package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"time"
)

// Mode is what a topic asks of a request's token.
type Mode int

// Modes of a topic.
const (
	// ModeNone: the topic is public; a token is not even looked at.
	ModeNone Mode = iota
	// ModeOptional: the topic is public, but a token that comes with the request is verified (a bad one is
	// refused), and when its scope covers the topic, the scope applies.
	ModeOptional
	// ModeRequired: a valid token whose scope covers the topic is required.
	ModeRequired
)

var modeNames = []string{"none", "optional", "required"}

// String returns the mode's name, as ParseMode takes it.
func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return "unknown"
	}
	return modeNames[m]
}

// ParseMode parses "none", "optional" or "required".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("want none, optional or required, got %q", s)
}

// Claims are what a verified token says about its holder.
type Claims struct {
	// Subject is the sub claim; empty when the token has none.
	Subject string
	// Expires is the exp claim (every accepted token has one).
	Expires time.Time
	// Scope is the scope claim; nil when the token has none, which allows no topic.
	Scope *Scope
}

// Scope is what a token allows, from its scope claim (named by Config.Claim, "ssegate" by default):
//
//	{"ssegate": {"topics": ["orders", "user-*"], "keys": ["user-42"], "events": ["order.paid"]}}
//
// topics is required; keys and events are optional and, when given, are forced on every stream of every
// topic the token allows; per_topic narrows some topics further (an object of topic patterns to keys, events
// and filter). publish (topic patterns) and publish_keys are what the token may write, apart from what it may
// read. Anything else in the claim is refused (a misspelled "key" must not widen a scope).
type Scope struct {
	// Topics are the topics the token allows: names or patterns with *, ? and [...] as in path.Match.
	Topics []string
	// Keys, when not nil, are the only record keys the token's streams get. Empty (present but empty)
	// allows no key at all.
	Keys []string
	// Events, when not nil, are the only event types the token's streams get.
	Events []string
	// Publish are the topics the token may publish into (POST /topics/{topic}/records), patterns as Topics.
	// Reading a topic never allows writing it.
	Publish []string
	// PublishKeys, when not nil, are the only record keys the token may publish (a record without a key is
	// then refused too).
	PublishKeys []string
	// Filter, when not empty, is a filter expression (package valuefilter) every stream of the token gets,
	// combined with the client's own filter by AND: row-level access the client cannot widen. It is
	// compiled when it is first used, checked here only for its length.
	Filter string
	// PerTopic narrows the scope further for the topics its patterns match (patterns as Topics): each
	// matching entry's keys, events and filter apply on top of the ones above.
	PerTopic map[string]TopicScope
}

// TopicScope is what a scope forces on the streams of some topics: keys and events (nil: any) and a filter
// (empty: none).
type TopicScope struct {
	Keys, Events []string
	Filter       string
}

// maxPerTopic bounds the per-topic entries of a scope: each request matches its topics against all of them.
const maxPerTopic = 64

// ForTopic is what the scope forces on a stream of topic: the keys and events both the scope and every
// per-topic entry matching topic allow (nil when none of them names any), and their filters, all of which a
// record must pass.
func (s *Scope) ForTopic(topic string) (keys, events, filters []string) {
	keys, events = s.Keys, s.Events
	if s.Filter != "" {
		filters = append(filters, s.Filter)
	}
	for _, pattern := range slices.Sorted(maps.Keys(s.PerTopic)) {
		if ok, err := path.Match(pattern, topic); err != nil || !ok {
			continue
		}
		e := s.PerTopic[pattern]
		keys, events = intersect(keys, e.Keys), intersect(events, e.Events)
		if e.Filter != "" {
			filters = append(filters, e.Filter)
		}
	}
	return keys, events, filters
}

// intersect is what both lists allow: nil stands for any value.
func intersect(a, b []string) []string {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := []string{}
	for _, v := range a {
		if slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// AllowsPublish says whether the scope lets its token publish into topic.
func (s *Scope) AllowsPublish(topic string) bool {
	return s != nil && matchAny(s.Publish, topic)
}

// AllowsPublishKey says whether the scope lets its token publish a record with key (nil: no key).
func (s *Scope) AllowsPublishKey(key []byte) bool {
	if s == nil {
		return false
	}
	return s.PublishKeys == nil || (key != nil && slices.Contains(s.PublishKeys, string(key)))
}

func matchAny(patterns []string, topic string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, topic); err == nil && ok {
			return true
		}
	}
	return false
}

// AllowsTopic says whether the scope covers the topic.
func (s *Scope) AllowsTopic(topic string) bool {
	return s != nil && matchAny(s.Topics, topic)
}

// maxFilter is the longest filter a token may carry (valuefilter.MaxLength; the auth package does not
// compile it).
const maxFilter = 1024

// parseScope reads the scope claim's JSON strictly: an object with a topics list, optional keys and events
// lists of non-empty strings, a filter, publish lists and per-topic entries, nothing else (see decodeStrict).

func parseScope(raw []byte) (*Scope, error) {
	return ParseScope(raw)
}

// ParseScope reads a scope in the form of the scope claim (strictly, as a token's): an authorization hook's
// answer carries one.
func ParseScope(raw []byte) (*Scope, error) {
	var js struct {
		Topics      *[]string                   `json:"topics"`
		Publish     *[]string                   `json:"publish"`
		PublishKeys *[]string                   `json:"publish_keys"`
		PerTopic    *map[string]json.RawMessage `json:"per_topic"`
		narrowing
	}
	if err := decodeStrict(raw, &js); err != nil {
		return nil, fmt.Errorf("want an object with a topics list: %w", err)
	}
	if js.Topics == nil {
		return nil, fmt.Errorf("topics is required")
	}
	s := &Scope{Topics: *js.Topics}
	if js.Publish != nil {
		s.Publish = append([]string{}, *js.Publish...)
	}
	patterns := map[string][]string{"topics": s.Topics, "publish": s.Publish}
	if js.PerTopic != nil {
		patterns["per_topic"] = slices.Collect(maps.Keys(*js.PerTopic))
	}
	for name, list := range patterns {
		for _, p := range list {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return nil, fmt.Errorf("%s: %q is not a topic pattern", name, p)
			}
		}
	}
	if js.PublishKeys != nil {
		if slices.Contains(*js.PublishKeys, "") {
			return nil, fmt.Errorf("publish_keys: empty value")
		}
		s.PublishKeys = append([]string{}, *js.PublishKeys...)
	}
	all, err := js.topicScope("")
	if err != nil {
		return nil, err
	}
	s.Keys, s.Events, s.Filter = all.Keys, all.Events, all.Filter
	if js.PerTopic == nil {
		return s, nil
	}
	if len(*js.PerTopic) > maxPerTopic {
		return nil, fmt.Errorf("per_topic: more than %d entries", maxPerTopic)
	}
	s.PerTopic = map[string]TopicScope{}
	for pattern, entry := range *js.PerTopic {
		var n narrowing
		if err := decodeStrict(entry, &n); err != nil {
			return nil, fmt.Errorf("per_topic %q: want an object of keys, events and filter: %w", pattern, err)
		}
		if s.PerTopic[pattern], err = n.topicScope("per_topic " + strconv.Quote(pattern) + ": "); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// narrowing is what a scope and each of its per-topic entries force on streams.
type narrowing struct {
	Keys   *[]string `json:"keys"`
	Events *[]string `json:"events"`
	Filter *string   `json:"filter"`
}

// topicScope checks n (in is where it is, for errors) and copies it out.
func (n narrowing) topicScope(in string) (TopicScope, error) {
	var ts TopicScope
	for name, list := range map[string]*[]string{"keys": n.Keys, "events": n.Events} {
		if list != nil && slices.Contains(*list, "") {
			return ts, fmt.Errorf("%s%s: empty value", in, name)
		}
	}
	if n.Keys != nil {
		ts.Keys = append([]string{}, *n.Keys...)
	}
	if n.Events != nil {
		ts.Events = append([]string{}, *n.Events...)
	}
	if n.Filter != nil {
		if *n.Filter == "" || len(*n.Filter) > maxFilter {
			return ts, fmt.Errorf("%sfilter: want an expression of 1 to %d bytes", in, maxFilter)
		}
		ts.Filter = *n.Filter
	}
	return ts, nil
}

// decodeStrict decodes a JSON object into v, refusing fields v lacks and fields given as null: an issuer's
// serializer writes a nil slice as null, which is ambiguous between "none" and "any", so it is neither.
func decodeStrict(raw []byte, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return fmt.Errorf("not an object")
	}
	for name, f := range fields {
		if bytes.Equal(f, []byte("null")) {
			return fmt.Errorf("%s: want a value, got null", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
