package source

import (
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// TestRecordTooLargeForTopic sends an event that passes the event size cap but is larger than the target
// topic's max.message.bytes, among small events that the producer batches together, and checks that the
// source does not retry it forever: the event is dead-lettered with its id (or dropped), counted as
// oversized, and every other event is committed once, in order, on the first connection.
func TestRecordTooLargeForTopic(t *testing.T) {
	// Random hex, so that the producer's compression cannot shrink it below the topic's limit.
	raw := make([]byte, 3000)
	_, _ = rand.NewChaCha8([32]byte{}).Read(raw)
	big := hex.EncodeToString(raw)
	const events, bigID = 300, 137
	var want []string
	for i := 1; i <= events; i++ {
		if i != bigID {
			want = append(want, "event-"+strconv.Itoa(i))
		}
	}
	for _, deadLetter := range []bool{true, false} {
		name := "drop"
		if deadLetter {
			name = "dead-letter"
		}
		t.Run(name, func(t *testing.T) {
			srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: events, Hold: true, Data: func(i int) string {
				if i == bigID {
					return big
				}
				return "event-" + strconv.Itoa(i)
			}}))
			opt := testOptions(t)
			if deadLetter {
				opt.DeadLetterTopic = kafkatest.NewTopic(t, 1, nil)
			}
			// 2000 bytes: the big event (6000) cannot fit, and batches of small events can exceed it too.
			maxBytes := "2000"
			topic := kafkatest.NewTopic(t, 1, map[string]*string{"max.message.bytes": &maxBytes})
			r := start(t, Spec{Name: "toolarge", URL: srv.URL, Topic: topic, Format: FormatRaw}, opt)
			checkFor(t, 30*time.Second, "every small event", func() bool { return r.src.Stats().Records.Load() >= events-1 })
			if got := values(readCommitted(t, topic)); !slices.Equal(got, want) {
				t.Fatalf("%d records, want %d in order: %.200q", len(got), len(want), got)
			}
			st := r.src.Stats()
			if n := st.Oversized.Load(); n != 1 {
				t.Errorf("%d oversized events counted, want 1", n)
			}
			if n := st.Reconnects[ReasonKafka].Load(); n != 0 {
				t.Errorf("%d kafka-error reconnections, want 0", n)
			}
			if n := st.Connects.Load(); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
			if !deadLetter {
				return
			}
			dl := readCommitted(t, opt.DeadLetterTopic)
			if len(dl) != 1 {
				t.Fatalf("%d dead-letter records, want 1", len(dl))
			}
			if got := string(dl[0].Value); got != `{"id":"137","reason":"record-too-large","source":"toolarge"}` {
				t.Errorf("dead-letter value %s", got)
			}
			if n := st.DeadLettered.Load(); n != 1 {
				t.Errorf("%d dead-letter records counted, want 1", n)
			}
		})
	}
}
