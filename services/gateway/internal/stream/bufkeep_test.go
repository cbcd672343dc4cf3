package stream

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ssegate/ssegate/services/gateway/internal/valuefilter"
)

// TestSnapshotBufferReleased: a filtered stream's snapshot (8 MiB here) goes out through the stream's buffer;
// once it went out (the "live" frame sent), the stream keeps a buffer of what a live write carries, not one of
// the snapshot's size for the rest of its life.
func TestSnapshotBufferReleased(t *testing.T) {
	f, err := valuefilter.Compile(`key != ""`)
	if err != nil {
		t.Fatal(err)
	}
	out := &discardSink{}
	c := &conn{s: NewServer(Config{}), t: &Topic{}, p: kept{Filter: f}, stats: &Stats{}, out: out}
	c.startSnapshot(false)
	rest := []byte("data: " + string(bytes.Repeat([]byte("x"), 1000)) + "\n\n")
	for i := range 8 << 10 {
		c.cf.hold(0, int64(i), fmt.Appendf(nil, "k%d", i), rest, false, 1)
	}
	if err := c.endSnapshot(); err != nil {
		t.Fatal(err)
	}
	if out.n < 8_000_000 {
		t.Fatalf("the snapshot wrote %d bytes, want 8 MB", out.n)
	}
	if limit := 2 * c.s.cfg.MaxWriteBytes; cap(c.buf) > limit {
		t.Errorf("after the snapshot the stream keeps a buffer of %d bytes, want at most %d", cap(c.buf), limit)
	}
}

// TestMuxPendingReleased: a stream of several topics keeps, per topic, the bytes of a frame not whole yet; a
// snapshot's piece of 256 KiB that ends inside a frame leaves that frame's start there, not a 256 KiB array
// for the rest of the stream.
func TestMuxPendingReleased(t *testing.T) {
	ts := []TopicStream{{Topic: &Topic{Name: "a"}}}
	m := newMux(ts, &discardSink{})
	var piece []byte
	piece = append(piece, "id: v1:\n\n"...) // the opening block
	for i := 0; len(piece) < writePiece; i++ {
		piece = fmt.Appendf(piece, "id: v1:0-%d\ndata: %0100d\n\n", i, i)
	}
	piece = append(piece, "id: v1:0-99999\ndata: par"...) // a frame the next piece ends
	if _, err := m.write(0, 0, [][]byte{piece}, 0); err != nil {
		t.Fatal(err)
	}
	if string(m.pend[0]) != "id: v1:0-99999\ndata: par" {
		t.Fatalf("pending %q", m.pend[0])
	}
	if cap(m.pend[0]) > slowFlushBytes {
		t.Errorf("the topic keeps %d bytes pending, for %d of a frame", cap(m.pend[0]), len(m.pend[0]))
	}
}
