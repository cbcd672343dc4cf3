package sse

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	const fffd = "\uFFFD"
	cases := []struct {
		name string
		id   string
		typ  string
		data string
		want Event
	}{
		{name: "plain", id: "v1:0-1", typ: "update", data: `{"a":1}`, want: Event{Type: "update", Data: `{"a":1}`, ID: "v1:0-1"}},
		{name: "default type", id: "1", data: "x", want: Event{Type: "message", Data: "x", ID: "1"}},
		{name: "no id", data: "x", want: Event{Type: "message", Data: "x"}},
		{name: "empty data", data: "", want: Event{Type: "message"}},
		{name: "lf lines", data: "a\nb", want: msg("a\nb", "")},
		{name: "cr lines come back with lf", data: "a\rb\rc", want: msg("a\nb\nc", "")},
		{name: "crlf lines come back with lf", data: "a\r\nb\r\n", want: msg("a\nb\n", "")},
		{name: "mixed line ends come back with lf", data: "\r\n\ra\n\rb\r\r\n", want: msg("\n\na\n\nb\n\n", "")},
		{name: "trailing lf kept", data: "a\n", want: msg("a\n", "")},
		{name: "only newlines", data: "\n\n", want: msg("\n\n", "")},
		{name: "leading spaces kept", id: "  1", typ: " t", data: "  a\n b", want: Event{Type: " t", Data: "  a\n b", ID: "  1"}},
		{name: "injection in id and type", id: "1\n\ndata: x", typ: "a\r\nb", data: "ok", want: Event{Type: "a" + fffd + fffd + "b", Data: "ok", ID: "1" + fffd + fffd + "data: x"}},
		{name: "nul in id", id: "a\x00", data: "ok", want: msg("ok", "a"+fffd)},
		{name: "invalid utf8 decoded", id: "\xe2\x82", typ: "\xff", data: "\xe2\x82\xff", want: Event{Type: fffd, Data: fffd + fffd, ID: fffd}},
		{name: "unicode", id: "\u00fc", typ: "\u00e9", data: "\u65e5\U0001F600", want: Event{Type: "\u00e9", Data: "\u65e5\U0001F600", ID: "\u00fc"}},
		{name: "bom in data", data: "\ufeffx", want: msg("\ufeffx", "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame := AppendEvent(nil, tc.id, tc.typ, []byte(tc.data))
			p := NewParser(strings.NewReader(string(frame)))
			got, err := collect(p)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("error = %v", err)
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("events from %q\n got: %q\nwant: [%q]", frame, got, tc.want)
			}
			if p.LastEventID() != tc.want.ID {
				t.Errorf("LastEventID = %q, want %q", p.LastEventID(), tc.want.ID)
			}
		})
	}
}

func TestRoundTripIDAndRetry(t *testing.T) {
	var b []byte
	b = AppendRetry(b, 2500)
	b = AppendEvent(b, "1", "", []byte("a"))
	b = AppendComment(b, "keep-alive")
	b = AppendID(b, "2\n")
	b = AppendEvent(b, "", "t", []byte("b"))
	b = AppendID(b, "")
	p := NewParser(strings.NewReader(string(b)))
	got, err := collect(p)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("error = %v", err)
	}
	want := []Event{msg("a", "1"), {Type: "t", Data: "b", ID: "2\uFFFD"}}
	if !slices.Equal(got, want) {
		t.Errorf("events\n got: %q\nwant: %q", got, want)
	}
	if id := p.LastEventID(); id != "" {
		t.Errorf("LastEventID = %q, want empty after AppendID(\"\")", id)
	}
	if d, ok := p.Retry(); d != 2500*time.Millisecond || !ok {
		t.Errorf("Retry = %v, %v", d, ok)
	}
}

func FuzzWriterRoundTrip(f *testing.F) {
	f.Add("v1:0-1", "update", []byte(`{"a":1}`))
	f.Add("", "", []byte(""))
	f.Add("1\n\ndata: x", "a\r\nb", []byte("a\r\nb\rc\n"))
	f.Add("a\x00", "\x00", []byte("\n\r\r\n"))
	f.Add("\xe2\x82", "\xff", []byte("\xe2\x82\r\xf0\x9f\x98\x80"))
	f.Add(" ", " ", []byte(" "))
	f.Add("\xef\xbb\xbf", "\xef\xbb\xbf", []byte("\xef\xbb\xbf"))
	f.Fuzz(func(t *testing.T, id, typ string, data []byte) {
		frame := AppendEvent(nil, id, typ, data)
		if b := AppendEventBytes(nil, []byte(id), []byte(typ), data); !bytes.Equal(b, frame) {
			t.Fatalf("AppendEventBytes %q differs from AppendEvent %q", b, frame)
		}
		checkOneBlock(t, frame)

		p := NewParser(bytes.NewReader(frame))
		evs, err := collect(p)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("error = %v", err)
		}
		idRepl := strings.NewReplacer("\r", "\uFFFD", "\n", "\uFFFD", "\x00", "\uFFFD")
		typRepl := strings.NewReplacer("\r", "\uFFFD", "\n", "\uFFFD")
		lineEnds := strings.NewReplacer("\r\n", "\n", "\r", "\n")
		want := Event{
			Type: refDecode([]byte(typRepl.Replace(typ))),
			Data: refDecode([]byte(lineEnds.Replace(string(data)))),
			ID:   refDecode([]byte(idRepl.Replace(id))),
		}
		if want.Type == "" {
			want.Type = "message"
		}
		if len(evs) != 1 || evs[0] != want {
			t.Fatalf("frame %q\n got: %q\nwant: [%q]", frame, evs, want)
		}
		if p.LastEventID() != want.ID {
			t.Fatalf("LastEventID = %q, want %q", p.LastEventID(), want.ID)
		}
	})
}
