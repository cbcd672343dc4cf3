package position

import (
	"errors"
	"slices"
	"strings"
)

// The id of a stream of several topics: "v1:", then for each topic its name, "~" and its position's entries as
// a one-topic id has them, separated by ",". The first topic may be any (a frame's own topic comes first, so
// that a client that sees only ids, an EventSource, knows it); the others follow in ascending name order:
//
//	v1:payments~0-17,orders~0-5812.1-5790
//
// A topic with nothing seen yet has no entries ("payments~"); a topic the stream has not placed yet (its start
// not known when the client dropped) is absent. Topic names are Kafka's ([A-Za-z0-9._-]), so neither "~" nor
// "," can occur in them.
//
// The compact form starts "v2:" and has at least one topic whose part is a one-topic compact id (a checkpoint
// and the partitions moved since, see Compact): its entries are ":" and what follows "v2:" in that id. Other
// topics keep their v1 entries:
//
//	v2:payments~0-17,orders~:AQIDBAUGBwgJ
//
// A compact id's characters (URL-safe base64) include neither "~" nor ",".

// Topic separators of a several-topic id.
const (
	topicSep = '~' // between a topic's name and its entries
	groupSep = ',' // between topics
)

// ErrTopics reports a several-topic id that is malformed as such: an empty or invalid topic name, a topic
// twice, names after the first not ascending. A topic's entries that are malformed report Parse's errors.
var ErrTopics = errors.New("position: malformed topic list")

// IsTopics says id is a several-topic id, in either form (it is only checked by ParseTopics).
func IsTopics(id string) bool {
	return (strings.HasPrefix(id, Prefix) || strings.HasPrefix(id, PrefixCompact)) && strings.IndexByte(id, topicSep) >= 0
}

// compactMark starts the entries of a topic whose part is compact, in a several-topic id's compact form.
const compactMark = ':'

// TopicPosition is one topic's part of a several-topic id: its position, or, when the id gives it compact,
// that part as a one-topic compact id (Compact, "v2:..."; Pos is then empty), which only a resolver reads.
type TopicPosition struct {
	Topic   string
	Pos     Vector
	Compact string
}

// ParseTopics decodes a several-topic id, in the order the id has them. Each topic's entries follow Parse's
// rules; names must be valid Kafka topic names, each once, ascending after the first. It runs in time linear
// in len(id).
func ParseTopics(id string) ([]TopicPosition, error) {
	if len(id) > MaxLen {
		return nil, syntaxError(id, MaxLen, ErrTooLong)
	}
	compactForm := strings.HasPrefix(id, PrefixCompact)
	if !compactForm && !strings.HasPrefix(id, Prefix) {
		return nil, syntaxError(id, 0, ErrVersion)
	}
	var out []TopicPosition
	compacts := 0
	at := len(Prefix)
	for rest := id[at:]; ; {
		group, more, found := strings.Cut(rest, string(groupSep))
		name, entries, ok := strings.Cut(group, string(topicSep))
		if !ok || !validTopic(name) {
			return nil, syntaxError(id, at, ErrTopics)
		}
		if n := len(out); n > 1 && out[n-1].Topic >= name || n > 0 && out[0].Topic == name {
			return nil, syntaxError(id, at, ErrTopics)
		}
		tp, err := parseGroup(name, entries, compactForm)
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) {
				return nil, syntaxError(id, at+len(name)+1+se.Offset-len(Prefix), se.Err)
			}
			return nil, err
		}
		if tp.Compact != "" {
			compacts++
		}
		out = append(out, tp)
		if !found {
			if compactForm && compacts == 0 {
				return nil, syntaxError(id, 0, ErrTopics) // the compact form has a compact part
			}
			return out, nil
		}
		at += len(group) + 1
		rest = more
	}
}

// parseGroup reads one topic's entries: v1 entries, or in the compact form a compact part (compactMark, then
// what follows "v2:" in a one-topic compact id). Offsets of its errors count from a "v1:" before entries.
func parseGroup(name, entries string, compactForm bool) (TopicPosition, error) {
	if !strings.HasPrefix(entries, string(compactMark)) {
		v, err := parse(Prefix + entries)
		return TopicPosition{Topic: name, Pos: v}, err
	}
	if !compactForm {
		return TopicPosition{}, syntaxError(Prefix+entries, len(Prefix), ErrTopics)
	}
	c := PrefixCompact + entries[1:]
	if _, err := ParseCompact(c); err != nil {
		return TopicPosition{}, syntaxError(Prefix+entries, len(Prefix), ErrSyntax)
	}
	return TopicPosition{Topic: name, Compact: c}, nil
}

// AppendTopics appends the several-topic id of topics (ascending by name, each once) whose parts are the
// one-topic ids in ids: v1 ids, with or without their "v1:" prefix, or compact ones ("v2:..."), which make the
// id compact; a nil id leaves its topic out. Topic first (an index of topics) comes first; -1 keeps name
// order.
func AppendTopics(dst []byte, topics []string, ids [][]byte, first int) []byte {
	prefix := Prefix
	for _, id := range ids {
		if isCompactBytes(id) {
			prefix = PrefixCompact
			break
		}
	}
	dst = append(dst, prefix...)
	sep := false
	group := func(i int) {
		if ids[i] == nil {
			return
		}
		if sep {
			dst = append(dst, groupSep)
		}
		sep = true
		dst = append(dst, topics[i]...)
		dst = append(dst, topicSep)
		id := ids[i]
		switch {
		case isCompactBytes(id):
			dst = append(dst, compactMark)
			id = id[len(PrefixCompact):]
		case len(id) >= len(Prefix) && string(id[:len(Prefix)]) == Prefix:
			id = id[len(Prefix):]
		}
		dst = append(dst, id...)
	}
	if first >= 0 {
		group(first)
	}
	for i := range topics {
		if i != first {
			group(i)
		}
	}
	return dst
}

// AppendTopicPositions appends the several-topic id of tps, as ParseTopics gives them: the first one first, the
// others in name order, each its Compact part when it has one, else its position. It is ParseTopics' inverse.
func AppendTopicPositions(dst []byte, tps []TopicPosition) []byte {
	if len(tps) == 0 {
		return append(dst, Prefix...)
	}
	sorted := slices.SortedFunc(slices.Values(tps), func(a, b TopicPosition) int { return strings.Compare(a.Topic, b.Topic) })
	names := make([]string, len(sorted))
	ids := make([][]byte, len(sorted))
	first := 0
	for i, tp := range sorted {
		names[i] = tp.Topic
		if tp.Topic == tps[0].Topic {
			first = i
		}
		if tp.Compact != "" {
			ids[i] = []byte(tp.Compact)
		} else {
			ids[i], _ = tp.Pos.AppendText(nil)
		}
	}
	return AppendTopics(dst, names, ids, first)
}

// MaxEntryLen is the longest entry of a v1 id, with its "." separator: a partition of up to 10 digits, "-",
// and an offset of up to 19.
const MaxEntryLen = 10 + 1 + 19 + 1

// TopicsLenBound returns the longest v1 several-topic id that topics of these names, with these partition
// counts, can have: each topic's name, its separators and MaxEntryLen per partition. A stream whose bound is
// over MaxLen could write an id ParseTopics refuses, so its resume would fail.
func TopicsLenBound(names []string, partitions []int) int {
	n := len(Prefix)
	for i, name := range names {
		n += len(name) + 2 + partitions[i]*MaxEntryLen
	}
	return n
}

func isCompactBytes(id []byte) bool {
	return len(id) >= len(PrefixCompact) && string(id[:len(PrefixCompact)]) == PrefixCompact
}

// validTopic says name is a valid Kafka topic name: 1 to 249 of [A-Za-z0-9._-], not "." or "..".
func validTopic(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !topicByte(c) {
			return false
		}
	}
	return true
}

// topicByte says c may be in a Kafka topic name.
func topicByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '.' || c == '_' || c == '-'
}
