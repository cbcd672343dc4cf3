package feed

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
)

// Record headers that name a record's SSE event type, in order of preference: ssegate's own, then the
// CloudEvents Kafka binding's binary-mode type.
const (
	HeaderEvent  = "event"
	HeaderCEType = "ce_type"
)

// DeleteEvent is the event type of the frame for a tombstone (a record with a null value); its data is the key.
const DeleteEvent = "delete"

var deleteType = []byte(DeleteEvent)

// AppendFrame appends to dst the SSE frame for rec with the given id: "event:" from the record's event type
// (omitted when it has none), the value as "data:" lines. A tombstone becomes an "event: delete" frame whose
// data is the key.
func AppendFrame(dst, id []byte, rec *kgo.Record) []byte {
	if rec.Value == nil {
		return sse.AppendEventBytes(dst, id, deleteType, rec.Key)
	}
	return sse.AppendEventBytes(dst, id, EventType(rec.Headers), rec.Value)
}

// EventType returns the record's SSE event type: the value of its first "event" header, else of its first
// "ce_type" header, else nil (the default type, "message").
func EventType(headers []kgo.RecordHeader) []byte {
	var ce []byte
	for i := range headers {
		switch headers[i].Key {
		case HeaderEvent:
			return headers[i].Value
		case HeaderCEType:
			if ce == nil {
				ce = headers[i].Value
			}
		}
	}
	return ce
}
