package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestBlackBoxWebSocketSteadyAcks: a WebSocket client that handles each message in 25 ms and acknowledges it
// then (ack=1, max_in_flight=10) catches up on 5,000 records and is never closed, with a write timeout of one
// second: it never leaves the gateway a second without an acknowledgement, though a catch-up batch of
// hundreds of messages takes it far longer than a second in all. Before, the write timeout bounded a whole
// batch, acknowledgement waits included, and such a client was closed 4002 (too slow) on its first batch.
func TestBlackBoxWebSocketSteadyAcks(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 1, nil)
	const total = 5000
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}
	}
	kafkatest.Produce(t, cl, recs...)
	addr, _ := blackBoxGateway(t, brokers, "--topics", topic, "--write-timeout", "1s", "--prefill", "0")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws/"+topic+"?from=earliest&ack=1&max_in_flight=10", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer func() { _ = ws.CloseNow() }()

	// The acknowledgements go out from a goroutine of their own, each 25 ms after its message came (the
	// client's handling time), while the reads go on.
	type due struct {
		id string
		at time.Time
	}
	acks := make(chan due, total+1)
	ackErr := make(chan error, 1)
	go func() {
		defer close(ackErr)
		for a := range acks {
			time.Sleep(time.Until(a.at)) // the message's handling time, not a synchronization
			if err := ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"ack":%q}`, a.id)); err != nil {
				ackErr <- err
				return
			}
		}
	}()
	defer close(acks)

	got, began := 0, time.Now()
	for got < total {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("after %d of %d records: %v (close status %d)", got, total, err, websocket.CloseStatus(err))
		}
		var m struct {
			Event, ID string
			Data      json.RawMessage
			Offset    *int64
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("message %q: %v", b, err)
		}
		if m.Event == "open" {
			continue
		}
		if m.Offset == nil || *m.Offset != int64(got) || string(m.Data) != fmt.Sprintf(`"r%d"`, got) {
			t.Fatalf("message %d: %s, want record %d", got, b, got)
		}
		acks <- due{m.ID, time.Now().Add(25 * time.Millisecond)}
		got++
	}
	t.Logf("%d records in %v, every one acknowledged 25 ms after it came", total, time.Since(began).Round(time.Millisecond))
	select {
	case err := <-ackErr:
		if err != nil {
			t.Fatalf("acknowledging: %v", err)
		}
	default:
	}
	if err := ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("the client's close after %d records: %v", total, err)
	}
}
