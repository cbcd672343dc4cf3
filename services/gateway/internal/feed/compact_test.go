package feed

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
)

// heldCheckpoints is a Checkpointer whose writes are acknowledged (or failed) only when the test says so.
type heldCheckpoints struct {
	mu    sync.Mutex
	calls []heldCall
}

type heldCall struct {
	kid  [16]byte
	v    position.Vector
	done func(position.Ref, error)
}

func (h *heldCheckpoints) Write(_ string, kid [16]byte, v position.Vector, done func(position.Ref, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, heldCall{kid, v, done})
}

func (h *heldCheckpoints) call(t testing.TB, i int) heldCall {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if i >= len(h.calls) {
		t.Fatalf("checkpoint write %d was not started (%d were)", i, len(h.calls))
	}
	return h.calls[i]
}

func (h *heldCheckpoints) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

// TestCompactFrameIDs: frame ids name only checkpoints Kafka acknowledged, of the topic's current epoch, and
// always say the exact position.
func TestCompactFrameIDs(t *testing.T) {
	const parts = 16
	h := &heldCheckpoints{}
	f, err := NewWith(Config{Topics: []string{"t"}, RingBytes: 1 << 20, Checkpoints: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := f.Topic("t")
	var ps []int32
	zeros := map[int32]int64{}
	for p := range int32(parts) {
		ps = append(ps, p)
		zeros[p] = 0
	}
	tp.assign(ps, zeros, zeros, true, 0)
	tp.setID([16]byte{1})
	cursor, _ := tp.ring.Start(nil)

	var want position.Vector // the position after each record, as the test counts it
	next := map[int32]int64{}
	// publish frames n records to partitions p, p+1, ... and returns their ids with the position each must say.
	publish := func(n int, p int32) (ids []string, wants []position.Vector) {
		var fs []Fetched
		for i := range n {
			q := (p + int32(i)) % parts
			rec := &kgo.Record{Topic: "t", Partition: q, Offset: next[q], Value: []byte("x")}
			fs = append(fs, Fetched{Topic: "t", Partition: q, Records: []*kgo.Record{rec}, First: next[q], Next: next[q] + 1, LastStable: -1, LogStart: -1})
			next[q]++
			want.Set(q, rec.Offset)
			wants = append(wants, want.Clone())
		}
		for _, x := range fs {
			tp.publish([]Fetched{x})
		}
		frames, nextCursor, _, err := tp.ring.ReadFrames(cursor, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		cursor = nextCursor
		for _, fr := range frames {
			ids = append(ids, string(fr.Bytes[len("id: "):bytes.IndexByte(fr.Bytes, '\n')]))
		}
		if len(ids) != n {
			t.Fatalf("%d frames, want %d", len(ids), n)
		}
		return ids, wants
	}
	// check checks that every id says its position, through the checkpoints the test acknowledged.
	acked := map[position.Ref]position.Vector{}
	check := func(ids []string, wants []position.Vector) (compact int) {
		t.Helper()
		for i, id := range ids {
			var got position.Vector
			if position.IsCompact(id) {
				c, err := position.ParseCompact(id)
				if err != nil {
					t.Fatal(err)
				}
				base, ok := acked[c.Ref()]
				if !ok {
					t.Fatalf("id %s names checkpoint %v, which was not acknowledged", id, c.Ref())
				}
				if got, err = c.Apply(base); err != nil {
					t.Fatal(err)
				}
				compact++
			} else if got, err = position.Parse(id); err != nil {
				t.Fatal(err)
			}
			if !got.Equal(wants[i]) {
				t.Fatalf("id %s says %s, want %s", id, got, wants[i])
			}
		}
		return compact
	}
	ack := func(i int, ref position.Ref) {
		c := h.call(t, i)
		acked[ref] = c.v
		c.done(ref, nil)
	}

	// The first checkpoint is started when the topic's id is known, once however many metadata refreshes
	// tell it again; until Kafka acknowledges it, v1 ids.
	tp.setID([16]byte{1})
	tp.setID([16]byte{1})
	if h.count() != 1 {
		t.Fatalf("%d checkpoint writes at start, want 1", h.count())
	}
	if n := check(publish(5, 0)); n != 0 {
		t.Fatalf("%d compact ids before any checkpoint was acknowledged", n)
	}
	ack(0, position.Ref{Partition: 0, Offset: 7})
	ids, wants := publish(3, 5)
	if n := check(ids, wants); n != 3 {
		t.Fatalf("%d of 3 ids compact after the acknowledgement: %q", n, ids)
	}
	// Ids that grow past the threshold start another checkpoint.
	check(publish(parts, 0))
	if h.count() != 2 {
		t.Fatalf("%d checkpoint writes after the ids grew, want 2", h.count())
	}
	// While it waits, another starts only once the position moved well past it, not at every frame.
	check(publish(3, 3))
	if h.count() != 2 {
		t.Fatalf("%d checkpoint writes a step past the one in flight, want 2", h.count())
	}
	check(publish(4*parts, 0))
	if n := h.count(); n < 3 {
		t.Fatalf("%d checkpoint writes after the position moved far past the one in flight, want more than 2", n)
	}
	// However far it moves, at most defaultCheckpointsInFlight wait at once.
	check(publish(40*parts, 0))
	if n := h.count(); n != 1+defaultCheckpointsInFlight {
		t.Fatalf("%d checkpoint writes, want %d: the acknowledged one and %d in flight", n, 1+defaultCheckpointsInFlight, defaultCheckpointsInFlight)
	}
	// Acknowledged out of order, the newer checkpoint stays the base.
	newest := h.count() - 1
	ack(newest, position.Ref{Partition: 0, Offset: 12})
	ack(newest-1, position.Ref{Partition: 0, Offset: 11})
	ids, wants = publish(1, 4)
	if check(ids, wants) != 1 {
		t.Fatalf("id after the acknowledgements: %q", ids)
	}
	if c, _ := position.ParseCompact(ids[0]); c.Ref() != (position.Ref{Partition: 0, Offset: 12}) {
		t.Fatalf("id %s names %v, want the newest checkpoint, not the one acknowledged last", ids[0], c.Ref())
	}
	// A failed write is never named, and frees its place.
	for i := 1; i < newest-1; i++ {
		h.call(t, i).done(position.Ref{}, errors.New("kafka is down"))
	}
	before := h.count()
	ids, wants = publish(4*parts, 1)
	check(ids, wants)
	if h.count() == before {
		t.Fatal("no checkpoint write after the failures")
	}
	ack(before, position.Ref{Partition: 0, Offset: 19})
	ids, wants = publish(1, 4)
	if check(ids, wants) != 1 || !bytes.Contains([]byte(ids[0]), []byte("v2:")) {
		t.Fatalf("id after the acknowledgement: %q", ids)
	}
	if c, _ := position.ParseCompact(ids[0]); c.Ref() != (position.Ref{Partition: 0, Offset: 19}) {
		t.Fatalf("id %s names %v, want the newest checkpoint", ids[0], c.Ref())
	}
	if a, f, _ := tp.Checkpoints(); a != 4 || f != int64(newest-2) {
		t.Fatalf("Checkpoints = %d acked, %d failed; want 4 and %d", a, f, newest-2)
	}
	// With every place taken, failures give theirs back: the next write starts.
	check(publish(40*parts, 2))
	full := h.count()
	if tp.cpInFlight.Load() != defaultCheckpointsInFlight {
		t.Fatalf("%d checkpoints in flight, want all %d places taken", tp.cpInFlight.Load(), defaultCheckpointsInFlight)
	}
	for i := full - defaultCheckpointsInFlight; i < full; i++ {
		h.call(t, i).done(position.Ref{}, errors.New("kafka is down"))
	}
	check(publish(4*parts, 3))
	if h.count() == full {
		t.Fatal("no checkpoint write after every one in flight failed")
	}

	// The topic is deleted and created again: the old checkpoints are of another topic.
	tp.recreated([16]byte{2}, ps)
	want = position.Vector{}
	clear(next)
	ids, wants = publish(2, 0)
	if n := check(ids, wants); n != 0 {
		t.Fatalf("%d compact ids naming a checkpoint of the deleted topic: %q", n, ids)
	}
	last := h.call(t, h.count()-1)
	if last.kid != ([16]byte{2}) {
		t.Fatalf("checkpoint after the recreation has topic id %v, want the new one", last.kid)
	}
}
