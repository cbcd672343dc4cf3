package stream

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

// TopicParamNames are the query parameters that may be given for one topic of a stream, as
// "<name>.<topic>=" ("key.orders=o-1"): for that topic they replace the one given for all ("key=").
var TopicParamNames = []string{"key", "event", "filter", "fields", "conflate", "from"}

// ParseTopicParams reads the parameters of a stream of topics (one or several) from the request's query and
// headers: for each topic, ParseParams of the query in which that topic's own parameters (TopicParamNames)
// replace the ones given for all. A parameter for a topic the stream does not have, or a malformed one, is a
// *ParamError naming the parameter as the query gave it.
func ParseTopicParams(q url.Values, h http.Header, defaultHeartbeat time.Duration, topics []string) ([]Params, error) {
	own := map[string]url.Values{} // a topic's own parameters, by the names ParseParams reads
	for name, vs := range q {
		param, topic, ok := strings.Cut(name, ".")
		if !ok || !slices.Contains(TopicParamNames, param) {
			continue
		}
		if !slices.Contains(topics, topic) {
			return nil, &ParamError{Param: name, Msg: "names topic " + topic + ", which is not one of this stream's"}
		}
		if own[topic] == nil {
			own[topic] = url.Values{}
		}
		own[topic][param] = vs
	}
	out := make([]Params, len(topics))
	for i, topic := range topics {
		tq := q
		if own[topic] != nil {
			tq = maps.Clone(q)
			maps.Copy(tq, own[topic])
		}
		p, err := ParseParams(tq, h, defaultHeartbeat)
		if err != nil {
			var pe *ParamError
			if errors.As(err, &pe) && own[topic][pe.Param] != nil {
				return nil, &ParamError{Param: pe.Param + "." + topic, Msg: pe.Msg}
			}
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// CheckTopicsID refuses a stream of several topics whose id could be longer than position.MaxLen (their
// partitions together, about 1,000 of them): the gateway would write ids that it, and any pod, then refuses to
// resume from. The error names the topic parameter; nil for a single topic.
func CheckTopicsID(ts []*Topic) error {
	if len(ts) < 2 {
		return nil
	}
	names, parts := make([]string, len(ts)), make([]int, len(ts))
	total := 0
	for i, t := range ts {
		names[i] = t.Name
		if t.Partitions != nil {
			parts[i] = len(t.Partitions())
		}
		total += parts[i]
	}
	if n := position.TopicsLenBound(names, parts); n > position.MaxLen {
		return &ParamError{Param: "topic", Msg: fmt.Sprintf("these %d topics have %d partitions together: their id could be %d bytes, more than the %d an id may have; ask for fewer topics in one stream", len(ts), total, n, position.MaxLen)}
	}
	return nil
}

// TopicList reads the topics a stream request names: the path's list ("orders,payments"), then every topic
// query parameter. Each may come once; there must be one at least and at most limit (0 for no limit).
func TopicList(path string, q url.Values, limit int) ([]string, error) {
	var names []string
	if path != "" {
		names = strings.Split(path, ",")
	}
	names = append(names, q["topic"]...)
	switch {
	case len(names) == 0:
		return nil, &ParamError{Param: "topic", Msg: "no topic: name one in the path (/streams/orders) or in topic="}
	case limit > 0 && len(names) > limit:
		return nil, &ParamError{Param: "topic", Msg: fmt.Sprintf("%d topics, more than the %d a stream may have (max-topics-per-stream)", len(names), limit)}
	}
	seen := map[string]bool{}
	for _, n := range names {
		switch {
		case n == "":
			return nil, &ParamError{Param: "topic", Msg: "an empty topic name"}
		case seen[n]:
			return nil, &ParamError{Param: "topic", Msg: "topic " + n + " named twice"}
		}
		seen[n] = true
	}
	return names, nil
}
