package main

import (
	"cmp"
	"fmt"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// owed is what one resume must still receive and checks each frame against it, partition by partition:
// every partition's records after the position in offset order with none left out or repeated, across
// partitions in the gateway's replay order (a merge by record timestamp, ties by partition), and each frame's
// id the position advanced by that record.
type owed struct {
	recs    []sent          // every record the run wrote, recs[i].Seq == i: a frame's seq names its record
	parts   [][]sent        // per partition, the records still owed, in offset order
	cur     position.Vector // the position once the frames checked so far are counted
	left    int             // records still owed, over all partitions
	checked int             // frames checked and found right
	id      []byte          // the id the last frame had to carry (a buffer reused frame to frame)
}

// newOwed returns what a client that has recs[:have] (at position pos) is owed: recs[have:]. Each partition's
// records were written one after another, so recs keeps them in offset order.
func newOwed(recs []sent, have int, pos position.Vector) *owed {
	o := &owed{recs: recs, cur: pos.Clone(), left: len(recs) - have}
	for _, r := range recs[have:] {
		for int(r.Partition) >= len(o.parts) {
			o.parts = append(o.parts, nil)
		}
		o.parts[r.Partition] = append(o.parts[r.Partition], r)
	}
	return o
}

// replayOrder orders two records as the gateway's replay does: by record timestamp, which Kafka keeps in
// milliseconds (the tool's copy is cut to them too, whatever the client library keeps), ties by partition.
// Within a partition the offsets decide, and there the timestamps of records written one after another do not
// go back.
func replayOrder(a, b sent) int {
	if c := a.Timestamp.Truncate(time.Millisecond).Compare(b.Timestamp.Truncate(time.Millisecond)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
		return c
	}
	return cmp.Compare(a.Offset, b.Offset)
}

// check checks the next frame. An error says which partition went wrong and how.
func (o *owed) check(ev sse.Event) error {
	if ev.Type != "" && ev.Type != "message" {
		return fmt.Errorf("event %q (id %q), want a record", ev.Type, ev.ID)
	}
	seq, ok := seqOf(ev.Data)
	if !ok || seq < 0 || seq >= int64(len(o.recs)) || o.recs[seq].Seq != seq {
		return fmt.Errorf("id %q: data %.60q is not a record this run wrote", ev.ID, ev.Data)
	}
	r := o.recs[seq]
	var q []sent
	if int(r.Partition) < len(o.parts) {
		q = o.parts[r.Partition]
	}
	switch {
	case len(q) == 0:
		return fmt.Errorf("partition %d: offset %d (record %d) again or before the position: nothing more is owed there", r.Partition, r.Offset, seq)
	case q[0].Offset != r.Offset:
		return fmt.Errorf("partition %d: offset %d (record %d), want offset %d (record %d)", r.Partition, r.Offset, seq, q[0].Offset, q[0].Seq)
	}
	for p, other := range o.parts {
		if p != int(r.Partition) && len(other) > 0 && replayOrder(other[0], r) < 0 {
			return fmt.Errorf("partition %d: offset %d (record %d, %s) came before partition %d's offset %d (record %d, %s), which the replay's order puts first",
				r.Partition, r.Offset, seq, stamp(r.Timestamp), p, other[0].Offset, other[0].Seq, stamp(other[0].Timestamp))
		}
	}
	o.cur.Set(r.Partition, r.Offset)
	o.id, _ = o.cur.AppendText(o.id[:0])
	if ev.ID != string(o.id) {
		return fmt.Errorf("partition %d: offset %d (record %d) has id %q, want %q", r.Partition, r.Offset, seq, ev.ID, o.id)
	}
	o.parts[r.Partition] = q[1:]
	o.left--
	o.checked++
	return nil
}

// stamp formats a record timestamp to the millisecond, as Kafka keeps it.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }
