package feed_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// TestReservedTypes: every reserved type, in an event or a ce_type header, reaches a client renamed, in every
// value format, and publishing's check (ReservedType) says so for the same header values; other types pass as
// they are.
func TestReservedTypes(t *testing.T) {
	types := feed.ReservedTypes()
	if !slices.IsSorted(types) || len(types) < 10 {
		t.Fatalf("ReservedTypes = %v", types)
	}
	for _, typ := range types {
		if !feed.Reserved(typ) {
			t.Errorf("Reserved(%q) = false", typ)
		}
		if got, ok := feed.ReservedType([]byte(typ)); !ok || got != typ {
			t.Errorf("ReservedType(%q) = %q, %t", typ, got, ok)
		}
		for _, header := range []string{feed.HeaderEvent, feed.HeaderCEType} {
			rec := &kgo.Record{Value: []byte("v"), Headers: hdr(header, typ)}
			want := feed.RenamedPrefix + typ
			if got := feed.RecordType(rec); got != want {
				t.Errorf("%s %q: RecordType = %q, want %q", header, typ, got, want)
			}
			for _, vf := range formats {
				frame := feed.AppendFrame(nil, []byte(frameID), rec, feed.Plain(vf))
				ev, err := sse.NewParser(bytes.NewReader(frame)).Next()
				if err != nil || ev.Type != want {
					t.Errorf("%s %q in %v: frame %q parses to %+v, %v", header, typ, vf, frame, ev, err)
				}
			}
		}
	}
	for _, typ := range []string{"message", "Resync", "resync ", " resync", "record.resync", "order.created", "token-expired\r", "live\xff"} {
		if got, ok := feed.ReservedType([]byte(typ)); ok {
			t.Errorf("ReservedType(%q) = %q, true; a client does not read it as the gateway's", typ, got)
		}
	}
}
