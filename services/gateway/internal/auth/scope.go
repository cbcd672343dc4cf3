package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
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
// topic the token allows. publish (topic patterns) and publish_keys are what the token may write, apart from
// what it may read. Anything else in the claim is refused (a misspelled "key" must not widen a scope).
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

// parseScope reads the scope claim's JSON strictly: an object with a topics list and optional keys and events
// lists of non-empty strings, nothing else. A list given as null is refused: an issuer's serializer writes a
// nil slice as null, which is ambiguous between "none" and "any", so it is neither.
// maxFilter is the longest filter a token may carry (valuefilter.MaxLength; the auth package does not
// compile it).
const maxFilter = 1024

func parseScope(raw []byte) (*Scope, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("want an object with a topics list")
	}
	for name, v := range fields {
		if bytes.Equal(v, []byte("null")) {
			return nil, fmt.Errorf("%s: want a value, got null", name)
		}
	}
	var js struct {
		Topics      *[]string `json:"topics"`
		Keys        *[]string `json:"keys"`
		Events      *[]string `json:"events"`
		Publish     *[]string `json:"publish"`
		PublishKeys *[]string `json:"publish_keys"`
		Filter      *string   `json:"filter"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil {
		return nil, fmt.Errorf("want topics, keys and events lists of strings: %w", err)
	}
	if js.Topics == nil {
		return nil, fmt.Errorf("topics is required")
	}
	s := &Scope{Topics: *js.Topics}
	if js.Publish != nil {
		s.Publish = append([]string{}, *js.Publish...)
	}
	for name, list := range map[string][]string{"topics": s.Topics, "publish": s.Publish} {
		for _, p := range list {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return nil, fmt.Errorf("%s: %q is not a topic pattern", name, p)
			}
		}
	}
	for name, list := range map[string]*[]string{"keys": js.Keys, "events": js.Events, "publish_keys": js.PublishKeys} {
		if list != nil && slices.Contains(*list, "") {
			return nil, fmt.Errorf("%s: empty value", name)
		}
	}
	if js.Keys != nil {
		s.Keys = append([]string{}, *js.Keys...)
	}
	if js.Events != nil {
		s.Events = append([]string{}, *js.Events...)
	}
	if js.PublishKeys != nil {
		s.PublishKeys = append([]string{}, *js.PublishKeys...)
	}
	if js.Filter != nil {
		if *js.Filter == "" || len(*js.Filter) > maxFilter {
			return nil, fmt.Errorf("filter: want an expression of 1 to %d bytes", maxFilter)
		}
		s.Filter = *js.Filter
	}
	return s, nil
}
