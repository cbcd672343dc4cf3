package app

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// rawFrames opens url and returns the exact bytes of the first n frames after the opening block (keep-alive
// comments skipped). Frames end with the only blank line they hold, so they are split there.
func rawFrames(t *testing.T, ctx context.Context, url string, n int) [][]byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var frames [][]byte
	var cur []byte
	opening := true
	for len(frames) < n {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("GET %s: after %d of %d frames (opening block read: %t; then %q): %v", url, len(frames), n, !opening, append(cur, line...), err)
		}
		cur = append(cur, line...)
		if len(line) > 1 {
			continue
		}
		switch {
		case opening:
			opening = false
		case !bytes.HasPrefix(cur, []byte(":")):
			frames = append(frames, cur)
		}
		cur = nil
	}
	return frames
}

// TestValueFramesRingAndKafka: a record's frame is the same bytes whether a stream gets it from the pod's
// ring or reads it back from Kafka, in every value format, and the data decodes to the record's exact value.
// The event filter keeps the same frames on both paths, also for a type with line ends.
//
// Both gateways serve the same topics from=earliest: the first read the records into its ring at start
// (prefill), the second started with no prefill, so its streams read them from Kafka.
func TestValueFramesRingAndKafka(t *testing.T) {
	recs := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte(`{"id":"o-1","status":"paid"}`), Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("order.paid")}}},
		{Key: []byte("k2"), Value: []byte("one\rtwo")},
		{Key: []byte("k3"), Value: allByteValues()},
		{Key: []byte("k4"), Value: []byte("base64:aGk=")},
		{Key: []byte("k5"), Value: []byte("first\nsecond\n")},
		{Key: []byte("k6"), Value: []byte{}},
		{Key: []byte("\x00\xffk7"), Value: nil},
		{Key: []byte("k8"), Value: []byte("a\x00b"), Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("line\r\nbreak")}}},
		{Key: []byte("k9"), Value: []byte("caf\xe9"), Headers: []kgo.RecordHeader{{Key: "ce_type", Value: []byte("t\xfe")}}},
	}
	const crlfType = "line\uFFFD\uFFFDbreak" // how the header "line" CR LF "break" reaches a client
	formats := []string{"auto", "base64", "text"}
	topics := make([]string, len(formats))
	perTopic := map[string]string{}
	for i, f := range formats {
		topics[i] = kafkatest.NewTopic(t, 1, nil)
		perTopic[topics[i]] = f
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topics[i]))
		for _, r := range recs {
			// A produced record keeps the topic it went to: each topic gets copies.
			kafkatest.Produce(t, cl, &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
	}
	withFormats := func(c *Config) { c.Values.TopicFormats = perTopic }
	ringGW := startGateway(t, topics, withFormats)
	kafkaGW := startGateway(t, topics, func(c *Config) { withFormats(c); c.Prefill = 0 })
	ringGW.waitReady(t)
	kafkaGW.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	for i, topic := range topics {
		format := formats[i]
		t.Run(format, func(t *testing.T) {
			path := "/streams/" + topic + "?heartbeat=0&from=earliest"
			fromRing := rawFrames(t, ctx, ringGW.url+path, len(recs))
			fromKafka := rawFrames(t, ctx, kafkaGW.url+path, len(recs))
			for j, rec := range recs {
				if !bytes.Equal(fromRing[j], fromKafka[j]) {
					t.Errorf("record %d: frame from the ring %q, from Kafka %q", j, fromRing[j], fromKafka[j])
				}
				ev, err := sse.NewParser(bytes.NewReader(fromKafka[j])).Next()
				if err != nil {
					t.Fatalf("record %d: parsing %q: %v", j, fromKafka[j], err)
				}
				want := rec.Value
				if rec.Value == nil {
					want = rec.Key
				}
				if format == "text" {
					continue // lossy by design; the feed's golden files pin its bytes
				}
				if got := valueOf(t, ev.Data); !bytes.Equal(got, want) {
					t.Errorf("record %d: data %q decodes to %q, want %q", j, ev.Data, got, want)
				}
				if encoded := strings.HasPrefix(ev.Data, "base64:"); format == "base64" && !encoded {
					t.Errorf("record %d: base64 topic sent %q", j, ev.Data)
				}
			}

			if v := resumes(t, ringGW, topic, "kafka"); v != 0 {
				t.Errorf("the prefilled gateway read from Kafka %v times, want 0 (its frames must come from its ring)", v)
			}
			if v := resumes(t, kafkaGW, topic, "kafka"); v != 1 {
				t.Errorf("the gateway without prefill read from Kafka %v times, want 1", v)
			}

			filtered := path + "&event=" + url.QueryEscape(crlfType)
			ringOne := rawFrames(t, ctx, ringGW.url+filtered, 1)[0]
			kafkaOne := rawFrames(t, ctx, kafkaGW.url+filtered, 1)[0]
			if !bytes.Equal(ringOne, fromRing[7]) || !bytes.Equal(kafkaOne, fromKafka[7]) {
				t.Errorf("event=%q: from the ring %q, from Kafka %q; want the frame of record 7, %q", crlfType, ringOne, kafkaOne, fromRing[7])
			}
		})
	}
}

// allByteValues returns every byte value once, in order.
func allByteValues() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}
