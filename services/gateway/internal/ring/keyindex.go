package ring

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// The key index (EnableKeyIndex): for a topic of keyed state, the latest frame of every key, kept beside the
// ring and apart from its eviction, so that a snapshot (from=snapshot) is a copy of it rather than a read of
// the topic from its start. It holds the partition's latest record of each key (tombstones too: a tombstone is
// a key's latest record; snapshots leave them out), copied out of the ring's chunks, within a bound of memory.
//
// It is complete for a partition once it holds every record of the partition from the partition's log start
// on: the feed says from where it read the partition (IndexFrom), Kafka's log start comes with Trim, and
// records below the log start (retention, DeleteRecords) are dropped from it as they are from Kafka, so the
// index is what a read of the retained log would give. A record without a key cannot be indexed (a snapshot
// sends every one of them): the index then gives up, as it does when it outgrows its bound, for good.

// Errors of KeySnapshot: the index cannot give a snapshot, and a snapshot reads the topic instead.
var (
	ErrNoIndex         = errors.New("ring: no key index")
	ErrIndexIncomplete = errors.New("ring: the key index does not hold every partition from its log start")
)

// IndexStats is what a key index holds.
type IndexStats struct {
	Keys  int
	Bytes int
	// Dropped says why the index gave up, for good; empty while it is kept.
	Dropped string
}

// indexedOverhead is what an indexed key costs besides its frame and key bytes: its map entry and record.
const indexedOverhead = 112

type keyIndex struct {
	max     int
	bytes   int
	dropped string
	parts   map[int32]*partIndex
}

type partIndex struct {
	keys     map[string]*indexed
	from     int64 // the offset the index holds the partition from; -1 until known
	logStart int64 // Kafka's log start offset, as far as Trim said
}

// indexed is a key's latest record: its ring sequence number, offset and frame (a copy, as the ring has it).
type indexed struct {
	seq    uint64
	offset int64
	key    []byte
	frame  []byte
}

func (e *indexed) cost() int { return len(e.frame) + len(e.key) + indexedOverhead }

func (x *keyIndex) part(p int32) *partIndex {
	pi := x.parts[p]
	if pi == nil {
		pi = &partIndex{keys: map[string]*indexed{}, from: -1}
		x.parts[p] = pi
	}
	return pi
}

// drop gives the index up for good, freeing what it holds.
func (x *keyIndex) drop(why string) {
	x.dropped, x.parts, x.bytes = why, nil, 0
}

// put records a published frame as its key's latest record.
func (x *keyIndex) put(p int32, off int64, seq uint64, frame, key []byte) {
	if x.dropped != "" {
		return
	}
	if len(key) == 0 {
		// A record without a key (a snapshot sends every one of them), or a resync the feed published for
		// records retention removed before it read them (the index would lack them).
		x.drop(fmt.Sprintf("a frame without a key at partition %d offset %d", p, off))
		return
	}
	pi := x.part(p)
	if pi.from < 0 {
		pi.from = off
	}
	e := pi.keys[string(key)]
	if e == nil {
		e = &indexed{key: append([]byte(nil), key...)}
		pi.keys[string(e.key)] = e
	} else {
		x.bytes -= e.cost()
	}
	// A new copy each time: a snapshot taken before may still be reading the old one.
	e.seq, e.offset, e.frame = seq, off, append([]byte(nil), frame...)
	if x.bytes += e.cost(); x.bytes > x.max {
		x.drop(fmt.Sprintf("it outgrew its bound of %d bytes", x.max))
	}
}

// trim drops the records below the partition's new log start.
func (x *keyIndex) trim(p int32, logStart int64) {
	if x.dropped != "" {
		return
	}
	pi := x.part(p)
	if logStart <= pi.logStart {
		return
	}
	pi.logStart = logStart
	for k, e := range pi.keys {
		if e.offset < logStart {
			x.bytes -= e.cost()
			delete(pi.keys, k)
		}
	}
}

// forget drops a partition (its topic was created again): it is incomplete until read from its start again.
func (x *keyIndex) forget(p int32) {
	if pi := x.parts[p]; pi != nil {
		for _, e := range pi.keys {
			x.bytes -= e.cost()
		}
		delete(x.parts, p)
	}
}

// EnableKeyIndex makes the ring keep a key index of at most maxBytes (frames, keys and bookkeeping), before
// anything is published.
func (r *Ring) EnableKeyIndex(maxBytes int) {
	r.mu.Lock()
	r.idx = &keyIndex{max: maxBytes, parts: map[int32]*partIndex{}}
	r.mu.Unlock()
}

// IndexFrom records that the feed reads partition from offset on, every record of it: the index holds the
// partition from there (or from its first record, when that is earlier).
func (r *Ring) IndexFrom(partition int32, offset int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idx == nil || r.idx.dropped != "" {
		return
	}
	if pi := r.idx.part(partition); pi.from < 0 || offset < pi.from {
		pi.from = offset
	}
}

// KeySnapshot appends to out the key index's frames of the partitions parts (nil: every partition it knows),
// in the order they were published, and returns the sequence number and position id that follow the last of
// them (as Start does): a snapshot up to that cut. The frames are the index's own, immutable. It fails with
// ErrNoIndex without an index (or one that gave up) and ErrIndexIncomplete when a partition of parts is not
// held from its log start.
func (r *Ring) KeySnapshot(out []Frame, parts []int32, dst []byte) ([]Frame, uint64, []byte, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	x := r.idx
	if x == nil || x.dropped != "" {
		return out, 0, dst, ErrNoIndex
	}
	if parts == nil {
		for p := range x.parts {
			parts = append(parts, p)
		}
	}
	n := len(out)
	for _, p := range parts {
		pi := x.parts[p]
		if pi == nil || pi.from < 0 || pi.from > pi.logStart {
			return out[:n], 0, dst, fmt.Errorf("%w: partition %d", ErrIndexIncomplete, p)
		}
		for _, e := range pi.keys {
			out = append(out, Frame{Partition: p, Offset: e.offset, Key: e.key, Bytes: e.frame, seq: e.seq})
		}
	}
	slices.SortFunc(out[n:], func(a, b Frame) int { return cmp.Compare(a.seq, b.seq) })
	return out, r.head, append(dst, r.headID...), nil
}

// KeyIndexStats returns what the key index holds; ok is false without one.
func (r *Ring) KeyIndexStats() (s IndexStats, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.idx == nil {
		return s, false
	}
	s = IndexStats{Bytes: r.idx.bytes, Dropped: r.idx.dropped}
	for _, pi := range r.idx.parts {
		s.Keys += len(pi.keys)
	}
	return s, true
}
