package source

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
)

// Record header names written on every record.
const (
	HeaderEvent  = "event"  // the SSE event type
	HeaderID     = "sse_id" // the SSE event id (the stream's last event id after the event)
	HeaderSource = "source" // the source name
)

// envelope is the FormatEnvelope value, field for field what Kafka Connect's SSE source writes.
type envelope struct {
	Event string `json:"event"`
	ID    string `json:"id"`
	Data  string `json:"data"`
}

// toRecord maps one event to its record under spec.
func toRecord(spec *Spec, ev sse.Event) (*kgo.Record, error) {
	rec := &kgo.Record{
		Topic: spec.Topic,
		Key:   recordKey(spec.Key, ev),
		Headers: []kgo.RecordHeader{
			{Key: HeaderEvent, Value: []byte(ev.Type)},
			{Key: HeaderID, Value: []byte(ev.ID)},
			{Key: HeaderSource, Value: []byte(spec.Name)},
		},
	}
	switch spec.Format {
	case FormatRaw:
		rec.Value = []byte(ev.Data)
	case FormatCloudEvents:
		id := ev.ID
		if id == "" {
			// ce_id is required and must be unique per source; a stream without ids gets a random one.
			var b [16]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		rec.Headers = append(rec.Headers,
			kgo.RecordHeader{Key: "ce_specversion", Value: []byte("1.0")},
			kgo.RecordHeader{Key: "ce_id", Value: []byte(id)},
			kgo.RecordHeader{Key: "ce_source", Value: []byte(spec.URL)},
			kgo.RecordHeader{Key: "ce_type", Value: []byte(ev.Type)},
		)
		rec.Value = []byte(ev.Data)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(envelope{Event: ev.Type, ID: ev.ID, Data: ev.Data}); err != nil {
			return nil, err
		}
		rec.Value = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	return rec, nil
}

// recordKey returns the key for ev, or nil for no key. A json rule whose data is not a JSON object or
// lacks the field gives no key; a string field is used as it is, any other value as its JSON text.
func recordKey(k Key, ev sse.Event) []byte {
	switch k.Kind {
	case KeyID:
		return []byte(ev.ID)
	case KeyEvent:
		return []byte(ev.Type)
	case KeyJSON:
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(ev.Data), &obj) != nil {
			return nil
		}
		raw, ok := obj[k.Field]
		if !ok {
			return nil
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []byte(s)
		}
		return []byte(raw)
	}
	return nil
}

// wanted reports whether spec writes events of type typ.
func wanted(spec *Spec, typ string) bool {
	if len(spec.Events) == 0 {
		return true
	}
	for _, t := range spec.Events {
		if t == typ {
			return true
		}
	}
	return false
}
