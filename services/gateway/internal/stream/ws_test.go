package stream

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"testing"
	"unicode/utf8"
)

// TestWSMessages: every kind of frame a stream writes becomes its WebSocket message: the opening block, a
// record with its meta line (JSON, text, bytes; a key that is not UTF-8), a gateway event, a later position;
// and as CloudEvents.
func TestWSMessages(t *testing.T) {
	cases := []struct {
		name, format, frame, want string
		opened                    bool
	}{
		{"opening", "json", "retry: 3000\nid: v1:0-4\n\n", `{"event":"open","id":"v1:0-4","retry":3000}`, false},
		{"position", "json", "id: v1:\n\n", `{"event":"position","id":"v1:"}`, true},
		{
			"json record", "json", "id: v1:0-5\n::m 0 5 YQ==\ndata: {\"n\": 1}\n\n",
			`{"data":{"n":1},"event":"message","id":"v1:0-5","key":"a","offset":5,"partition":0}`, true,
		},
		{
			"text record, two lines", "json", "id: v1:1-9\n::m 1 9 -\nevent: note\ndata: one\ndata: two\n\n",
			`{"data":"one\ntwo","event":"note","id":"v1:1-9","offset":9,"partition":1}`, true,
		},
		{
			"binary key", "json", "id: v1:0-6\n::m 0 6 /w==\ndata: base64:AAE=\n\n",
			`{"data":"base64:AAE=","event":"message","id":"v1:0-6","key":"base64:/w==","offset":6,"partition":0}`, true,
		},
		{
			"gateway event", "json", "id: v1:0-6\nevent: resync\ndata: {\"reason\":\"retention\"}\n\n",
			`{"data":{"reason":"retention"},"event":"resync","id":"v1:0-6"}`, true,
		},
		{
			"cloudevent", "cloudevents", "id: v1:0-5\n::m 0 5 YQ==\nevent: order.paid\ndata: {\"n\":1}\n\n",
			`{"data":{"n":1},"datacontenttype":"application/json","id":"v1:0-5","kafkaoffset":5,"kafkapartition":0,"source":"/topics/t","specversion":"1.0","subject":"a","type":"order.paid"}`, true,
		},
		{
			"escapes", "json", "id: v1:0-8\n::m 0 8 PGE+\nevent: a\"b\ndata: tab\there <b>\n\n",
			`{"data":"tab\there \u003cb\u003e","event":"a\"b","id":"v1:0-8","key":"\u003ca\u003e","offset":8,"partition":0}`, true,
		},
		{
			"undecodable value", "json", "id: v1:0-9\n::m 0 9 -\nevent: order\nundecodable: unknown-schema\ndata: base64:AAAAAAc=\n\n",
			`{"data":"base64:AAAAAAc=","event":"order","id":"v1:0-9","offset":9,"partition":0,"undecodable":"unknown-schema"}`, true,
		},
		{
			"cloudevent undecodable", "cloudevents", "id: v1:0-9\n::m 0 9 -\nundecodable: not-framed\ndata: plain\n\n",
			`{"data":"plain","datacontenttype":"text/plain","id":"v1:0-9","kafkaoffset":9,"kafkapartition":0,"source":"/topics/t","specversion":"1.0","type":"message","undecodable":"not-framed"}`, true,
		},
		{
			"cloudevent text", "cloudevents", "id: v1:0-7\n::m 0 7 -\ndata: hi\n\n",
			`{"data":"hi","datacontenttype":"text/plain","id":"v1:0-7","kafkaoffset":7,"kafkapartition":0,"source":"/topics/t","specversion":"1.0","type":"message"}`, true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &wsSink{o: WSOptions{Format: tc.format}, topic: "t", opened: tc.opened, openSent: tc.opened}
			got := s.appendMessage(nil, parseWSFrame([]byte(tc.frame)))
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("message %s: %v", got, err)
			}
			_ = json.Unmarshal([]byte(tc.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) || string(got) != tc.want {
				t.Errorf("message\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if f := parseWSFrame([]byte(": keep-alive\n")); f.hasData || f.id != nil || !f.comment {
		t.Errorf("a keep-alive parses as %+v", f)
	}
}

// TestWSAcks: an acknowledgement is cumulative; one of an id that is not waiting is refused.
func TestWSAcks(t *testing.T) {
	s := &wsSink{room: make(chan struct{}, 1)}
	for _, id := range []string{"v1:0-1", "v1:0-1", "v1:0-2", "v1:0-3"} {
		s.inflight = append(s.inflight, idHash([]byte(id)))
	}
	if !s.ack("v1:0-1") || len(s.inflight) != 2 {
		t.Fatalf("after ack of v1:0-1: %v", s.inflight)
	}
	if s.ack("v1:0-1") || s.ack("v1:0-9") {
		t.Fatal("an acknowledgement of an id not waiting was taken")
	}
	if !s.ack("v1:0-3") || len(s.inflight) != 0 {
		t.Fatalf("after ack of v1:0-3: %v", s.inflight)
	}
}

// TestParseWSOptions: the WebSocket parameters and their errors.
func TestParseWSOptions(t *testing.T) {
	for _, tc := range []struct {
		q     string
		want  WSOptions
		param string
	}{
		{"", WSOptions{Format: "json", MaxInFlight: 100}, ""},
		{"ack=1&max_in_flight=5&format=cloudevents&hello=true", WSOptions{Format: "cloudevents", Acks: true, MaxInFlight: 5, Hello: true}, ""},
		{"max_in_flight=5", WSOptions{}, "max_in_flight"},
		{"ack=1&max_in_flight=0", WSOptions{}, "max_in_flight"},
		{"ack=yes", WSOptions{}, "ack"},
		{"format=xml", WSOptions{}, "format"},
		{"publish=1&publish_results=1", WSOptions{Format: "json", MaxInFlight: 100, Publish: true, Results: true}, ""},
		{"publish_results=1", WSOptions{}, "publish_results"},
	} {
		q, _ := url.ParseQuery(tc.q)
		o, err := ParseWSOptions(q)
		if tc.param != "" {
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != tc.param {
				t.Errorf("%q: %v, want an error of %s", tc.q, err, tc.param)
			}
			continue
		}
		if err != nil || o.Format != tc.want.Format || o.Acks != tc.want.Acks || o.MaxInFlight != tc.want.MaxInFlight ||
			o.Hello != tc.want.Hello || o.Publish != tc.want.Publish || o.Results != tc.want.Results {
			t.Errorf("%q: %+v, %v; want %+v", tc.q, o, err, tc.want)
		}
	}
}

// TestWSMessageInvalidUTF8: a JSON value whose strings hold bytes that are not UTF-8 (encoding/json's Valid
// takes it) goes out as UTF-8, each such byte a U+FFFD, as in a value that is not JSON: a text message that is
// not UTF-8 makes a browser fail the socket, and its resume fails on the same record again.
func TestWSMessageInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"json", "{\"a\": \"x\xffy\xc3\"}", `{"a":"x` + "\uFFFD" + "y\uFFFD" + `"}`},
		{"json, compact", "[\"\xed\xa0\x80\"]", `["` + "\uFFFD\uFFFD\uFFFD" + `"]`},
		{"text", "x\xffy", `"x\ufffdy"`},
		{"valid", `{"a":"é"}`, `{"a":"é"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &wsSink{o: WSOptions{Format: "json"}, topic: "t", opened: true, openSent: true}
			got := s.appendMessage(nil, parseWSFrame([]byte("id: v1:0-5\n::m 0 5 -\ndata: "+tc.data+"\n\n")))
			if !utf8.Valid(got) {
				t.Fatalf("message %q is not UTF-8", got)
			}
			var m struct{ Data json.RawMessage }
			if err := json.Unmarshal(got, &m); err != nil || string(m.Data) != tc.want {
				t.Errorf("data %s (%v), want %s", m.Data, err, tc.want)
			}
		})
	}
}

// TestCutUTF8: a close reason is cut at a character's start, never inside one.
func TestCutUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"ab\u00e9", 3, "ab"},      // é is 2 bytes: cutting at 3 would split it
		{"a\u20acb", 3, "a"},       // EUR is 3 bytes
		{"a\u20acb", 4, "a\u20ac"}, // it fits whole
	} {
		if got := cutUTF8(tc.s, tc.n); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("cutUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestWSOpenAfterResync: a stream whose id is invalid starts with a resync (invalid-id), then its open message,
// which carries the retry, as every stream's does; later positions are position messages. Before, the resync
// took the retry and the open message never came (a position message in its place).
func TestWSOpenAfterResync(t *testing.T) {
	s := &wsSink{o: WSOptions{Format: "json"}, topic: "t"}
	var got []string
	for _, f := range []string{
		"retry: 3000\nid: v1:\nevent: resync\ndata: {\"reason\":\"invalid-id\"}\n\n",
		"id: v1:\n\n",
		"id: v1:0-1\n\n",
	} {
		got = append(got, string(s.appendMessage(nil, parseWSFrame([]byte(f)))))
	}
	want := []string{
		`{"data":{"reason":"invalid-id"},"event":"resync","id":"v1:"}`,
		`{"event":"open","id":"v1:","retry":3000}`,
		`{"event":"position","id":"v1:0-1"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages\n got %q\nwant %q", got, want)
	}
}
