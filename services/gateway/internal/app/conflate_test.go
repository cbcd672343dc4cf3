package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// keyed is a record value of the conflation test: its key and its sequence number among the key's records.
type keyed struct {
	K   string `json:"k"`
	V   int    `json:"v"`
	Pad string `json:"pad,omitempty"`
}

// TestConflateResume: a client of a conflated stream that drops at random moments and resumes each time on
// the other gateway (from the ring, or from Kafka when the ring no longer holds its position) gets, of each
// key, values in the order written, none twice, and in the end each key's final value; its ids only rise.
func TestConflateResume(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	small := func(c *Config) { c.RingBytes = 64 << 10 } // about 400 of the 800 frames: early resumes read from Kafka
	gws := readyGateways(t, topic, small, small)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const keys, perKey = 20, 40
	final := map[string]int{}
	produced := make(chan error, 1)
	half := make(chan struct{}) // half the records are written: the ring no longer holds the first
	go func() {
		cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
		for v := range perKey {
			for k := range keys {
				key := fmt.Sprintf("k%02d", k)
				b, _ := json.Marshal(keyed{key, v, strings.Repeat("x", 100)})
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: b}).FirstErr(); err != nil {
					produced <- err
					return
				}
			}
			time.Sleep(25 * time.Millisecond)
			if v == perKey/2 {
				close(half)
			}
		}
		produced <- nil
	}()
	for k := range keys {
		final[fmt.Sprintf("k%02d", k)] = perKey - 1
	}

	<-half
	got := map[string]int{}
	frames := 0
	randomSessions(t, ctx, gws, "/streams/"+topic+"?conflate=100ms&heartbeat=0&from=earliest", func(session int, from string, ev sse.Event) {
		if ev.Type != "message" {
			t.Fatalf("session %d: %+v", session, ev)
		}
		var r keyed
		if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
			t.Fatalf("session %d: %q: %v", session, ev.Data, err)
		}
		if have, ok := got[r.K]; ok && r.V <= have {
			t.Fatalf("session %d on gateway %d: key %s value %d after %d (from id %q)", session, session%2, r.K, r.V, have, from)
		}
		got[r.K] = r.V
		frames++
	}, afterProducing(t, produced, func() bool { return fmt.Sprint(got) == fmt.Sprint(final) }))
	if frames >= keys*perKey {
		t.Errorf("%d frames for %d records: nothing was conflated", frames, keys*perKey)
	}
	if resumes(t, gws[0], topic, "kafka")+resumes(t, gws[1], topic, "kafka") == 0 {
		t.Error("no resume read from Kafka: the test does not test conflated catch-ups")
	}
	t.Logf("%d frames for %d records", frames, keys*perKey)
}
