package stream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/projection"
)

// The gateway's own frames are known by what they are (ring.Frame.Own, the typed writes of ownSink), never by
// their event type: a record's frame may read the same. feed.AppendFrame renames a record of a reserved type
// (feed.RenamedPrefix), so a ring frame of the feed never reads so; these tests put such bytes into the ring
// anyway, to show the stream would not take them for the gateway's even then.

// publishRaw publishes frames (SSE bytes without their id line) at the feeder's next offsets, each with its
// key; own marks the frames of the gateway's own (ring.Batch.AddOwn).
func (f *feeder) publishRaw(frames []rawFrame) {
	f.b.Reset()
	for _, fr := range frames {
		f.offset++
		buf := append(f.b.Buf(), "id: "+f.id()+"\n"+fr.rest...)
		if fr.own {
			f.b.AddOwn(buf, 0, f.offset-1)
		} else {
			f.b.Add(buf, 0, f.offset-1, fr.key)
		}
	}
	f.rg.Publish(&f.b, []byte(f.id()))
}

type rawFrame struct {
	rest string
	key  []byte
	own  bool
}

// TestOwnFrameKnownByFlag: a key= or event= stream lets through the resync the feed published (its ring frame
// is marked own) and drops a keyless record whose frame reads "event: resync": a record is filtered as a
// record whatever its type says. Before, a frame without a key whose type line read resync passed every filter
// as the feed's resync.
func TestOwnFrameKnownByFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"key filter", Params{Keys: map[string]bool{"k": true}}},
		{"event filter", Params{Events: map[string]bool{"end": true}}},
		{"token scope of resync", Params{Events: map[string]bool{"resync": true, "end": true}, Keys: map[string]bool{"k": true}}},
		{"conflated key filter", Params{Keys: map[string]bool{"k": true}, Conflate: 10 * time.Millisecond}},
		// The resync's data is the gateway's: fields= projects records' values only.
		{"fields and key filter", Params{Keys: map[string]bool{"k": true}, Fields: mustFields(t, "amount")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeeder(t, 1<<20)
			f.publish("before")
			srv := NewServer(Config{Logger: discardLog})
			w := newMemWriter()
			p := tc.p
			p.From = FromEarliest
			done, cancel := serveMem(t, srv, w, f.rg, p, new(Stats))
			defer cancel()
			f.publishRaw([]rawFrame{
				{rest: "event: resync\ndata: {\"reason\":\"forged\"}\n\n"},
				{rest: "event: resync\ndata: {\"reason\":\"retention\"}\n\n", own: true},
				{rest: "event: end\ndata: last\n\n", key: []byte("k")},
			})
			waitUntil(t, "the last frame", func() bool { return strings.Contains(w.String(), "data: last\n") })
			cancel()
			<-done
			evs, _ := events(t, w.String())
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Type+" "+ev.Data)
			}
			want := `[resync {"reason":"retention"} end last]`
			if fmt.Sprint(got) != want {
				t.Fatalf("events %q, want %s", got, want)
			}
		})
	}
}

func mustFields(t *testing.T, s string) *projection.Fields {
	t.Helper()
	f, err := projection.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMuxKnowsOwnFramesByKind: in a stream of several topics, a topic's record whose frame reads
// "event: token-expired" or "event: live" is a record: it gets its topic line and its data as it is, and the
// stream goes on. Before, the mux took the first for the token's expiry and ended the whole stream, and
// rewrote the second's data as a snapshot's end.
func TestMuxKnowsOwnFramesByKind(t *testing.T) {
	s := NewServer(Config{Logger: discardLog})
	fa, fb := newFeeder(t, 1<<20), newFeeder(t, 1<<20)
	fa.publish("a0")
	fb.publish("b0")
	p := Params{From: FromEarliest}
	w, done, cancel := serveTopics(t, s, []TopicStream{
		{Topic: &Topic{Name: "a", Ring: fa.rg}, Params: p, Stats: new(Stats)},
		{Topic: &Topic{Name: "b", Ring: fb.rg}, Params: p, Stats: new(Stats)},
	})
	defer cancel()
	fa.publishRaw([]rawFrame{
		{rest: "event: token-expired\ndata: {\"expired_at\":\"forged\"}\n\n"},
		{rest: "event: live\ndata: forged-live\n\n"},
		{rest: "event: token-expiring\ndata: forged-notice\n\n"},
	})
	waitUntil(t, "the forged frames", func() bool { return strings.Contains(w.String(), "forged-notice") })
	fb.publish("b1") // the stream goes on
	var ended *CloseReason
	waitUntil(t, "the record after them", func() bool {
		select {
		case r := <-done:
			ended = &r
			return true
		default:
		}
		return strings.Contains(w.String(), "data: b1\n")
	})
	if ended != nil {
		t.Fatalf("the stream ended (%v) on a record's frame:\n%s", *ended, w.String())
	}
	for _, want := range []string{
		"topic: a\nevent: token-expired\ndata: {\"expired_at\":\"forged\"}\n\n",
		"topic: a\nevent: live\ndata: forged-live\n\n",
		"topic: a\nevent: token-expiring\ndata: forged-notice\n\n",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("the stream does not have the record frame %q as a record's:\n%s", want, w.String())
		}
	}
	cancel()
	<-done
}

// TestGatewayEventsReserved: every event type the gateway writes of its own (SSE frames and WebSocket
// messages) is reserved, so that no record reaches a client under it.
func TestGatewayEventsReserved(t *testing.T) {
	for _, typ := range []string{
		"resync", "resumed", LiveEvent, OpenedEvent, EventTokenExpiring, EventTokenExpired, feed.DeleteEvent,
		string(eventOpen), string(eventPosition), string(eventDrain), "error",
	} {
		if !feed.Reserved(typ) {
			t.Errorf("%q is written by the gateway but not reserved", typ)
		}
	}
}

// TestReservedRecordFiltered: a record of a reserved type reaches a stream renamed, and the event filter
// (a token's event scope too) matches it by its new name only, alike in the ring and read back from Kafka.
func TestReservedRecordFiltered(t *testing.T) {
	rec := &kgo.Record{Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "ce_type", Value: []byte("resync")}}}
	frame := feed.AppendFrame(nil, []byte("v1:0-1"), rec, feed.Plain(feed.ValueAuto))
	ev, err := sse.NewParser(strings.NewReader(string(frame))).Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != feed.RenamedPrefix+"resync" || recordType(rec) != ev.Type {
		t.Fatalf("frame type %q, record type %q; want %q", ev.Type, recordType(rec), feed.RenamedPrefix+"resync")
	}
	k := kept{Events: map[string]bool{"resync": true}}
	if k.keeps(nil, func() string { return recordType(rec) }, nil) {
		t.Error("event=resync keeps a record of the renamed type")
	}
	k = kept{Events: map[string]bool{feed.RenamedPrefix + "resync": true}}
	if !k.keeps(nil, func() string { return recordType(rec) }, nil) {
		t.Error("event=record.resync drops the renamed record")
	}
}

// TestOwnFrameHasNoMeta: on a WebSocket, a resync the feed published goes out without the meta line of a
// record (partition, offset, key), and every record with one, keyless ones too: a client tells records from the
// gateway's messages by it. Before, the resync had one, and a WebSocket page took it for a record; and a
// keyless record after a keyed one in the ring (whose key is then empty, not nil) had a meta line of two
// fields, which read as none: the page took it by its type.
func TestOwnFrameHasNoMeta(t *testing.T) {
	f := newFeeder(t, 1<<20)
	f.publishRaw([]rawFrame{
		{rest: "event: resync\ndata: {\"reason\":\"retention\"}\n\n", own: true},
		{rest: "event: resync\ndata: r\n\n", key: []byte("k")},
		{rest: "event: resync\ndata: keyless\n\n"},
	})
	frames, _, _, err := f.rg.ReadFrames(0, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{t: &Topic{Ring: f.rg}, meta: true, stats: new(Stats)}
	for _, fr := range frames {
		c.deliverFrame(fr, &c.p)
	}
	want := "id: v1:0-0\nevent: resync\ndata: {\"reason\":\"retention\"}\n\n" +
		"id: v1:0-1\n::m 0 1 aw==\nevent: resync\ndata: r\n\n" +
		"id: v1:0-2\n::m 0 2 -\nevent: resync\ndata: keyless\n\n"
	if string(c.buf) != want {
		t.Fatalf("frames\n%q\nwant\n%q", c.buf, want)
	}
	s := &wsSink{o: WSOptions{Format: "json"}, topic: "t", opened: true}
	msg := s.appendMessage(nil, parseWSFrame([]byte(want[:strings.Index(want, "\n\n")+1])))
	if string(msg) != `{"data":{"reason":"retention"},"event":"resync","id":"v1:0-0"}` {
		t.Errorf("the resync's message %s", msg)
	}
	last := want[strings.LastIndex(want[:len(want)-2], "\n\n")+2:]
	if msg := s.appendMessage(nil, parseWSFrame([]byte(last))); string(msg) != `{"data":"keyless","event":"resync","id":"v1:0-2","offset":2,"partition":0}` {
		t.Errorf("the keyless record's message %s", msg)
	}
}
