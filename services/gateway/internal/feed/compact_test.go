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

// compactRun is topic "t" of a feed with compact ids through held checkpoints (h), its partitions 0 to
// parts-1 read from offset 0 and its Kafka id known (so its first checkpoint is started), with what a test
// of its frame ids needs: the position after each record as the test counts it, and the checkpoints acked.
type compactRun struct {
	t      testing.TB
	tp     *Topic
	h      *heldCheckpoints
	parts  int32
	cursor uint64
	want   position.Vector
	next   map[int32]int64
	acked  map[position.Ref]position.Vector
}

func newCompactRun(t testing.TB, parts int32, cfg Config) *compactRun {
	t.Helper()
	h := &heldCheckpoints{}
	cfg.Topics, cfg.Checkpoints = []string{"t"}, h
	if cfg.RingBytes == 0 {
		cfg.RingBytes = 1 << 20
	}
	f, err := NewWith(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &compactRun{t: t, tp: f.Topic("t"), h: h, parts: parts, next: map[int32]int64{}, acked: map[position.Ref]position.Vector{}}
	var ps []int32
	zeros := map[int32]int64{}
	for p := range parts {
		ps = append(ps, p)
		zeros[p] = 0
	}
	r.tp.assign(ps, zeros, zeros, true, 0)
	r.tp.setID([16]byte{1})
	r.cursor, _ = r.tp.ring.Start(nil)
	return r
}

// record returns the next record of partition q, and counts it in the position.
func (r *compactRun) record(q int32) Fetched {
	rec := &kgo.Record{Topic: "t", Partition: q, Offset: r.next[q], Value: []byte("x")}
	r.next[q]++
	r.want.Set(q, rec.Offset)
	return Fetched{Topic: "t", Partition: q, Records: []*kgo.Record{rec}, First: rec.Offset, Next: rec.Offset + 1, LastStable: -1, LogStart: -1}
}

// ids returns the ids of the frames published since the last call.
func (r *compactRun) ids() []string {
	frames, next, _, err := r.tp.ring.ReadFrames(r.cursor, nil, 64<<20)
	if err != nil {
		r.t.Fatal(err)
	}
	r.cursor = next
	ids := make([]string, 0, len(frames))
	for _, fr := range frames {
		ids = append(ids, string(fr.Bytes[len("id: "):bytes.IndexByte(fr.Bytes, '\n')]))
	}
	return ids
}

// publish frames n records to partitions p, p+1, ..., each in a poll of its own, and returns their ids with
// the position each must say.
func (r *compactRun) publish(n int, p int32) (ids []string, wants []position.Vector) {
	for i := range n {
		r.tp.publish([]Fetched{r.record((p + int32(i)) % r.parts)})
		wants = append(wants, r.want.Clone())
	}
	if ids = r.ids(); len(ids) != n {
		r.t.Fatalf("%d frames, want %d", len(ids), n)
	}
	return ids, wants
}

// check checks that every id says its position, through the checkpoints the test acknowledged, and returns
// how many were compact.
func (r *compactRun) check(ids []string, wants []position.Vector) (compact int) {
	r.t.Helper()
	for i, id := range ids {
		var got position.Vector
		var err error
		if position.IsCompact(id) {
			c, err := position.ParseCompact(id)
			if err != nil {
				r.t.Fatal(err)
			}
			base, ok := r.acked[c.Ref()]
			if !ok {
				r.t.Fatalf("id %s names checkpoint %v, which was not acknowledged", id, c.Ref())
			}
			if got, err = c.Apply(base); err != nil {
				r.t.Fatal(err)
			}
			compact++
		} else if got, err = position.Parse(id); err != nil {
			r.t.Fatal(err)
		}
		if !got.Equal(wants[i]) {
			r.t.Fatalf("id %s says %s, want %s", id, got, wants[i])
		}
	}
	return compact
}

// ack acknowledges checkpoint write i as the record at ref.
func (r *compactRun) ack(i int, ref position.Ref) {
	c := r.h.call(r.t, i)
	r.acked[ref] = c.v
	c.done(ref, nil)
}

// fail ends checkpoint write i with an error.
func (r *compactRun) fail(i int) { r.h.call(r.t, i).done(position.Ref{}, errors.New("kafka is down")) }

// TestCompactFrameIDs: frame ids name only checkpoints Kafka acknowledged, of the topic's current epoch, and
// always say the exact position.
func TestCompactFrameIDs(t *testing.T) {
	const parts = 16
	r := newCompactRun(t, parts, Config{})
	// The first checkpoint is started when the topic's id is known, once however many metadata refreshes
	// tell it again; until Kafka acknowledges it, v1 ids.
	r.tp.setID([16]byte{1})
	r.tp.setID([16]byte{1})
	if r.h.count() != 1 {
		t.Fatalf("%d checkpoint writes at start, want 1", r.h.count())
	}
	if n := r.check(r.publish(5, 0)); n != 0 {
		t.Fatalf("%d compact ids before any checkpoint was acknowledged", n)
	}
	r.ack(0, position.Ref{Partition: 0, Offset: 7})
	ids, wants := r.publish(3, 5)
	if n := r.check(ids, wants); n != 3 {
		t.Fatalf("%d of 3 ids compact after the acknowledgement: %q", n, ids)
	}
	// Ids that grow past the threshold start another checkpoint.
	r.check(r.publish(parts, 0))
	if r.h.count() != 2 {
		t.Fatalf("%d checkpoint writes after the ids grew, want 2", r.h.count())
	}
	// A failed write is never named; the next one may be started.
	r.fail(1)
	r.check(r.publish(2*parts, 1))
	if r.h.count() != 3 {
		t.Fatalf("%d checkpoint writes after a failure, want 3", r.h.count())
	}
	r.ack(2, position.Ref{Partition: 0, Offset: 9})
	ids, wants = r.publish(1, 4)
	if r.check(ids, wants) != 1 {
		t.Fatalf("id after the second acknowledgement: %q", ids)
	}
	if c, _ := position.ParseCompact(ids[0]); c.Ref().Record() != (position.Ref{Partition: 0, Offset: 9}) {
		t.Fatalf("id %s names %v, want the newest checkpoint", ids[0], c.Ref())
	}

	// The topic is deleted and created again: the old checkpoints are of another topic.
	var ps []int32
	for p := range int32(parts) {
		ps = append(ps, p)
	}
	r.tp.recreated([16]byte{2}, ps)
	r.want = position.Vector{}
	clear(r.next)
	ids, wants = r.publish(2, 0)
	if n := r.check(ids, wants); n != 0 {
		t.Fatalf("%d compact ids naming a checkpoint of the deleted topic: %q", n, ids)
	}
	if last := r.h.call(t, r.h.count()-1); last.kid != ([16]byte{2}) {
		t.Fatalf("checkpoint after the recreation has topic id %v, want the new one", last.kid)
	}
}

// TestCheckpointsInFlight: while checkpoints wait for Kafka, others start as the position moves on, up to
// the bound; an older one acknowledged late never replaces a newer base; failures give their place back.
func TestCheckpointsInFlight(t *testing.T) {
	const parts = 16
	r := newCompactRun(t, parts, Config{})
	r.ack(0, position.Ref{Partition: 0, Offset: 7})
	r.check(r.publish(parts, 0))
	if r.h.count() != 2 {
		t.Fatalf("%d checkpoint writes after the ids grew, want 2", r.h.count())
	}
	// While it waits, another starts only once the position moved well past it, not at every frame.
	r.check(r.publish(3, 3))
	if r.h.count() != 2 {
		t.Fatalf("%d checkpoint writes a step past the one in flight, want 2", r.h.count())
	}
	r.check(r.publish(4*parts, 0))
	if n := r.h.count(); n < 3 {
		t.Fatalf("%d checkpoint writes after the position moved far past the one in flight, want more than 2", n)
	}
	// However far it moves, at most defaultCheckpointsInFlight wait at once.
	r.check(r.publish(40*parts, 0))
	if n := r.h.count(); n != 1+defaultCheckpointsInFlight {
		t.Fatalf("%d checkpoint writes, want %d: the acknowledged one and %d in flight", n, 1+defaultCheckpointsInFlight, defaultCheckpointsInFlight)
	}
	// Acknowledged out of order, the newer checkpoint stays the base.
	newest := r.h.count() - 1
	r.ack(newest, position.Ref{Partition: 0, Offset: 12})
	r.ack(newest-1, position.Ref{Partition: 0, Offset: 11})
	ids, wants := r.publish(1, 4)
	if r.check(ids, wants) != 1 {
		t.Fatalf("id after the acknowledgements: %q", ids)
	}
	if c, _ := position.ParseCompact(ids[0]); c.Ref().Record() != (position.Ref{Partition: 0, Offset: 12}) {
		t.Fatalf("id %s names %v, want the newest checkpoint, not the one acknowledged last", ids[0], c.Ref())
	}
	for i := 1; i < newest-1; i++ {
		r.fail(i)
	}
	if a, f, _ := r.tp.Checkpoints(); a != 3 || f != int64(newest-2) {
		t.Fatalf("Checkpoints = %d acked, %d failed; want 3 and %d", a, f, newest-2)
	}
	// With every place taken, failures give theirs back: the next write starts.
	r.check(r.publish(40*parts, 2))
	full := r.h.count()
	if r.tp.cpInFlight.Load() != defaultCheckpointsInFlight {
		t.Fatalf("%d checkpoints in flight, want all %d places taken", r.tp.cpInFlight.Load(), defaultCheckpointsInFlight)
	}
	for i := full - defaultCheckpointsInFlight; i < full; i++ {
		r.fail(i)
	}
	r.check(r.publish(4*parts, 3))
	if r.h.count() == full {
		t.Fatal("no checkpoint write after every one in flight failed")
	}
}
