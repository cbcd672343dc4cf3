package stream

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestParseTopicParams: a parameter given for one topic replaces the one for all, for that topic only; one
// naming a topic the stream lacks, or malformed, is an error naming it as the query did.
func TestParseTopicParams(t *testing.T) {
	q, _ := url.ParseQuery("key=k1&key.orders=o1&key.orders=o2&from.prices=snapshot&filter.orders=value.n%3E1&heartbeat=0&last_event_id=v1:orders~0-1")
	ps, err := ParseTopicParams(q, http.Header{}, 0, []string{"orders", "prices"})
	if err != nil {
		t.Fatal(err)
	}
	orders, prices := ps[0], ps[1]
	if len(orders.Keys) != 2 || !orders.Keys["o1"] || !orders.Keys["o2"] || orders.Filter == nil || orders.From != FromLatest {
		t.Errorf("orders: keys %v, filter %v, from %q; want o1 and o2, a filter, latest", orders.Keys, orders.Filter, orders.From)
	}
	if len(prices.Keys) != 1 || !prices.Keys["k1"] || prices.Filter != nil || prices.From != FromSnapshot {
		t.Errorf("prices: keys %v, filter %v, from %q; want k1, none, snapshot", prices.Keys, prices.Filter, prices.From)
	}
	for _, p := range ps {
		if p.LastEventID != "v1:orders~0-1" || p.Heartbeat != 0 {
			t.Errorf("shared parameters: id %q heartbeat %v", p.LastEventID, p.Heartbeat)
		}
	}
	for query, param := range map[string]string{
		"key.payments=x":             "key.payments",
		"conflate.orders=1h":         "conflate.orders",
		"filter.prices=value.%3D%3D": "filter.prices",
		"conflate=1h":                "conflate",
	} {
		q, _ := url.ParseQuery(query)
		_, err := ParseTopicParams(q, http.Header{}, 0, []string{"orders", "prices"})
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != param {
			t.Errorf("%s: %v, want a ParamError naming %s", query, err, param)
		}
	}
}

func TestTopicList(t *testing.T) {
	q, _ := url.ParseQuery("topic=c&topic=d")
	if got, err := TopicList("a,b", q, 4); err != nil || strings.Join(got, " ") != "a b c d" {
		t.Errorf("TopicList = %q, %v", got, err)
	}
	for _, tc := range []struct {
		path, query string
	}{{"", ""}, {"a,a", ""}, {"a,", ""}, {"a", "topic=a"}, {"a,b,c", "topic=d&topic=e"}} {
		q, _ := url.ParseQuery(tc.query)
		var pe *ParamError
		if _, err := TopicList(tc.path, q, 4); !errors.As(err, &pe) || pe.Param != "topic" {
			t.Errorf("TopicList(%q, %q) = %v, want a ParamError naming topic", tc.path, tc.query, err)
		}
	}
}

// TestCheckTopicsID: a stream of several topics whose id could pass position.MaxLen (1,200 partitions
// together here) is refused before it starts, naming the topic parameter: the gateway would write ids that
// no pod resumes from. One topic, or topics of fewer partitions, pass.
func TestCheckTopicsID(t *testing.T) {
	topic := func(name string, n int) *Topic {
		parts := make([]int32, n)
		for i := range parts {
			parts[i] = int32(i)
		}
		return &Topic{Name: name, Partitions: func() []int32 { return parts }}
	}
	var pe *ParamError
	if err := CheckTopicsID([]*Topic{topic("orders", 600), topic("payments", 600)}); !errors.As(err, &pe) || pe.Param != "topic" || !strings.Contains(err.Error(), "1200 partitions") {
		t.Errorf("two topics of 600 partitions: %v, want a ParamError naming topic", err)
	}
	for _, ts := range [][]*Topic{{topic("orders", 600), topic("payments", 400)}, {topic("orders", 5000)}} {
		if err := CheckTopicsID(ts); err != nil {
			t.Errorf("%d topics: %v", len(ts), err)
		}
	}
}
