package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

// block is one SSE block of a raw stream, by field.
type block map[string]string

// blocks splits a raw stream into its whole blocks (the last, unfinished one left out).
func blocks(raw string) []block {
	var out []block
	parts := strings.Split(raw, "\n\n")
	for _, b := range parts[:len(parts)-1] {
		bl := block{}
		for line := range strings.SplitSeq(b, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			if line != "" && line[0] == ':' {
				k, v = ":", line
			}
			bl[k] += v
		}
		out = append(out, bl)
	}
	return out
}

// serveTopics runs ServeTopics on a fresh writer and returns it, the reason channel and the request's cancel.
func serveTopics(t *testing.T, s *Server, ts []TopicStream) (*memWriter, <-chan CloseReason, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := newMemWriter()
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/streams/a,b", nil)
	done := make(chan CloseReason, 1)
	go func() { done <- s.ServeTopics(w, r, ts, nil).Reason }()
	return w, done, cancel
}

// records returns the record blocks of a raw stream (those with data and no event type of the gateway's).
func records(raw string) []block {
	var out []block
	for _, b := range blocks(raw) {
		if _, ok := b["data"]; ok && b["event"] == "" {
			out = append(out, b)
		}
	}
	return out
}

// TestServeTopics: a stream of two topics gets each topic's records with a "topic:" line, and every id is
// both topics' positions; a resume from any of those ids gets exactly what came after it in each topic; the
// retry line and the opening block come once.
func TestServeTopics(t *testing.T) {
	s := NewServer(Config{Logger: discardLog})
	fa, fb := newFeeder(t, 1<<20), newFeeder(t, 1<<20)
	fa.publish("a0", "a1", "a2")
	fb.publish("b0")
	topics := func(p Params) []TopicStream {
		// Given out of order: the id's order is the names'.
		return []TopicStream{
			{Topic: &Topic{Name: "b", Ring: fb.rg}, Params: p, Stats: new(Stats)},
			{Topic: &Topic{Name: "a", Ring: fa.rg}, Params: p, Stats: new(Stats)},
		}
	}
	w, done, cancel := serveTopics(t, s, topics(Params{From: FromEarliest}))
	waitUntil(t, "the first four records", func() bool { return len(records(w.String())) == 4 })
	fb.publish("b1", "b2")
	fa.publish("a3")
	waitUntil(t, "seven records", func() bool { return len(records(w.String())) == 7 })
	cancel()
	<-done

	raw := w.String()
	if n := strings.Count(raw, "retry: "); n != 1 {
		t.Errorf("%d retry lines, want 1:\n%s", n, raw)
	}
	if bs := blocks(raw); bs[0]["id"] != "v1:a~,b~" || bs[0]["retry"] == "" || len(bs[0]) != 2 {
		t.Errorf("opening blocks %q, want the retry line and the id v1:a~,b~ (both topics, nothing seen) first", bs[:3])
	}
	recs := records(raw)
	last := map[string]int{"a": -1, "b": -1}
	for i, r := range recs {
		topic, n := r["topic"], 0
		if _, err := fmt.Sscanf(r["data"], topic+"%d", &n); err != nil || n != last[topic]+1 {
			t.Fatalf("record %d: %q, want topic %s's record %d", i, r, topic, last[topic]+1)
		}
		last[topic] = n
		want := fmt.Sprintf("v1:a~%s,b~%s", entry(last["a"]), entry(last["b"]))
		if topic == "b" {
			want = fmt.Sprintf("v1:b~%s,a~%s", entry(last["b"]), entry(last["a"]))
		}
		if r["id"] != want {
			t.Fatalf("record %d: id %q, want %q", i, r["id"], want)
		}
	}

	// A resume from each id gets exactly the rest, per topic.
	for i, r := range recs {
		w, done, cancel := serveTopics(t, s, topics(Params{LastEventID: r["id"]}))
		want := len(recs) - i - 1
		waitUntil(t, "the rest", func() bool { return len(records(w.String())) >= want })
		cancel()
		<-done
		got := records(w.String())
		if len(got) != want {
			t.Fatalf("resumed from %s: %d records, want %d", r["id"], len(got), want)
		}
		for _, g := range got {
			if !slicesContainsBlock(recs[i+1:], g) {
				t.Fatalf("resumed from %s: %q, which is not one of the records after it", r["id"], g)
			}
		}
	}
}

func entry(off int) string {
	if off < 0 {
		return ""
	}
	return fmt.Sprintf("0-%d", off)
}

func slicesContainsBlock(bs []block, b block) bool {
	for _, x := range bs {
		if x["topic"] == b["topic"] && x["data"] == b["data"] {
			return true
		}
	}
	return false
}

// TestServeTopicsBadID: an id a stream of several topics cannot read is told by each topic in a resync naming
// it, and the stream starts as from= says; one that names a topic not in the stream leaves it out.
func TestServeTopicsBadID(t *testing.T) {
	s := NewServer(Config{Logger: discardLog})
	fa, fb := newFeeder(t, 1<<20), newFeeder(t, 1<<20)
	fa.publish("a0")
	fb.publish("b0")
	for _, tc := range []struct{ id, reason string }{
		{"v1:0-0", ResyncInvalidID},
		{"v1:c~0-0,b~0-0,a~0-0", ResyncInvalidID}, // not in name order after the first
		{"v1:a~0-x", ResyncInvalidID},
	} {
		p := Params{LastEventID: tc.id, From: FromEarliest}
		w, done, cancel := serveTopics(t, s, []TopicStream{
			{Topic: &Topic{Name: "a", Ring: fa.rg}, Params: p, Stats: new(Stats)},
			{Topic: &Topic{Name: "b", Ring: fb.rg}, Params: p, Stats: new(Stats)},
		})
		waitUntil(t, "both records", func() bool { return len(records(w.String())) == 2 })
		cancel()
		<-done
		seen := map[string]bool{}
		for _, b := range blocks(w.String()) {
			if b["event"] != "resync" {
				continue
			}
			var d ResyncData
			if err := json.Unmarshal([]byte(b["data"]), &d); err != nil || d.Reason != tc.reason || d.Topic != b["topic"] {
				t.Errorf("id %q: resync %q (%v), want reason %s naming its topic in data and field", tc.id, b, err, tc.reason)
			}
			seen[d.Topic] = true
		}
		if !seen["a"] || !seen["b"] {
			t.Errorf("id %q: resyncs of %v, want one per topic:\n%s", tc.id, seen, w.String())
		}
	}
}

func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		id      string
		topics  []string
		want    []string
		wantErr bool
	}{
		{"", []string{"a", "b"}, []string{"", ""}, false},
		{"v1:0-5", []string{"a"}, []string{"v1:0-5"}, false},
		{"v1:0-5", []string{"a", "b"}, []string{"", ""}, true},
		{"v1:a~0-5.1-7,c~", []string{"a", "b", "c"}, []string{"v1:0-5.1-7", "", "v1:"}, false},
		{"v1:a~0-5,zz~1-1", []string{"a"}, []string{"v1:0-5"}, false},
		{"v1:c~,a~0-5.1-7", []string{"a", "b", "c"}, []string{"v1:0-5.1-7", "", "v1:"}, false},
		{"v1:a~0-5,a~1-1", []string{"a", "b"}, []string{"", ""}, true},
		{"v1:a b~0-5", []string{"a", "b"}, []string{"", ""}, true},
	} {
		got, err := SplitID(tc.id, tc.topics)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (err != nil) != tc.wantErr {
			t.Errorf("SplitID(%q, %v) = %q, %v; want %q, error %t", tc.id, tc.topics, got, err, tc.want, tc.wantErr)
		}
	}
	// What the mux writes, SplitID reads back.
	id := position.AppendTopics(nil, []string{"a", "b.x", "c"}, [][]byte{[]byte("v1:0-1.3-4"), nil, []byte("v1:")}, -1)
	if string(id) != "v1:a~0-1.3-4,c~" {
		t.Fatalf("AppendTopics = %q", id)
	}
	if got, err := SplitID(string(id), []string{"a", "b.x", "c"}); err != nil || fmt.Sprint(got) != "[v1:0-1.3-4  v1:]" {
		t.Errorf("SplitID(%q) = %q, %v", id, got, err)
	}
}

// discardSink takes every write.
type discardSink struct{ n int }

func (d *discardSink) write(spans [][]byte, _ time.Duration) (int, error) {
	for _, b := range spans {
		d.n += len(b)
	}
	return d.n, nil
}

// BenchmarkMuxFrame: what the mux adds to each record frame of a stream of several topics (the id of every
// topic's position, the topic line), by topic count; partitions per topic as given.
func BenchmarkMuxFrame(b *testing.B) {
	for _, tc := range []struct{ topics, partitions int }{{2, 3}, {4, 12}, {10, 12}} {
		b.Run(fmt.Sprintf("topics=%d/partitions=%d", tc.topics, tc.partitions), func(b *testing.B) {
			ts := make([]TopicStream, tc.topics)
			for i := range ts {
				ts[i].Topic = &Topic{Name: fmt.Sprintf("topic-%02d", i)}
			}
			m := newMux(ts, &discardSink{})
			var pos position.Vector
			for p := range tc.partitions {
				pos.Set(int32(p), 1_000_000+int64(p))
			}
			opening := []byte("id: " + pos.String() + "\n\n")
			for i := range ts {
				_, _ = m.write(i, 0, [][]byte{opening}, time.Second)
			}
			data := strings.Repeat("x", 200)
			frames := make([][]byte, tc.topics)
			for i := range frames {
				pos.Set(int32(i%tc.partitions), 2_000_000+int64(i))
				frames[i] = []byte("id: " + pos.String() + "\ndata: " + data + "\n\n")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := i % tc.topics
				_, _ = m.write(k, 0, frames[k:k+1], time.Second)
			}
		})
	}
}

// TestServeTopicsTokenExpiry: a stream of several topics whose token expires says so once, token-expiring
// then token-expired with the id of every topic, and ends as token_expired in each topic's counts, whichever
// topic's stream saw the moment first.
func TestServeTopicsTokenExpiry(t *testing.T) {
	s := NewServer(Config{Logger: discardLog})
	fa, fb := newFeeder(t, 1<<20), newFeeder(t, 1<<20)
	fa.publish("a0")
	fb.publish("b0", "b1")
	p := Params{From: FromEarliest, Expires: time.Now().Add(400 * time.Millisecond), ExpiryNotice: 200 * time.Millisecond}
	sa, sb := new(Stats), new(Stats)
	w, done, cancel := serveTopics(t, s, []TopicStream{
		{Topic: &Topic{Name: "a", Ring: fa.rg}, Params: p, Stats: sa},
		{Topic: &Topic{Name: "b", Ring: fb.rg}, Params: p, Stats: sb},
	})
	defer cancel()
	select {
	case r := <-done:
		if r != ReasonTokenExpired {
			t.Fatalf("the stream ended as %v, want token_expired", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end at its token's expiry")
	}
	var token []block
	for _, b := range blocks(w.String()) {
		if strings.HasPrefix(b["event"], "token-") {
			token = append(token, b)
		}
	}
	if len(token) != 2 || token[0]["event"] != EventTokenExpiring || token[1]["event"] != EventTokenExpired ||
		token[1]["id"] != "v1:a~0-0,b~0-1" || token[1]["topic"] != "" {
		t.Fatalf("token frames %q, want one expiring and one expired with both topics' position, naming no topic", token)
	}
	for name, st := range map[string]*Stats{"a": sa, "b": sb} {
		if st.Closed[ReasonTokenExpired].Load() != 1 || st.Open.Load() != 0 {
			t.Errorf("topic %s: closed %v, open %d; want one token_expired", name, st.Closed[ReasonTokenExpired].Load(), st.Open.Load())
		}
	}
}

// TestServeTopicsLeaving: a stream of several topics that starts while the server is leaving says where it is,
// every topic's position in one id, and ends, so that its client resumes on another pod.
func TestServeTopicsLeaving(t *testing.T) {
	s := NewServer(Config{Logger: discardLog})
	s.Leave()
	fa, fb := newFeeder(t, 1<<20), newFeeder(t, 1<<20)
	fa.publish("a0", "a1")
	fb.publish("b0")
	p := Params{LastEventID: "v1:b~0-0,a~0-0"}
	w, done, cancel := serveTopics(t, s, []TopicStream{
		{Topic: &Topic{Name: "a", Ring: fa.rg}, Params: p, Stats: new(Stats)},
		{Topic: &Topic{Name: "b", Ring: fb.rg}, Params: p, Stats: new(Stats)},
	})
	defer cancel()
	select {
	case r := <-done:
		if r != ReasonShutdown {
			t.Fatalf("ended as %v, want shutdown", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a leaving server's stream did not end")
	}
	bs := blocks(w.String())
	if len(bs) == 0 || bs[len(bs)-1]["id"] != "v1:a~0-0,b~0-0" || len(records(w.String())) != 0 || w.header.Get("Connection") != "close" {
		t.Fatalf("stream %q, want only the client's position, in name order, and Connection: close", w.String())
	}
}
