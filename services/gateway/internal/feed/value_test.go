package feed_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// TestSafeText spells out which values auto format writes as they are.
func TestSafeText(t *testing.T) {
	tests := []struct {
		name string
		v    string
		want bool
	}{
		{"empty", "", true},
		{"JSON", `{"id":"o-1","n":2}`, true},
		{"LF lines", "a\nb\n", true},
		{"blank lines", "\n\n", true},
		{"leading space", " x", true},
		{"UTF-8", "caf\u00e9 \U0001F600", true},
		{"encoded U+FFFD", "\uFFFD", true},
		{"BOM", "\uFEFFx", true},
		{"other controls", "\x01\x1b[0m\t\x7f", true},
		{"marker without colon", "base64", true},
		{"marker in another case", "Base64:x", true},
		{"marker later in the value", "x base64:y", true},
		{"marker on a later line", "x\nbase64:y", true},
		{"CR", "one\rtwo", false},
		{"CRLF", "a\r\nb", false},
		{"trailing CR", "a\r", false},
		{"NUL", "a\x00b", false},
		{"NUL alone", "\x00", false},
		{"ill-formed byte", "a\xffb", false},
		{"truncated sequence", "\xe2\x82", false},
		{"encoded surrogate", "\xed\xa0\x80", false},
		{"overlong", "\xc0\xaf", false},
		{"above U+10FFFF", "\xf4\x90\x80\x80", false},
		{"marker", "base64:aGk=", false},
		{"marker alone", "base64:", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := feed.SafeText([]byte(tc.v)); got != tc.want {
				t.Errorf("SafeText(%q) = %t, want %t", tc.v, got, tc.want)
			}
		})
	}
}

func TestParseValueFormat(t *testing.T) {
	for _, vf := range []feed.ValueFormat{feed.ValueAuto, feed.ValueText, feed.ValueBase64} {
		got, err := feed.ParseValueFormat(vf.String())
		if err != nil || got != vf {
			t.Errorf("ParseValueFormat(%q) = %v, %v; want %v", vf.String(), got, err, vf)
		}
	}
	if feed.ValueFormat(0) != feed.ValueAuto {
		t.Errorf("the zero ValueFormat is %v, want auto", feed.ValueFormat(0))
	}
	for _, s := range []string{"", "Auto", "BASE64", "b64", "hex", "raw", " text"} {
		_, err := feed.ParseValueFormat(s)
		if !errors.Is(err, feed.ErrValueFormat) {
			t.Errorf("ParseValueFormat(%q) error = %v, want ErrValueFormat", s, err)
		}
	}
}

// FuzzFrameRoundTrip: any value (or tombstone key) framed in auto or base64 format, parsed by a WHATWG client
// and decoded as docs/gateway.md says, is the original bytes; in every format the frame is one event whose
// type is RecordType.
func FuzzFrameRoundTrip(f *testing.F) {
	for _, tc := range frameCases {
		typ := ""
		if t := feed.EventType(tc.rec.Headers); t != nil {
			typ = string(t)
		}
		f.Add(tc.rec.Value, tc.rec.Key, typ, tc.rec.Value == nil)
	}
	f.Add([]byte("base64:\x00"), []byte(nil), "t\r", false)
	f.Add([]byte("\r"), []byte("\r"), "", true)
	f.Fuzz(func(t *testing.T, value, key []byte, typ string, tombstone bool) {
		rec := &kgo.Record{Key: key, Value: value}
		if value == nil {
			rec.Value = []byte{} // the fuzzer's empty input; a tombstone only when asked for
		}
		if tombstone {
			rec.Value = nil
		}
		if typ != "" {
			rec.Headers = []kgo.RecordHeader{{Key: feed.HeaderEvent, Value: []byte(typ)}}
		}
		want := frameValue(rec)
		for _, vf := range formats {
			frame := feed.AppendFrame(nil, []byte(frameID), rec, feed.Plain(vf))
			p := sse.NewParser(bytes.NewReader(frame))
			ev, err := p.Next()
			if err != nil {
				t.Fatalf("%s: parsing %q: %v", vf, frame, err)
			}
			if _, err := p.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("%s: frame %q is more than one event", vf, frame)
			}
			if ev.Type != feed.RecordType(rec) || ev.ID != frameID {
				t.Fatalf("%s: frame %q parses to type %q id %q; RecordType %q", vf, frame, ev.Type, ev.ID, feed.RecordType(rec))
			}
			if vf == feed.ValueText {
				if ev.Data != textView(want) {
					t.Fatalf("text: data %q, want %q", ev.Data, textView(want))
				}
				continue
			}
			got, err := decodeData(ev.Data)
			if err != nil {
				t.Fatalf("%s: decoding %q: %v", vf, ev.Data, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: frame %q decodes to %q, want %q", vf, frame, got, want)
			}
		}
	})
}
