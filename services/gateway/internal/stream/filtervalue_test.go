package stream

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// TestFilterValueLiveAndReplay: a value filter sees one value for a record, whether it comes from the ring
// (the frame's data lines) or is read back from Kafka (the record): on a text topic a CR or CRLF in a value is
// an LF both ways, as the frame's lines give it back; a value the frame encodes is itself both ways.
func TestFilterValueLiveAndReplay(t *testing.T) {
	for _, vf := range []feed.ValueFormat{feed.ValueText, feed.ValueAuto, feed.ValueBase64} {
		f := feed.Plain(vf)
		for _, v := range []string{"a\rb", "a\r\nb", "a\nb", "x\r", "\r\r\n\n", "plain", "", "bin\x00\xff\r"} {
			rec := &kgo.Record{Value: []byte(v)}
			frame := feed.AppendFrame(nil, []byte("v1:0-1"), rec, f)
			nl := bytes.IndexByte(frame, '\n')
			live := frameValue(frame[nl+1:], vf)
			replay, _, _ := f.FilterValue(nil, rec)
			if !bytes.Equal(live, replay) {
				t.Errorf("%v, value %q: the ring's frame gives %q, Kafka's record %q", fmt.Sprint(vf), v, live, replay)
			}
		}
	}
}
