package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// order is a record value of the filter tests.
type order struct {
	N      int    `json:"n"`
	Amount int    `json:"amount"`
	Region string `json:"region"`
}

func orders(n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := range n {
		v, _ := json.Marshal(order{N: i, Amount: (i * 37) % 200, Region: []string{"eu", "us"}[i%2]})
		recs = append(recs, &kgo.Record{Partition: int32(i % 2), Value: v})
	}
	return recs
}

// sameRecords fails unless got holds the records of want (ascending), each once, each partition's in order
// (record n is in partition n%2).
func sameRecords(t *testing.T, what string, got, want []int) {
	t.Helper()
	last := [2]int{-1, -1}
	for _, n := range got {
		if n <= last[n%2] {
			t.Fatalf("%s: %d after %d in partition %d: %v", what, n, last[n%2], n%2, got)
		}
		last[n%2] = n
	}
	if sorted := slices.Sorted(slices.Values(got)); fmt.Sprint(sorted) != fmt.Sprint(want) {
		t.Fatalf("%s: %v\nwant %v", what, sorted, want)
	}
}

// filterStream reads a stream until it has want records' n fields, and returns them with the last id.
func filterStream(t *testing.T, c *sseClient, want int) (ns []int, last string) {
	t.Helper()
	for len(ns) < want {
		ev := c.next(t)
		var o order
		if err := json.Unmarshal([]byte(ev.Data), &o); err != nil {
			t.Fatalf("event %+v: %v", ev, err)
		}
		ns, last = append(ns, o.N), ev.ID
	}
	return ns, last
}

// TestValueFilter: filter= keeps the records whose JSON value matches, from the ring and, on a resume, from
// Kafka alike; a token's filter is combined with it by AND, so a client cannot widen it; the ids stay exact
// (a resume from the last id gets the next matching record, none twice); a filter that does not compile is a
// 400 naming the parameter, before the stream starts.
func TestValueFilter(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	g := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.Auth.TopicModes = map[string]string{topic: "optional"}
		c.RingBytes = 64 << 10
	}))
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 1000 // about 120 KB of frames: the ring holds about half
	recs := orders(n)
	want := func(match func(order) bool) []int {
		var out []int
		for _, r := range recs {
			var o order
			_ = json.Unmarshal(r.Value, &o)
			if match(o) {
				out = append(out, o.N)
			}
		}
		return out
	}
	big := want(func(o order) bool { return o.Amount > 100 })
	bigEU := want(func(o order) bool { return o.Amount > 100 && o.Region == "eu" })
	filter := "?from=earliest&filter=" + url.QueryEscape("value.amount > 100")

	c := connect(t, ctx, g.url+"/streams/"+topic+filter)
	for i := 0; i < n; i += 20 {
		kafkatest.Produce(t, cl, recs[i:i+20]...)
	}
	got, _ := filterStream(t, c, len(big))
	sameRecords(t, "filtered stream", got, big)
	// A resume from the first quarter, read back from Kafka (the ring no longer holds it).
	half := len(big) / 4
	c2 := connect(t, ctx, g.url+"/streams/"+topic+filter)
	got2, mid := filterStream(t, c2, half)
	c3 := connectWith(t, ctx, g.url+"/streams/"+topic+filter, map[string]string{"Last-Event-ID": mid})
	rest, _ := filterStream(t, c3, len(big)-half)
	sameRecords(t, "filtered stream resumed after "+mid, slices.Concat(got2, rest), big)
	if _, err := position.Parse(mid); err != nil {
		t.Fatalf("id %q: %v", mid, err)
	}
	if resumes(t, g, topic, "kafka") < 1 {
		t.Error("the resume was not read back from Kafka: the test does not test the replay's filtering")
	}

	// The token's filter, ANDed: the client's own filter cannot widen it.
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{topic}, "filter": `value.region == "eu"`}, nil)
	c4 := connectWith(t, ctx, g.url+"/streams/"+topic+filter, map[string]string{"Authorization": "Bearer " + tok})
	got4, _ := filterStream(t, c4, len(bigEU))
	sameRecords(t, "token filter AND query filter", got4, bigEU)

	for _, bad := range []string{"value.amount >", "1 + 2", strings.Repeat("true && ", 200) + "true", `key.matches("[a-z]{1,1000}")`} {
		code, body := get(t, g.url+"/streams/"+topic+"?filter="+url.QueryEscape(bad))
		if code != 400 || !strings.Contains(body, `"error"`) || !strings.Contains(body, "filter") {
			t.Errorf("filter %.30q: %d %s, want a 400 naming the parameter", bad, code, body)
		}
	}
	bad := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{topic}, "filter": "value.x >"}, nil)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/streams/"+topic, nil)
	req.Header.Set("Authorization", "Bearer "+bad)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token whose filter does not compile: %d, want 401", resp.StatusCode)
	}
}

// TestFields: fields= sends of each JSON value only the fields asked for, in their order, the same bytes from
// the ring and read back from Kafka, with the stream's exact ids: a resume from a projected frame's id goes
// on after it. With a filter, the filter sees the whole value. A fields parameter that cannot be a
// projection is a 400 naming it.
// projectedByPartition splits the data of frames of order values projected to n (record n is in partition
// n%2).
func projectedByPartition(t *testing.T, frames [][]byte) (out [2][]string) {
	t.Helper()
	for _, f := range frames {
		_, data, ok := strings.Cut(string(f), "\ndata: ")
		var o order
		if err := json.Unmarshal([]byte(data), &o); !ok || err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		out[o.N%2] = append(out[o.N%2], strings.TrimSuffix(data, "\n\n"))
	}
	return out
}

func TestFields(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 40
	recs := orders(n)
	kafkatest.Produce(t, cl, recs...)
	ringGW := startGateway(t, []string{topic}, nil)
	kafkaGW := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = 0 })
	ringGW.waitReady(t)
	kafkaGW.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	path := "/streams/" + topic + "?heartbeat=0&from=earliest&fields=region,n"
	fromRing := rawFrames(t, ctx, ringGW.url+path, n)
	fromKafka := rawFrames(t, ctx, kafkaGW.url+path, n)
	// The order across partitions is the order the records were read in, which two pods need not share; each
	// partition's projected values are the same from the ring and from Kafka.
	ringData, kafkaData := projectedByPartition(t, fromRing), projectedByPartition(t, fromKafka)
	if fmt.Sprint(ringData) != fmt.Sprint(kafkaData) {
		t.Fatalf("projected values by partition: from the ring %q, from Kafka %q", ringData, kafkaData)
	}
	for p, values := range ringData {
		for i, data := range values {
			var o order
			if err := json.Unmarshal([]byte(data), &o); err != nil || !strings.HasPrefix(data, `{"region":"`) || strings.Contains(data, "amount") {
				t.Fatalf("partition %d, value %d: %q (%v), want only region then n", p, i, data, err)
			}
			if o.N != 2*i+p || o.Region != []string{"eu", "us"}[p] {
				t.Fatalf("partition %d, value %d: %q, want record %d", p, i, data, 2*i+p)
			}
		}
	}
	// A resume from the id of the 10th projected frame gets, per partition, what follows that id's offset.
	id := strings.TrimPrefix(strings.SplitN(string(fromRing[9]), "\n", 2)[0], "id: ")
	at, err := position.Parse(id)
	if err != nil {
		t.Fatalf("id %q: %v", id, err)
	}
	var want [2][]string
	for p := range want {
		next := 0
		if off, ok := at.Offset(int32(p)); ok {
			next = int(off) + 1
		}
		want[p] = ringData[p][next:]
	}
	rest := rawFrames(t, ctx, kafkaGW.url+path+"&last_event_id="+url.QueryEscape(id), len(want[0])+len(want[1]))
	if got := projectedByPartition(t, rest); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resumed from %s: %q, want %q", id, got, want)
	}
	// The filter sees the whole value (amount), the client only n.
	filtered := rawFrames(t, ctx, kafkaGW.url+"/streams/"+topic+"?heartbeat=0&from=earliest&fields=n&filter="+url.QueryEscape("value.amount > 150"), 3)
	for _, f := range filtered {
		var o order
		data, _ := strings.CutPrefix(strings.SplitN(string(f), "\n", 2)[1], "data: ")
		if err := json.Unmarshal([]byte(data), &o); err != nil || !strings.HasPrefix(data, `{"n":`) || strings.Contains(data, "amount") {
			t.Fatalf("fields=n with a filter on amount: %q (%v)", f, err)
		}
		var whole order
		_ = json.Unmarshal(recs[o.N].Value, &whole)
		if whole.Amount <= 150 {
			t.Errorf("fields=n with a filter on amount: record %d (amount %d) passed", o.N, whole.Amount)
		}
	}
	for _, bad := range []string{"a,,b", "a.", strings.Repeat("x,", 70) + "y"} {
		code, body := get(t, ringGW.url+"/streams/"+topic+"?fields="+url.QueryEscape(bad))
		if code != http.StatusBadRequest || !strings.Contains(body, `"error"`) || !strings.Contains(body, "fields") {
			t.Errorf("fields=%.20q: %d %s, want a 400 naming the parameter", bad, code, body)
		}
	}
}

// TestFilterResumeRandomized: a client of a filtered stream that drops at random moments and resumes each time
// on the other gateway (from the ring, or from Kafka when the ring no longer holds its position), while
// records keep coming, gets every record the filter matches exactly once, in order per key, and none it does
// not match.
func TestFilterResumeRandomized(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	small := func(c *Config) { c.RingBytes = 64 << 10 } // about 400 of the 800 frames: early resumes read from Kafka
	gws := readyGateways(t, topic, small, small)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const n, keys = 800, 8
	type rec struct {
		K      string `json:"k"`
		N      int    `json:"n"`
		Amount int    `json:"amount"`
		Pad    string `json:"pad"`
	}
	matches := func(i int) bool { return i%10 >= 7 } // amount = i % 10; the filter is amount >= 7
	want := 0
	for i := range n {
		if matches(i) {
			want++
		}
	}
	produced := make(chan error, 1)
	half := make(chan struct{})
	go func() {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for i := range n {
			r := rec{K: fmt.Sprintf("k%d", i%keys), N: i, Amount: i % 10, Pad: strings.Repeat("x", 100)}
			b, _ := json.Marshal(r)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(r.K), Value: b}).FirstErr(); err != nil {
				produced <- err
				return
			}
			if i%5 == 4 {
				time.Sleep(25 * time.Millisecond) // about 4 s in all: the client drops many times meanwhile
			}
			if i == n/2 {
				close(half)
			}
		}
		produced <- nil
	}()
	<-half
	got := map[int]bool{}
	lastOf := map[string]int{}
	filter := url.QueryEscape("value.amount >= 7")
	sessions := randomSessions(t, ctx, gws, "/streams/"+topic+"?filter="+filter+"&heartbeat=0&from=earliest", func(session int, from string, ev sse.Event) {
		var r rec
		if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
			t.Fatalf("session %d: %+v: %v", session, ev, err)
		}
		if !matches(r.N) || got[r.N] {
			t.Fatalf("session %d on gateway %d: record %d (matches %v, had it %v), resumed from %q", session, session%2, r.N, matches(r.N), got[r.N], from)
		}
		if last, ok := lastOf[r.K]; ok && r.N < last {
			t.Fatalf("session %d: key %s record %d after %d", session, r.K, r.N, last)
		}
		got[r.N], lastOf[r.K] = true, r.N
	}, afterProducing(t, produced, func() bool { return len(got) == want }))
	if resumes(t, gws[0], topic, "kafka")+resumes(t, gws[1], topic, "kafka") == 0 {
		t.Error("no resume read from Kafka: the test does not test filtered catch-ups")
	}
	t.Logf("%d records matched, over %d sessions", want, sessions)
}
