package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// rawEvent is a block of a stream of several topics, with its topic line (which an SSE parser drops).
type rawEvent struct {
	id, topic, event, data string
}

// rawStream reads the blocks of a stream, with the fields the tests look at.
type rawStream struct {
	br   *bufio.Reader
	stop func()
}

func openTopics(t *testing.T, ctx context.Context, u string, h http.Header) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if h != nil {
		req.Header = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET %s: %v %v", u, resp, err)
	}
	return &rawStream{br: bufio.NewReader(resp.Body), stop: func() { cancel(); _ = resp.Body.Close() }}
}

// next returns the next block that has an id or data (keep-alives and the retry line alone are skipped).
func (s *rawStream) next(t *testing.T) rawEvent {
	t.Helper()
	for {
		var ev rawEvent
		for {
			line, err := s.br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			line = strings.TrimSuffix(line, "\n")
			if line == "" {
				break
			}
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				ev.id = v
			case "topic":
				ev.topic = v
			case "event":
				ev.event = v
			case "data":
				ev.data = v
			}
		}
		if ev.id != "" || ev.data != "" {
			return ev
		}
	}
}

// topicTrack checks what a client of a stream of several topics gets against what was produced: each id
// moves one partition of one topic by exactly one offset (the topic of its topic line), whose record's value
// is the event's data.
type topicTrack struct {
	pos     map[string]position.Vector
	records map[string]map[int32]map[int64]*kgo.Record
	topics  int
	seen    int
}

// record returns a record the client got, reading the topic again when it is not known yet (records keep
// coming while the test reads).
func (tr *topicTrack) record(t *testing.T, topic string, p int32, o int64) *kgo.Record {
	t.Helper()
	if rec := tr.records[topic][p][o]; rec != nil {
		return rec
	}
	tr.records[topic] = byOffset(kafkatest.ReadAll(t, topic))
	return tr.records[topic][p][o]
}

func (tr *topicTrack) check(t *testing.T, ev rawEvent) {
	t.Helper()
	tps, err := position.ParseTopics(ev.id)
	if err != nil {
		t.Fatalf("event %+v: id: %v", ev, err)
	}
	moved := 0
	for _, tp := range tps {
		old := tr.pos[tp.Topic]
		for j := range tp.Pos.Len() {
			e := tp.Pos.At(j)
			was, ok := old.Offset(e.Partition)
			if ok && was == e.Offset {
				continue
			}
			moved++
			if want := map[bool]int64{true: was + 1, false: 0}[ok]; e.Offset != want || tp.Topic != ev.topic {
				t.Fatalf("event %+v: %s partition %d at %d, want %d of topic %s", ev, tp.Topic, e.Partition, e.Offset, want, ev.topic)
			}
			if rec := tr.record(t, tp.Topic, e.Partition, e.Offset); rec == nil || string(rec.Value) != ev.data {
				t.Fatalf("event %+v: %s/%d/%d is %v", ev, tp.Topic, e.Partition, e.Offset, rec)
			}
		}
		tr.pos[tp.Topic] = tp.Pos
	}
	if moved != 1 || len(tps) != tr.topics || tps[0].Topic != ev.topic {
		t.Fatalf("event %+v: %d partitions moved, %d topics in the id, %s first; want 1, %d and its own topic", ev, moved, len(tps), tps[0].Topic, tr.topics)
	}
	tr.seen++
}

// TestTopicsResume: a stream of two topics read by a client that drops at random moments and resumes on the
// other of two gateways (one serving from its ring, one with no prefill, from Kafka), while records keep
// coming: every record of both topics exactly once, in order per partition, each id naming both topics.
func TestTopicsResume(t *testing.T) {
	ta, tb := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 3, nil)
	ca := kafkatest.Client(t, kgo.DefaultProduceTopic(ta))
	cb := kafkatest.Client(t, kgo.DefaultProduceTopic(tb))
	const n = 300
	produce := func(cl *kgo.Client, topic string, from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, `{"topic":%q,"n":%d}`, topic, i)})
		}
		// Also from the producing goroutine: Error, not Fatal.
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Errorf("produce: %v", err)
		}
	}
	produce(ca, ta, 0, n/2)
	produce(cb, tb, 0, n/2)
	topics := []string{ta, tb}
	ring := startGateway(t, topics, func(c *Config) { c.RingBytes = 64 << 10 })
	kafka := startGateway(t, topics, func(c *Config) { c.Prefill = 0 })
	ring.waitReady(t)
	kafka.waitReady(t)
	go func() {
		for i := n / 2; i < n; i += 10 {
			produce(ca, ta, i, i+10)
			produce(cb, tb, i, i+10)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	tr := &topicTrack{pos: map[string]position.Vector{}, records: map[string]map[int32]map[int64]*kgo.Record{}, topics: 2}
	rng := rand.New(rand.NewPCG(7, 21)) //nolint:gosec // a test's reproducible randomness
	id := ""
	for conns := 0; tr.seen < 2*n; conns++ {
		if conns > 500 {
			t.Fatalf("%d connections and %d of %d records", conns, tr.seen, 2*n)
		}
		g := []*gateway{ring, kafka}[conns%2]
		s := openTopics(t, ctx, g.url+"/streams/"+ta+","+tb+"?from=earliest&last_event_id="+url.QueryEscape(id), nil)
		for range 1 + rng.IntN(60) {
			if tr.seen == 2*n {
				break
			}
			ev := s.next(t)
			if ev.data == "" { // the opening block
				id = ev.id
				continue
			}
			tr.check(t, ev)
			id = ev.id
		}
		s.stop()
	}
}

// TestTopicsRetention: retention that passed one topic's position is that topic's resync, naming it (and the
// topic continues from its tail, as a one-topic stream does); the other topic resumes exactly where it was.
func TestTopicsRetention(t *testing.T) {
	ta, tb := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	for _, topic := range []string{ta, tb} {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for i := range 50 {
			kafkatest.Produce(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "%s %d", topic, i)})
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: ta, Partition: 0, At: 30})
	if _, err := kafkatest.Admin(t).DeleteRecords(kafkatest.Context(t), os); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, []string{ta, tb}, func(c *Config) { c.Prefill = 0 })
	g.waitReady(t)
	first, second := ta, tb
	if first > second {
		first, second = second, first
	}
	id := "v1:" + first + "~0-10," + second + "~0-10"
	s := openTopics(t, kafkatest.Context(t), g.url+"/streams/"+ta+","+tb+"?last_event_id="+url.QueryEscape(id), nil)
	defer s.stop()
	next := map[string]int{ta: 11, tb: 11}
	resynced := false
	for next[ta] < 50 || next[tb] < 50 {
		ev := s.next(t)
		switch {
		case ev.event == "resync":
			var d stream.ResyncData
			if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Topic != ta || ev.topic != ta ||
				d.Reason != "retention" || len(d.Partitions) != 1 || d.Partitions[0].LowWatermark != 30 || d.Partitions[0].ResumesAt != 50 {
				t.Fatalf("resync %+v (%v), want topic %s's retention at 30, resuming at its tail, 50", ev, err, ta)
			}
			resynced = true
			next[ta] = 50
		case ev.data != "":
			if want := fmt.Sprintf("%s %d", ev.topic, next[ev.topic]); ev.data != want {
				t.Fatalf("event %+v, want %q", ev, want)
			}
			next[ev.topic]++
		}
	}
	if !resynced {
		t.Error("no resync for the topic retention passed")
	}
}

// TestTopicsRequests: a stream of several topics is refused as a whole, before it starts, when one of its
// topics is unknown, named twice, beyond the limit, or not allowed by the token; a parameter for one topic
// applies to it alone; a token's keys narrow every topic that looks at tokens.
func TestTopicsRequests(t *testing.T) {
	ta, tb, tc := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	for _, topic := range []string{ta, tb} {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for i := range 20 {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, "%s k%d %d", topic, i%4, i)})
		}
	}
	g := startGateway(t, []string{ta, tb, tc}, withAuth(t, func(c *Config) {
		c.Auth.TopicModes = map[string]string{ta: "required", tb: "none", tc: "required"}
		c.Limits.MaxTopicsPerStream = 2
	}))
	g.waitReady(t)
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{ta}, "keys": []string{"k1"}}, nil)
	auth := bearerHeader(tok)
	for _, tcase := range []struct {
		path   string
		h      http.Header
		status int
		says   string
	}{
		{"/streams/" + ta + ",nope", auth, http.StatusNotFound, "nope"},
		{"/streams/" + tb + "," + tb, nil, http.StatusBadRequest, "twice"},
		{"/streams/" + ta + "," + tb + "?topic=" + tc, auth, http.StatusBadRequest, "max-topics-per-stream"},
		{"/streams/" + ta + "," + tb, nil, http.StatusUnauthorized, ""},
		{"/streams/" + tb + "," + tc, auth, http.StatusForbidden, tc},
		{"/streams/" + ta + "," + tb + "?key.other=x", auth, http.StatusBadRequest, "key.other"},
		{"/streams?heartbeat=0", nil, http.StatusBadRequest, "topic"},
	} {
		resp, body := request(t, g.url+tcase.path, tcase.h)
		if resp.StatusCode != tcase.status || !strings.Contains(body, tcase.says) {
			t.Errorf("%s: %d %s, want %d naming %q", tcase.path, resp.StatusCode, body, tcase.status, tcase.says)
		}
	}
	// The token's keys narrow ta (k1 only); tb looks at no token, and its own key parameter keeps k2.
	s := openTopics(t, kafkatest.Context(t), g.url+"/streams?topic="+ta+"&topic="+tb+"&from=earliest&key."+tb+"=k2", auth)
	defer s.stop()
	got := map[string]int{}
	for got[ta]+got[tb] < 10 {
		ev := s.next(t)
		if ev.data == "" {
			continue
		}
		want := map[string]string{ta: " k1 ", tb: " k2 "}[ev.topic]
		if !strings.HasPrefix(ev.data, ev.topic+want) {
			t.Fatalf("event %+v: want a record of key%s", ev, want)
		}
		got[ev.topic]++
	}
}

// TestTopicsWebSocket: /ws/a,b carries a stream of several topics: each message names its topic and its
// partition and offset, and its id (the topic first) resumes both topics exactly; publish=1 is refused.
func TestTopicsWebSocket(t *testing.T) {
	ta, tb := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 2, nil)
	for _, topic := range []string{ta, tb} {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for i := range 10 {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"topic":%q,"n":%d}`, topic, i)})
		}
	}
	g := startGateway(t, []string{ta, tb}, nil)
	g.waitReady(t)
	ctx := kafkatest.Context(t)
	read := func(path string, n int) []wsMessage {
		ws := dialWS(t, ctx, g, path, nil)
		var out []wsMessage
		for len(out) < n {
			if m := nextWS(t, ws); m.Event == "message" {
				out = append(out, m)
			}
		}
		_ = ws.CloseNow()
		return out
	}
	all := read("/ws/"+ta+","+tb+"?from=earliest", 20)
	for _, m := range all {
		var v struct {
			Topic string
			N     int
		}
		tps, err := position.ParseTopics(m.ID)
		if err != nil || json.Unmarshal(m.Data, &v) != nil || v.Topic != m.Topic || tps[0].Topic != m.Topic || m.Partition == nil || m.Offset == nil {
			t.Fatalf("message %+v (%v): want its topic in the field and first in the id, with partition and offset", m, err)
		}
		if o, ok := tps[0].Pos.Offset(*m.Partition); !ok || o != *m.Offset {
			t.Fatalf("message %+v: its id does not end at its own offset", m)
		}
	}
	rest := read("/ws/"+ta+","+tb+"?last_event_id="+url.QueryEscape(all[7].ID), 12)
	for i, m := range rest {
		if !slices.ContainsFunc(all[8:], func(a wsMessage) bool { return string(a.Data) == string(m.Data) }) {
			t.Fatalf("resumed message %d: %s, not one of those after the 8th", i, m.Data)
		}
	}
	resp, body := request(t, g.url+"/ws/"+ta+","+tb+"?publish=1", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "publish") {
		t.Errorf("publish=1 on two topics: %d %s, want a 400 naming publish", resp.StatusCode, body)
	}
}

// TestTopicsPerTopicScope: a token's per_topic entries narrow each topic of a stream of several topics on their
// own: one topic gets only the entry's keys, the other only what the entry's filter passes; a query asking one
// topic for a key its entry does not allow is refused as a whole.
func TestTopicsPerTopicScope(t *testing.T) {
	ta, tb := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 1, nil)
	for _, topic := range []string{ta, tb} {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for i := range 20 {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, `{"topic":%q,"key":"k%d","n":%d}`, topic, i%4, i)})
		}
	}
	g := startGateway(t, []string{ta, tb}, withAuth(t, func(c *Config) {
		c.Auth.TopicModes = map[string]string{ta: "required", tb: "required"}
	}))
	g.waitReady(t)
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{
		"topics": []string{ta, tb}, "keys": []string{"k1", "k2", "k3"},
		"per_topic": map[string]any{ta: map[string]any{"keys": []string{"k1", "k0"}}, tb: map[string]any{"filter": "value.n < 10"}},
	}, nil)
	auth := bearerHeader(tok)
	if resp, body := request(t, g.url+"/streams/"+ta+","+tb+"?key."+ta+"=k2", auth); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "insufficient_scope") {
		t.Errorf("key.%s=k2: %d %s, want 403: the token allows %s only k1", ta, resp.StatusCode, body, ta)
	}
	s := openTopics(t, kafkatest.Context(t), g.url+"/streams/"+ta+","+tb+"?from=earliest&key."+tb+"=k2&key."+tb+"=k3", auth)
	defer s.stop()
	// ta: k1 only (k0 is not in the scope-wide keys), n 1, 5, 9, 13, 17; tb: k2 and k3 below 10: n 2, 3, 6, 7.
	want := map[string][]int{ta: {1, 5, 9, 13, 17}, tb: {2, 3, 6, 7}}
	got := map[string][]int{}
	for len(got[ta])+len(got[tb]) < 9 {
		ev := s.next(t)
		if ev.data == "" {
			continue
		}
		var v struct {
			Topic, Key string
			N          int
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil || v.Topic != ev.topic {
			t.Fatalf("event %+v: %v", ev, err)
		}
		got[ev.topic] = append(got[ev.topic], v.N)
	}
	slices.Sort(got[ta]) // two partitions: in order within each only
	if !slices.Equal(got[ta], want[ta]) || !slices.Equal(got[tb], want[tb]) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// topicsAsV1 returns a several-topic id with its compact parts resolved through r: the v1 id of the same
// position, which the test's checks read.
func topicsAsV1(t *testing.T, r *checkpoint.Resolver, id string) string {
	t.Helper()
	tps, err := position.ParseTopics(id)
	if err != nil {
		t.Fatalf("id %q: %v", id, err)
	}
	for i, tp := range tps {
		if tp.Compact != "" {
			if tps[i].Pos, err = r.Resolve(t.Context(), tp.Compact, tp.Topic, [16]byte{}); err != nil {
				t.Fatalf("id %q: resolving %s's part: %v", id, tp.Topic, err)
			}
			tps[i].Compact = ""
		}
	}
	return string(position.AppendTopicPositions(nil, tps))
}

// TestTopicsCompactIDs: with id-format v2, a stream of several topics says a topic's part compact when that
// topic is level with its ring (the id is then "v2:", the part "~:" and the ring's compact id); every id
// resolves to the exact position, and a compact one resumes the stream exactly on another gateway.
func TestTopicsCompactIDs(t *testing.T) {
	const parts = 16
	ta, tb, pt := kafkatest.NewTopic(t, parts, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	a := startGateway(t, []string{ta, tb}, func(c *Config) { c.IDFormat, c.PositionTopic = "v2", pt })
	b := startGateway(t, []string{ta, tb}, func(c *Config) { c.PositionTopic = pt })
	a.waitReady(t)
	b.waitReady(t)
	res := testResolver(t, pt)
	cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	s := openTopics(t, ctx, a.url+"/streams/"+ta+","+tb, nil)
	defer s.stop()
	opening := s.next(t)
	const n = 300
	go func() {
		for i := range n {
			rec := &kgo.Record{Topic: ta, Partition: int32(i % parts), Value: fmt.Appendf(nil, "a %d", i)}
			if i%4 == 3 {
				rec = &kgo.Record{Topic: tb, Value: fmt.Appendf(nil, "b %d", i)}
			}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			if i%5 == 4 {
				time.Sleep(10 * time.Millisecond) // a trickle: checkpoints are acknowledged meanwhile
			}
		}
	}()
	newTrack := func(id string) *topicTrack {
		tr := &topicTrack{pos: map[string]position.Vector{}, records: map[string]map[int32]map[int64]*kgo.Record{}, topics: 2}
		tps, err := position.ParseTopics(topicsAsV1(t, res, id))
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range tps {
			tr.pos[tp.Topic] = tp.Pos
		}
		return tr
	}
	tr := newTrack(opening.id)
	var evs []rawEvent
	compact, idBytes := 0, 0
	for len(evs) < n {
		ev := s.next(t)
		if strings.HasPrefix(ev.id, position.PrefixCompact) {
			compact++
		}
		idBytes += len(ev.id)
		evs = append(evs, ev)
		tr.check(t, rawEvent{id: topicsAsV1(t, res, ev.id), topic: ev.topic, data: ev.data})
	}
	if compact < n/2 {
		t.Fatalf("%d of %d ids compact, want most", compact, n)
	}
	// Resume on the other gateway from a compact id in the middle: the rest comes exactly.
	k := n / 2
	for !strings.HasPrefix(evs[k].id, position.PrefixCompact) {
		k++
	}
	r := openTopics(t, ctx, b.url+"/streams/"+ta+","+tb+"?last_event_id="+url.QueryEscape(evs[k].id), nil)
	defer r.stop()
	tr = newTrack(evs[k].id)
	for tr.seen < n-k-1 {
		ev := r.next(t)
		if ev.data == "" {
			continue // the opening block
		}
		tr.check(t, rawEvent{id: topicsAsV1(t, res, ev.id), topic: ev.topic, data: ev.data})
	}
	t.Logf("%d of %d ids compact, %.1f bytes per id; resumed from the %dth", compact, n, float64(idBytes)/n, k)
}
