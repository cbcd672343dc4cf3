package stream

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// TestEventTypeRingAndReplayAgree: the event filter reads a ring frame's type from the frame's bytes
// (frameType) and a record read back from Kafka's type from the record (recordType). Both must give the same
// type for every record, or a filtered stream would keep a frame live and drop it on a resume (or the other
// way round). Header values with line ends, which the writer makes safe, are where they used to differ.
func TestEventTypeRingAndReplayAgree(t *testing.T) {
	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i+1 < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	tests := []struct {
		name string
		rec  *kgo.Record
	}{
		{"plain", &kgo.Record{Value: []byte("v"), Headers: h("event", "order.paid")}},
		{"no header", &kgo.Record{Value: []byte("v")}},
		{"empty header", &kgo.Record{Value: []byte("v"), Headers: h("event", "")}},
		{"ce_type", &kgo.Record{Value: []byte("v"), Headers: h("ce_type", "com.example.paid")}},
		{"CR", &kgo.Record{Value: []byte("v"), Headers: h("event", "a\rb")}},
		{"LF", &kgo.Record{Value: []byte("v"), Headers: h("event", "a\nb")}},
		{"CRLF", &kgo.Record{Value: []byte("v"), Headers: h("event", "a\r\nb")}},
		{"only line ends", &kgo.Record{Value: []byte("v"), Headers: h("ce_type", "\r\n\n")}},
		{"NUL", &kgo.Record{Value: []byte("v"), Headers: h("event", "a\x00b")}},
		{"ill-formed UTF-8", &kgo.Record{Value: []byte("v"), Headers: h("event", "t\xfe\xe2\x82")}},
		{"tombstone", &kgo.Record{Key: []byte("k"), Headers: h("event", "a\r\nb")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frame := feed.AppendFrame(nil, []byte("v1:0-1"), tc.rec, feed.Plain(feed.ValueAuto))
			nl := bytes.IndexByte(frame, '\n')
			ring, replay := frameType(frame[nl+1:]), recordType(tc.rec)
			if ring != replay {
				t.Fatalf("frame %q: type from the ring frame %q, from the record %q", frame, ring, replay)
			}
		})
	}
}

// TestValueRingAndReplayAgree: the value filter reads a ring frame's value from the frame's data lines
// (frameValue) and a record read back from Kafka's value from the record. Both must give the same value, in
// every value format, or a filtered stream would keep a frame live and drop it on a resume; only the text
// format's rewriting of CR to LF shows.
func TestValueRingAndReplayAgree(t *testing.T) {
	for _, value := range [][]byte{
		[]byte(`{"amount":150,"region":"eu"}`),
		[]byte("{\n  \"multi\": \"line\"\n}"),
		[]byte(""),
		{0xff, 0x00, 0x01},
		[]byte("base64:not really"),
		[]byte("ends with a newline\n"),
		nil, // a tombstone
	} {
		for _, vf := range []feed.ValueFormat{feed.ValueAuto, feed.ValueBase64, feed.ValueText} {
			rec := &kgo.Record{Key: []byte("k"), Value: value}
			frame := feed.AppendFrame(nil, []byte("v1:0-1"), rec, feed.Plain(vf))
			nl := bytes.IndexByte(frame, '\n')
			got := frameValue(frame[nl+1:], vf)
			want := value
			if vf == feed.ValueText {
				want = bytes.ReplaceAll(value, []byte("\r"), []byte("\n"))
			}
			if !bytes.Equal(got, want) || (got == nil) != (value == nil) {
				t.Errorf("format %v, value %q: frame %q gives %q", vf, value, frame, got)
			}
		}
	}
}
