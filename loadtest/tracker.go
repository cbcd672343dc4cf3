package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

// tracker checks one client's stream for loss and duplication using the position ids alone.
//
// The tool's producer is not transactional, so a partition's offsets are contiguous: a complete stream
// advances the id vector by exactly one offset in exactly one partition per frame. The tracker keeps, per
// partition, the highest offset the client has been given (high). For each frame it sums how far the id
// moved past high over all partitions (adv):
//
//   - adv == 1: one new record, delivered;
//   - adv == k > 1: one record delivered and k-1 records skipped (lost);
//   - adv == 0: nothing new, the frame repeats something the client already had (duplicate).
//
// Records still owed at the end (below the topic's end offsets) are counted as lost by finish. A resume's
// opening id that is ahead of high skips records (lost); one behind high makes the replayed frames count
// as duplicates.
//
// A tracker is written by its connection's goroutine and read by the coordinator, so every method locks mu.
type tracker struct {
	mu        sync.Mutex
	skips     bool     // a shaped stream (--shape): frames skip records on purpose, which shapeCheck judges
	topics    []string // a stream of several topics (--topics): its topics, whose ids are one vector (topics.go)
	started   bool
	high      []int64 // per partition, -1 = nothing seen
	lastID    string
	delivered int64
	lost      int64
	dup       int64
	bad       int64 // frames whose id did not parse

	target    []int64   // when set, reachedAt is stamped once high covers target
	reachedAt time.Time // zero until target is reached

	// Compact ids: cps resolves their checkpoints (nil: a compact id is a bad id). A checkpoint's entries are
	// raised once, when a frame first names it; later frames naming it only move their own entries.
	cps     *checkpoints
	lastRef position.Ref
	haveRef bool
	scratch []position.Entry
	v1      int64 // frames with a v1 id
}

func (t *tracker) offset(p int32) int64 {
	if int(p) < len(t.high) {
		return t.high[p]
	}
	return -1
}

// raise moves high[p] to off if that is ahead, and returns by how many offsets it moved.
func (t *tracker) raise(p int32, off int64) int64 {
	for int(p) >= len(t.high) {
		t.high = append(t.high, -1)
	}
	if off <= t.high[p] {
		return 0
	}
	adv := off - t.high[p]
	t.high[p] = off
	return adv
}

// decoded is an id taken apart for advance: a v1 vector, or a compact id with its checkpoint's vector.
type decoded struct {
	v       position.Vector
	compact bool
	c       position.Compact
	base    position.Vector
}

// decode parses id and, for a compact one, fetches its checkpoint. It does not lock: it may wait for Kafka.
func (t *tracker) decode(id string) (decoded, error) {
	if t.topics != nil {
		v, err := topicsVector(id, t.topics, t.cps)
		return decoded{v: v}, err
	}
	if !position.IsCompact(id) {
		v, err := position.Parse(id)
		return decoded{v: v}, err
	}
	if t.cps == nil {
		return decoded{}, fmt.Errorf("compact id %q without a position topic", id)
	}
	c, err := position.ParseCompact(id)
	if err != nil {
		return decoded{}, err
	}
	base, err := t.cps.base(c.Ref())
	return decoded{compact: true, c: c, base: base}, err
}

// advance raises high to the position d says and returns by how many offsets it moved. The caller holds mu.
func (t *tracker) advance(d decoded) (int64, error) {
	var adv int64
	if !d.compact {
		for i := range d.v.Len() {
			e := d.v.At(i)
			adv += t.raise(e.Partition, e.Offset)
		}
		return adv, nil
	}
	es, err := d.c.AppendEntries(t.scratch[:0], d.base)
	t.scratch = es[:0]
	if err != nil {
		return 0, err
	}
	if !t.haveRef || t.lastRef != d.c.Ref() {
		// high only grows, so a checkpoint's own entries need raising once.
		for i := range d.base.Len() {
			e := d.base.At(i)
			adv += t.raise(e.Partition, e.Offset)
		}
		t.lastRef, t.haveRef = d.c.Ref(), true
	}
	for _, e := range es {
		adv += t.raise(e.Partition, e.Offset)
	}
	return adv, nil
}

// open takes the id of a stream's opening block. The first one sets the starting position: everything after
// it is owed. Later ones (resumes) are checked against what the client had.
func (t *tracker) open(id string, now time.Time) error {
	d, err := t.decode(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	var adv int64
	if err == nil {
		adv, err = t.advance(d)
	}
	if err != nil {
		t.bad++
		return fmt.Errorf("opening id %q: %w", id, err)
	}
	t.lastID = id
	if t.started {
		t.lost += adv
	}
	t.started = true
	t.checkTarget(&lazyClock{now})
	return nil
}

// exactFrom takes a snapshot's cut (the live event's id) as the client's position: from there frames skip no
// record (skips ends).
func (t *tracker) exactFrom(id string) {
	d, err := t.decode(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		_, err = t.advance(d)
	}
	if err != nil {
		t.bad++
		return
	}
	t.lastID, t.skips = id, false
}

// frame accounts for one event with the given id, received at clk's time.
func (t *tracker) frame(id string, clk *lazyClock) {
	d, err := t.decode(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	var adv int64
	if err == nil {
		adv, err = t.advance(d)
	}
	if err != nil {
		t.bad++
		return
	}
	if !d.compact {
		t.v1++
	}
	t.lastID = id
	if adv == 0 {
		t.dup++
	} else {
		t.delivered++
		if !t.skips {
			t.lost += adv - 1
		}
	}
	t.checkTarget(clk)
}

// checkTarget stamps reachedAt with clk's time when high covers target; the clock is read only then. The
// caller holds mu.
func (t *tracker) checkTarget(clk *lazyClock) {
	if t.target == nil || !t.reachedAt.IsZero() {
		return
	}
	for p, end := range t.target {
		if t.offset(int32(p)) < end-1 {
			return
		}
	}
	t.reachedAt = clk.now()
}

// setTarget sets the end offsets (next offset per partition) the client must reach, and clears reachedAt.
func (t *tracker) setTarget(ends []int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.target = ends
	t.reachedAt = time.Time{}
	t.checkTarget(&lazyClock{now})
}

// reached returns when the target was reached, or the zero time.
func (t *tracker) reached() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reachedAt
}

// caughtUp reports whether high covers ends (next offset per partition).
func (t *tracker) caughtUp(ends []int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, end := range ends {
		if t.offset(int32(p)) < end-1 {
			return false
		}
	}
	return true
}

// finish counts the records below ends (next offset per partition) that the client never got as lost.
// It is called once, after the stream has stopped.
func (t *tracker) finish(ends []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		return
	}
	for p, end := range ends {
		if h := t.offset(int32(p)); h < end-1 {
			t.lost += end - 1 - h
		}
	}
}

// trackerCounts is a snapshot of a tracker's counters.
type trackerCounts struct {
	Delivered int64 `json:"delivered"`
	Lost      int64 `json:"lost"`
	Dup       int64 `json:"duplicated"`
	BadIDs    int64 `json:"bad_ids"`
}

func (t *tracker) counts() trackerCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return trackerCounts{Delivered: t.delivered, Lost: t.lost, Dup: t.dup, BadIDs: t.bad}
}

// v1Frames returns how many frames had a v1 id.
func (t *tracker) v1Frames() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.v1
}

// last returns the last id the client got (the one to resume from).
func (t *tracker) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastID
}
