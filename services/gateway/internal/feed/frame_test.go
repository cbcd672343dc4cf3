package feed_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

var update = flag.Bool("update", false, "rewrite testdata/frames/*/*.golden from the current output")

const frameID = "v1:0-5812.1-5790.2-5833"

// longID is a position vector over 256 partitions with 13-digit offsets, several KiB long.
var longID = func() string {
	es := make([]position.Entry, 256)
	for i := range es {
		es[i] = position.Entry{Partition: int32(i), Offset: 1_000_000_000_000 + int64(i)*7919}
	}
	v, err := position.FromEntries(es)
	if err != nil {
		panic(err)
	}
	return v.String()
}()

// allBytes holds every byte value once, in order.
var allBytes = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// textView is what a client gets of v in text format: line ends as LF, ill-formed UTF-8 as U+FFFD.
func textView(v []byte) string {
	return sse.DecodeUTF8([]byte(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(v))))
}

func hdr(kv ...string) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

// frameCases are the golden cases. typ, data and id are what a WHATWG client must see for the frame.
var frameCases = []struct {
	name string
	id   string
	rec  *kgo.Record
	typ  string
	data string
}{
	{
		name: "json-single-line",
		rec:  &kgo.Record{Key: []byte("user-1"), Value: []byte(`{"user":"ada","n":1}`)},
		typ:  "message", data: `{"user":"ada","n":1}`,
	},
	{
		name: "multiline-lf",
		rec:  &kgo.Record{Value: []byte("a\nb\nc")},
		typ:  "message", data: "a\nb\nc",
	},
	{
		name: "multiline-crlf",
		rec:  &kgo.Record{Value: []byte("a\r\nb\r\nc")},
		typ:  "message", data: "a\nb\nc",
	},
	{
		name: "multiline-cr",
		rec:  &kgo.Record{Value: []byte("a\rb\rc")},
		typ:  "message", data: "a\nb\nc",
	},
	{
		name: "multiline-mixed",
		rec:  &kgo.Record{Value: []byte("a\r\nb\nc\rd\n\re\r\r\nf")},
		typ:  "message", data: "a\nb\nc\nd\n\ne\n\nf",
	},
	{
		name: "multiline-blank-lines",
		rec:  &kgo.Record{Value: []byte("a\n\n\nb")},
		typ:  "message", data: "a\n\n\nb",
	},
	{
		name: "trailing-lf",
		rec:  &kgo.Record{Value: []byte("a\n")},
		typ:  "message", data: "a\n",
	},
	{
		name: "trailing-crlf",
		rec:  &kgo.Record{Value: []byte("a\r\n")},
		typ:  "message", data: "a\n",
	},
	{
		name: "trailing-cr",
		rec:  &kgo.Record{Value: []byte("a\r")},
		typ:  "message", data: "a\n",
	},
	{
		name: "leading-line-end",
		rec:  &kgo.Record{Value: []byte("\nx")},
		typ:  "message", data: "\nx",
	},
	{
		name: "value-looks-like-fields",
		rec:  &kgo.Record{Value: []byte("x\n\nevent: evil\nid: v1:9-9\ndata: injected\n\n: comment")},
		typ:  "message", data: "x\n\nevent: evil\nid: v1:9-9\ndata: injected\n\n: comment",
	},
	{
		name: "value-leading-space",
		rec:  &kgo.Record{Value: []byte(" indented\n  two")},
		typ:  "message", data: " indented\n  two",
	},
	{
		name: "empty-value",
		rec:  &kgo.Record{Key: []byte("k"), Value: []byte{}},
		typ:  "message", data: "",
	},
	{
		name: "tombstone",
		rec:  &kgo.Record{Key: []byte("user-1"), Value: nil, Headers: hdr("event", "ignored")},
		typ:  "delete", data: "user-1",
	},
	{
		name: "tombstone-nil-key",
		rec:  &kgo.Record{Key: nil, Value: nil},
		typ:  "delete", data: "",
	},
	{
		name: "tombstone-multiline-key",
		rec:  &kgo.Record{Key: []byte("k1\r\n\nk2"), Value: nil},
		typ:  "delete", data: "k1\n\nk2",
	},
	{
		name: "event-header",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("trace", "t", "event", "order.created")},
		typ:  "order.created", data: "v",
	},
	{
		name: "ce-type-header",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "com.example.order.created")},
		typ:  "com.example.order.created", data: "v",
	},
	{
		name: "event-and-ce-type",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "from-ce", "event", "from-event")},
		typ:  "from-event", data: "v",
	},
	{
		name: "empty-event-header",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("event", "")},
		typ:  "message", data: "v",
	},
	{
		name: "event-injection-crlf",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\r\nid: evil")},
		typ:  "a\uFFFD\uFFFDid: evil", data: "v",
	},
	{
		name: "event-injection-blank-line",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("event", "x\n\ndata: injected")},
		typ:  "x\uFFFD\uFFFDdata: injected", data: "v",
	},
	{
		name: "ce-type-injection-cr",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "x\r\rdata: injected\r")},
		typ:  "x\uFFFD\uFFFDdata: injected\uFFFD", data: "v",
	},
	{
		name: "non-utf8-value",
		rec:  &kgo.Record{Value: []byte("a\xffb\xc3(\xe2\x82")},
		typ:  "message", data: "a\uFFFDb\uFFFD(\uFFFD",
	},
	{
		name: "non-utf8-header",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("event", "t\xfe\xff")},
		typ:  "t\uFFFD\uFFFD", data: "v",
	},
	{
		name: "utf8-value",
		rec:  &kgo.Record{Value: []byte("caf\u00e9 \u2603 \U0001F600")},
		typ:  "message", data: "caf\u00e9 \u2603 \U0001F600",
	},
	{
		name: "value-cr-only",
		rec:  &kgo.Record{Value: []byte("one\rtwo")},
		typ:  "message", data: "one\ntwo",
	},
	{
		name: "value-nul",
		rec:  &kgo.Record{Value: []byte("a\x00b")},
		typ:  "message", data: "a\x00b",
	},
	{
		name: "binary-all-bytes",
		rec:  &kgo.Record{Value: allBytes, Headers: hdr("event", "blob")},
		typ:  "blob", data: textView(allBytes),
	},
	{
		name: "binary-avro-like",
		rec:  &kgo.Record{Key: []byte("k"), Value: []byte("\x02\x0eorder-1\x00\xf6\x01\n\r")},
		typ:  "message", data: "\x02\x0eorder-1\x00\uFFFD\x01\n\n",
	},
	{
		name: "encoded-surrogate",
		rec:  &kgo.Record{Value: []byte("\xed\xa0\x80")},
		typ:  "message", data: "\uFFFD\uFFFD\uFFFD",
	},
	{
		name: "text-starting-with-marker",
		rec:  &kgo.Record{Value: []byte("base64:aGk=")},
		typ:  "message", data: "base64:aGk=",
	},
	{
		name: "text-marker-alone",
		rec:  &kgo.Record{Value: []byte("base64:")},
		typ:  "message", data: "base64:",
	},
	{
		name: "text-near-marker",
		rec:  &kgo.Record{Value: []byte("base64 and Base64:x")},
		typ:  "message", data: "base64 and Base64:x",
	},
	{
		name: "text-marker-later",
		rec:  &kgo.Record{Value: []byte("x\nbase64:aGk=")},
		typ:  "message", data: "x\nbase64:aGk=",
	},
	{
		name: "text-bom",
		rec:  &kgo.Record{Value: []byte("\uFEFFx")},
		typ:  "message", data: "\uFEFFx",
	},
	{
		name: "tombstone-binary-key",
		rec:  &kgo.Record{Key: []byte("\x00\xffk"), Value: nil},
		typ:  "delete", data: "\x00\uFFFDk",
	},
	{
		name: "tombstone-cr-key",
		rec:  &kgo.Record{Key: []byte("k\r1"), Value: nil},
		typ:  "delete", data: "k\n1",
	},
	// A record never reaches a client under one of the gateway's own types: it is renamed (RenamedPrefix).
	{
		name: "reserved-resync-keyless",
		rec:  &kgo.Record{Value: []byte(`{"reason":"retention","partitions":[]}`), Headers: hdr("event", "resync")},
		typ:  "record.resync", data: `{"reason":"retention","partitions":[]}`,
	},
	{
		name: "reserved-token-expired",
		rec:  &kgo.Record{Key: []byte("k"), Value: []byte(`{"expired_at":"2020-01-01T00:00:00Z"}`), Headers: hdr("event", "token-expired")},
		typ:  "record.token-expired", data: `{"expired_at":"2020-01-01T00:00:00Z"}`,
	},
	{
		name: "reserved-ce-type-resync",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "resync")},
		typ:  "record.resync", data: "v",
	},
	{
		name: "reserved-live",
		rec:  &kgo.Record{Key: []byte("k"), Value: []byte(`{"id":"v1:0-1"}`), Headers: hdr("event", "live")},
		typ:  "record.live", data: `{"id":"v1:0-1"}`,
	},
	{
		name: "reserved-delete-with-value",
		rec:  &kgo.Record{Key: []byte("k"), Value: []byte("other-key"), Headers: hdr("event", "delete")},
		typ:  "record.delete", data: "other-key",
	},
	{
		name: "reserved-error",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("event", "error")},
		typ:  "record.error", data: "v",
	},
	{
		// Not a reserved type: types are case-sensitive, and a type of its own is not the gateway's.
		name: "near-reserved",
		rec:  &kgo.Record{Value: []byte("v"), Headers: hdr("event", "Resync")},
		typ:  "Resync", data: "v",
	},
	{
		name: "long-id",
		id:   longID,
		rec:  &kgo.Record{Value: []byte("v")},
		typ:  "message", data: "v",
	},
}

// formats are the value formats every frame case is framed in, each with its golden files in
// testdata/frames/<format>.
var formats = []feed.ValueFormat{feed.ValueText, feed.ValueAuto, feed.ValueBase64}

// frameValue is what a frame's data carries: the value, or a tombstone's key.
func frameValue(rec *kgo.Record) []byte {
	if rec.Value == nil {
		return rec.Key
	}
	return rec.Value
}

// decodeData is the decoding docs/gateway.md gives for pages of auto and base64 topics, written out
// independently of the encoder: data starting with "base64:" is the rest in standard base64, any other data
// is the value as it is.
func decodeData(data string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(data, "base64:"); ok {
		return base64.StdEncoding.Strict().DecodeString(rest)
	}
	return []byte(data), nil
}

func TestAppendFrameGolden(t *testing.T) {
	for _, vf := range formats {
		dir := filepath.Join("testdata", "frames", vf.String())
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range frameCases {
			t.Run(vf.String()+"/"+tc.name, func(t *testing.T) {
				id := tc.id
				if id == "" {
					id = frameID
				}
				prefix := []byte("prefix|")
				got := feed.AppendFrame(bytes.Clone(prefix), []byte(id), tc.rec, feed.Plain(vf))
				if !bytes.HasPrefix(got, prefix) {
					t.Fatalf("AppendFrame did not append to dst: %q", got)
				}
				got = got[len(prefix):]

				path := filepath.Join(dir, tc.name+".golden")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("frame differs from %s\n got: %q\nwant: %q", path, got, want)
				}
			})
		}
	}
}

// TestAppendFrameParses reads every golden case back with the project's WHATWG parser: whatever the record
// holds, the frame is exactly one event with the record's type and the frame's id. Its data is the value
// with line ends as LF and ill-formed UTF-8 as U+FFFD in text format; in auto and base64 it decodes to the
// exact value, and in auto it is the value itself whenever that is safe text.
func TestAppendFrameParses(t *testing.T) {
	for _, vf := range formats {
		for _, tc := range frameCases {
			t.Run(vf.String()+"/"+tc.name, func(t *testing.T) {
				id := tc.id
				if id == "" {
					id = frameID
				}
				frame := feed.AppendFrame(nil, []byte(id), tc.rec, feed.Plain(vf))
				if !bytes.HasSuffix(frame, []byte("\n\n")) {
					t.Fatalf("frame does not end with a blank line: %q", frame)
				}
				// Exactly one line end in the frame is doubled: the one that ends it.
				if n := strings.Count(string(frame), "\n\n"); n != 1 || strings.ContainsRune(string(frame), '\r') {
					t.Fatalf("frame has %d blank lines or a CR: %q", n, frame)
				}
				p := sse.NewParser(bytes.NewReader(frame))
				ev, err := p.Next()
				if err != nil {
					t.Fatalf("parsing %q: %v", frame, err)
				}
				if ev.Type != tc.typ || ev.ID != id {
					t.Errorf("parsed event: type %q id %.40q, want %q %.40q", ev.Type, ev.ID, tc.typ, id)
				}
				checkData(t, vf, ev.Data, tc.rec, tc.data)
				if extra, err := p.Next(); !errors.Is(err, io.EOF) {
					t.Errorf("second Next = %+v, %v; want io.EOF (the frame split into more events)", extra, err)
				}
				if _, err := position.Parse(ev.ID); err != nil {
					t.Errorf("parsed id is not a position: %v", err)
				}
			})
		}
	}
}

// checkData checks the data a client parsed from rec's frame in format vf; textData is what text format
// gives.
func checkData(t *testing.T, vf feed.ValueFormat, data string, rec *kgo.Record, textData string) {
	t.Helper()
	v := frameValue(rec)
	encoded := strings.HasPrefix(data, "base64:")
	switch vf {
	case feed.ValueText:
		if data != textData {
			t.Errorf("text data %q, want %q", data, textData)
		}
		return
	case feed.ValueBase64:
		if !encoded {
			t.Errorf("base64 data %q does not start with the marker", data)
		}
	case feed.ValueAuto:
		if safe := feed.SafeText(v); safe == encoded || (safe && data != string(v)) {
			t.Errorf("auto data %q for value %q (safe text: %t)", data, v, safe)
		}
	}
	got, err := decodeData(data)
	if err != nil {
		t.Fatalf("decoding data %q: %v", data, err)
	}
	if !bytes.Equal(got, v) {
		t.Errorf("data %q decodes to %q, want the value %q", data, got, v)
	}
}

// TestAppendFrameConcatenated parses all golden frames written back to back, as a connection sends them:
// each one is one event, in order, and no frame bleeds into the next.
func TestAppendFrameConcatenated(t *testing.T) {
	for _, vf := range formats {
		t.Run(vf.String(), func(t *testing.T) {
			var stream []byte
			for _, tc := range frameCases {
				stream = feed.AppendFrame(stream, []byte(frameID), tc.rec, feed.Plain(vf))
			}
			p := sse.NewParser(bytes.NewReader(stream))
			for _, tc := range frameCases {
				ev, err := p.Next()
				if err != nil {
					t.Fatalf("before %s: %v", tc.name, err)
				}
				if ev.Type != tc.typ {
					t.Fatalf("%s: got type %q, want %q", tc.name, ev.Type, tc.typ)
				}
				checkData(t, vf, ev.Data, tc.rec, tc.data)
			}
			if ev, err := p.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last frame: %+v, %v; want io.EOF", ev, err)
			}
		})
	}
}

func TestEventType(t *testing.T) {
	tests := []struct {
		name    string
		headers []kgo.RecordHeader
		want    string
		wantNil bool
	}{
		{name: "no headers", headers: nil, wantNil: true},
		{name: "unrelated headers", headers: hdr("trace", "x", "content-type", "application/json"), wantNil: true},
		{name: "event", headers: hdr("event", "created"), want: "created"},
		{name: "ce_type", headers: hdr("ce_type", "com.example.created"), want: "com.example.created"},
		{name: "event after ce_type wins", headers: hdr("ce_type", "ce", "event", "ev"), want: "ev"},
		{name: "event before ce_type wins", headers: hdr("event", "ev", "ce_type", "ce"), want: "ev"},
		{name: "first event of two", headers: hdr("event", "one", "event", "two"), want: "one"},
		{name: "first ce_type of two", headers: hdr("ce_type", "one", "ce_type", "two"), want: "one"},
		{name: "empty event still wins over ce_type", headers: hdr("event", "", "ce_type", "ce"), want: ""},
		{name: "keys are case-sensitive", headers: hdr("Event", "x", "CE_TYPE", "y"), wantNil: true},
		{name: "ce-type with a dash is not ce_type", headers: hdr("ce-type", "x"), wantNil: true},
		{name: "value returned raw", headers: hdr("event", "a\r\nb"), want: "a\r\nb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := feed.EventType(tc.headers)
			if tc.wantNil {
				if got != nil {
					t.Fatalf("EventType = %q, want nil", got)
				}
				return
			}
			if got == nil || string(got) != tc.want {
				t.Fatalf("EventType = %q (nil %t), want %q", got, got == nil, tc.want)
			}
		})
	}
}

// TestRecordType: RecordType is exactly the type a WHATWG client parses from the record's frame, for header
// values the writer has to make safe (line ends), ones it passes (NUL), ill-formed UTF-8, and the fallbacks.
func TestRecordType(t *testing.T) {
	tests := []struct {
		name string
		rec  *kgo.Record
		want string
	}{
		{name: "event", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "order.paid")}, want: "order.paid"},
		{name: "no headers", rec: &kgo.Record{Value: []byte("v")}, want: "message"},
		{name: "unrelated headers", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("trace", "x")}, want: "message"},
		{name: "empty event", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "")}, want: "message"},
		{name: "empty event hides ce_type", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "", "ce_type", "ce")}, want: "message"},
		{name: "ce_type fallback", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "com.example.paid")}, want: "com.example.paid"},
		{name: "event over ce_type", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "ce", "event", "ev")}, want: "ev"},
		{name: "named message", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "message")}, want: "message"},
		{name: "CR", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\rb")}, want: "a\uFFFDb"},
		{name: "LF", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\nb")}, want: "a\uFFFDb"},
		{name: "CRLF", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\r\nb")}, want: "a\uFFFD\uFFFDb"},
		{name: "trailing LF", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\n")}, want: "a\uFFFD"},
		{name: "only a CR", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "\r")}, want: "\uFFFD"},
		{name: "ce_type with line ends", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "x\r\n\ndata: y")}, want: "x\uFFFD\uFFFD\uFFFDdata: y"},
		{name: "NUL is kept", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\x00b")}, want: "a\x00b"},
		{name: "ill-formed UTF-8", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "t\xfe\xff")}, want: "t\uFFFD\uFFFD"},
		{name: "truncated sequence", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a\xe2\x82b")}, want: "a\uFFFDb"},
		{name: "encoded surrogate", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "\xed\xa0\x80")}, want: "\uFFFD\uFFFD\uFFFD"},
		{name: "ill-formed and CR", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "\xc3\r(")}, want: "\uFFFD\uFFFD("},
		{name: "valid UTF-8", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "caf\u00e9.\U0001F600")}, want: "caf\u00e9.\U0001F600"},
		{name: "BOM inside a type", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "\uFEFFt")}, want: "\uFEFFt"},
		{name: "leading space", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", " t")}, want: " t"},
		{name: "colon and space", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "a: b")}, want: "a: b"},
		{name: "empty value is not a tombstone", rec: &kgo.Record{Value: []byte{}, Headers: hdr("event", "e")}, want: "e"},
		{name: "reserved", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "token-expired")}, want: "record.token-expired"},
		{name: "reserved ce_type", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "resync")}, want: "record.resync"},
		{name: "reserved after the event header wins", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("ce_type", "order", "event", "live")}, want: "record.live"},
		{name: "reserved ce_type behind an event header", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "order", "ce_type", "live")}, want: "order"},
		{name: "reserved with a line end is not reserved", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "resync\n")}, want: "resync\uFFFD"},
		{name: "renamed type as it is", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "record.resync")}, want: "record.resync"},
		{name: "delete with a value", rec: &kgo.Record{Value: []byte("v"), Headers: hdr("event", "delete")}, want: "record.delete"},
		{name: "tombstone", rec: &kgo.Record{Key: []byte("k"), Headers: hdr("event", "ignored")}, want: "delete"},
		{name: "tombstone with line ends in the header", rec: &kgo.Record{Key: []byte("k"), Headers: hdr("event", "a\r\nb")}, want: "delete"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := feed.RecordType(tc.rec)
			if got != tc.want {
				t.Errorf("RecordType = %q, want %q", got, tc.want)
			}
			for _, vf := range formats {
				frame := feed.AppendFrame(nil, []byte(frameID), tc.rec, feed.Plain(vf))
				ev, err := sse.NewParser(bytes.NewReader(frame)).Next()
				if err != nil {
					t.Fatalf("parsing %q: %v", frame, err)
				}
				if ev.Type != got {
					t.Errorf("%s frame %q parses to type %q, RecordType says %q", vf, frame, ev.Type, got)
				}
			}
		})
	}
}
