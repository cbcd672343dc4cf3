package ring

import (
	"fmt"
	"math/bits"
	"sort"
	"sync"
	"unsafe"
)

// Default sizes. A chunk is the unit frames are copied into; a frame larger than a chunk gets a chunk of its own.
// Without a chunk size of its own, a ring uses chunks of a sixteenth of its capacity, from MinChunkSize to
// DefaultChunkSize, so that a chunk held by its last frames is a small part of what the ring may hold.
const (
	DefaultChunkSize = 256 << 10
	MinChunkSize     = 4 << 10
	minEntries       = 64
	minQueue         = 64
)

// EntryBytes is the memory the ring counts per entry slot of its circular buffer, and IndexBytes per slot of a
// partition's index: with their power-of-two buffers a frame costs between one and two of each on top of its
// bytes and its key's.
const (
	EntryBytes = int(unsafe.Sizeof(entry{}))
	IndexBytes = 8
)

// Ring is a bounded log of SSE frames in publish order, addressed by a sequence number that starts at 0 and
// grows by one per frame. See the package documentation for how connections use it.
//
// A ring is bounded by its capacity in bytes of memory: the chunks its frames and keys are in (whole, from the
// oldest one a frame is still in to the current one), its entry buffer and its per-partition index. Publish
// and SetCapacity evict the oldest frames until what the ring holds fits, so memory is freed a chunk at a time.
type Ring struct {
	chunkSize int // fixed chunk size; zero: from the capacity

	mu        sync.RWMutex
	capacity  int
	ents      []entry // circular, len is a power of two; frame seq lives at ents[seq&mask]
	mask      uint64
	head      uint64 // seq of the next frame to publish
	tail      uint64 // seq of the oldest frame held; tail == head when empty
	bytes     int    // frame bytes held
	chunk     []byte // current chunk; frames are appended at len(chunk)
	chunkN    uint64 // number of the current chunk, to tell adjacent frames apart from frames in other chunks
	kchunk    []byte // current chunk of record keys, kept apart so that frames stay adjacent
	kchunkN   uint64 // number of the current key chunk
	chunks    chunkQueue
	kchunks   chunkQueue
	idxSlots  int // slots of every partition's index buffer
	wake      chan struct{}
	headID    []byte
	low       map[int32]int64
	index     map[int32]*seqQueue // per partition, the sequence numbers of its frames in the ring, ascending
	evicted   uint64              // frames evicted so far
	published uint64              // frame bytes published so far
	idx       *keyIndex           // nil without a key index (keyindex.go)
}

type entry struct {
	key        []byte // the record's key, in a key chunk
	buf        []byte // the whole chunk the frame lives in
	chunk      uint64
	kchunk     uint64
	start, end int
	partition  int32
	own        bool // a frame of the gateway's own (Batch.AddOwn); in partition's padding, so free
	offset     int64
}

// chunkQueue holds the sizes of the chunks a ring holds, oldest first; the first is number first.
type chunkQueue struct {
	sizes []int
	first uint64
	total int
}

// add records chunk number n of size bytes (numbers come in order, one more each time).
func (q *chunkQueue) add(n uint64, size int) {
	if len(q.sizes) == 0 {
		q.first = n
	}
	q.sizes = append(q.sizes, size)
	q.total += size
}

// release drops the chunks numbered below n.
func (q *chunkQueue) release(n uint64) {
	for len(q.sizes) > 0 && q.first < n {
		q.total -= q.sizes[0]
		q.sizes = q.sizes[1:]
		q.first++
	}
}

// New returns an empty ring that holds at most capacity bytes of memory (at least the newest frame is always
// kept, whatever its size). chunkSize is the size of the memory blocks frames are copied into, capped at the
// capacity; zero means a sixteenth of the capacity, from MinChunkSize to DefaultChunkSize.
func New(capacity, chunkSize int) (*Ring, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("ring: capacity must be positive, got %d", capacity)
	}
	if chunkSize < 0 {
		return nil, fmt.Errorf("ring: chunk size must not be negative, got %d", chunkSize)
	}
	return &Ring{
		capacity:  capacity,
		chunkSize: chunkSize,
		ents:      make([]entry, minEntries),
		mask:      minEntries - 1,
		wake:      make(chan struct{}),
		low:       make(map[int32]int64),
		index:     make(map[int32]*seqQueue),
	}, nil
}

// Publish appends the frames staged in b, evicts the oldest frames beyond the byte bound, records id as the
// position after the last frame (what Start hands to new cursors), and wakes every waiting cursor. b may be
// empty, to set the position alone. Publish must not be called concurrently with itself.
func (r *Ring) Publish(b *Batch, id []byte) {
	r.mu.Lock()
	r.headID = append(r.headID[:0], id...)
	if len(b.items) == 0 {
		r.mu.Unlock()
		return
	}
	// Frames are copied one by one, each into the current chunk when it fits and else into a new one, so that
	// no chunk is larger than the chunk size or a single frame: a whole fetch in one chunk would be evicted
	// as one, and could be larger than the ring.
	chunkSize := r.chunkLen()
	from, kfrom := 0, 0
	for _, it := range b.items {
		frame, key := b.buf[from:it.end], b.keys[kfrom:it.keyEnd]
		from, kfrom = it.end, it.keyEnd
		if r.head-r.tail == uint64(len(r.ents)) {
			r.grow()
		}
		e := &r.ents[r.head&r.mask]
		*e = entry{partition: it.partition, offset: it.offset, own: it.own}
		r.copyIn(e, frame, key, chunkSize)
		start, end := e.start, e.end
		if _, ok := r.low[it.partition]; !ok {
			r.low[it.partition] = it.offset
		}
		q := r.index[it.partition]
		if q == nil {
			q = &seqQueue{}
			r.index[it.partition] = q
		}
		r.idxSlots += q.push(r.head)
		if r.idx != nil {
			r.idx.put(it.partition, it.offset, r.head, frame, key)
		}
		r.head++
		r.bytes += end - start
		r.published += uint64(end - start) //nolint:gosec // a frame's length is not negative
		r.evict()
	}
	old := r.wake
	r.wake = make(chan struct{})
	r.mu.Unlock()
	close(old)
}

// chunkLen is the size of the next chunk. It needs r.mu held.
func (r *Ring) chunkLen() int {
	if r.chunkSize > 0 {
		return min(r.chunkSize, r.capacity)
	}
	return min(max(r.capacity/16, MinChunkSize), DefaultChunkSize, r.capacity)
}

// memory is what the ring holds: its chunks, its entry buffer, its index. It needs r.mu held.
func (r *Ring) memory() int {
	return r.chunks.total + r.kchunks.total + len(r.ents)*EntryBytes + r.idxSlots*IndexBytes
}

// evict drops the oldest frames until what the ring holds fits its capacity, keeping at least the newest
// frame. A chunk is released when its last frame goes (the current chunk stays: it is filled next), and the
// entry buffer halves when a quarter of it is in use. A cursor at an evicted frame gets ErrBehind, as when
// publishing wraps the ring. It needs r.mu held for writing.
func (r *Ring) evict() {
	for r.memory() > r.capacity && r.head-r.tail > 1 {
		r.dropTail()
		next := &r.ents[r.tail&r.mask]
		r.chunks.release(next.chunk)
		r.kchunks.release(next.kchunk)
		if n := len(r.ents); n > minEntries && r.head-r.tail <= uint64(n/4) {
			r.resize(n / 2)
		}
	}
	if r.memory() > r.capacity && r.head-r.tail == 1 {
		r.compactLast()
	}
}

// dropTail evicts the oldest frame, without releasing chunks. It needs r.mu held for writing.
func (r *Ring) dropTail() {
	e := &r.ents[r.tail&r.mask]
	r.bytes -= e.end - e.start
	if q := r.index[e.partition]; q != nil && q.n > 0 && q.at(0) == r.tail {
		// Not indexed when the partition was forgotten after this frame was published.
		r.idxSlots += q.pop()
		r.low[e.partition] = max(r.low[e.partition], e.offset+1) // never below a Trim
	}
	*e = entry{} // drop the chunk reference
	r.tail++
	r.evicted++
}

// rechunk copies the newest frames that fit the capacity into chunks of the size the capacity gives, and
// evicts the older ones. A ring that shrinks to a fraction of its capacity would otherwise keep the chunks of
// the larger one, a sixteenth of it each and counted whole, with room for few frames or none. Cursors holding
// spans of the old chunks keep them. It needs r.mu held for writing.
func (r *Ring) rechunk() {
	size := r.chunkLen()
	// What k frames and their keys may take: the capacity without their entries (a buffer of the power of two
	// at or above 2k), their index (two slots each, and the smallest buffer per partition) and the unused ends
	// of chunks (a chunk, a key chunk, and what frames that did not fit left before them).
	room := func(k int) int {
		ents := max(minEntries, 1<<bits.Len(uint(2*k-1)))
		return r.capacity - ents*EntryBytes - (2*k+minQueue*len(r.index))*IndexBytes - 3*size
	}
	keep, used := r.head-1, 0
	for s, k := r.head, 1; s > r.tail; s, k = s-1, k+1 {
		e := &r.ents[(s-1)&r.mask]
		if used += e.end - e.start + len(e.key); used > room(k) && k > 1 {
			break
		}
		keep = s - 1
	}
	for r.tail < keep {
		r.dropTail()
	}
	r.chunks, r.kchunks, r.chunk, r.kchunk = chunkQueue{}, chunkQueue{}, nil, nil
	for s := r.tail; s < r.head; s++ {
		e := &r.ents[s&r.mask]
		r.copyIn(e, e.buf[e.start:e.end], e.key, size)
	}
	if r.kchunk == nil {
		r.kchunkN++ // a key chunk of none, so that the frames' old key chunks are not taken for it
		for s := r.tail; s < r.head; s++ {
			r.ents[s&r.mask].kchunk = r.kchunkN
		}
	}
	if n := max(minEntries, 1<<bits.Len(uint(2*(r.head-r.tail)-1))); n < len(r.ents) {
		r.resize(n)
	}
}

// copyIn copies frame and key into the ring's current chunks (a new chunk of size, or of the frame's size
// when it is larger, once the current one is full; key chunks a quarter of that) and points e at the copies.
// The caller holds mu.
func (r *Ring) copyIn(e *entry, frame, key []byte, size int) {
	if cap(r.chunk)-len(r.chunk) < len(frame) {
		r.chunk = make([]byte, 0, max(size, len(frame)))
		r.chunkN++
		r.chunks.add(r.chunkN, cap(r.chunk))
	}
	start := len(r.chunk)
	r.chunk = append(r.chunk, frame...)
	if len(key) > 0 && cap(r.kchunk)-len(r.kchunk) < len(key) {
		r.kchunk = make([]byte, 0, max(size/4, len(key)))
		r.kchunkN++
		r.kchunks.add(r.kchunkN, cap(r.kchunk))
	}
	kstart := len(r.kchunk)
	r.kchunk = append(r.kchunk, key...)
	e.buf, e.chunk, e.start, e.end = r.chunk[:cap(r.chunk)], r.chunkN, start, len(r.chunk)
	e.key, e.kchunk = r.kchunk[kstart:len(r.kchunk):len(r.kchunk)], r.kchunkN
}

// compactLast copies the one frame left, and its key, into chunks of the size the capacity gives, when the
// chunks it is in are larger: a ring that shrank from a large capacity (its chunks a sixteenth of that) would
// otherwise keep a large chunk for its newest frame. Cursors holding spans of the old chunk keep them. It
// needs r.mu held for writing.
func (r *Ring) compactLast() {
	e := &r.ents[r.tail&r.mask]
	size, ksize := max(r.chunkLen(), e.end-e.start), max(r.chunkLen()/4, len(e.key))
	if size+ksize >= r.chunks.total+r.kchunks.total {
		return // a frame larger than the ring: nothing smaller holds it
	}
	r.chunk = append(make([]byte, 0, size), e.buf[e.start:e.end]...)
	r.chunkN++
	r.chunks.release(r.chunkN)
	r.chunks.add(r.chunkN, cap(r.chunk))
	e.buf, e.start, e.end, e.chunk = r.chunk[:cap(r.chunk)], 0, len(r.chunk), r.chunkN
	r.kchunkN++
	r.kchunks.release(r.kchunkN)
	r.kchunk = nil
	if len(e.key) > 0 {
		r.kchunk = append(make([]byte, 0, ksize), e.key...)
		r.kchunks.add(r.kchunkN, cap(r.kchunk))
	}
	e.key, e.kchunk = r.kchunk[:len(r.kchunk):len(r.kchunk)], r.kchunkN
}

// grow doubles the entry buffer. It needs r.mu held for writing.
func (r *Ring) grow() { r.resize(len(r.ents) * 2) }

// resize moves the entries into a buffer of n slots, a power of two that holds them all. It needs r.mu held
// for writing.
func (r *Ring) resize(n int) {
	ents := make([]entry, n)
	for s := r.tail; s < r.head; s++ {
		ents[s&uint64(n-1)] = r.ents[s&r.mask]
	}
	r.ents = ents
	r.mask = uint64(n - 1)
}

// SetCapacity changes how many bytes of memory the ring may hold. A smaller capacity evicts the oldest frames
// at once, exactly as publishing does when the ring is full: cursors still reading them get ErrBehind and
// catch up some other way.
func (r *Ring) SetCapacity(capacity int) {
	if capacity <= 0 {
		return
	}
	r.mu.Lock()
	shrinks := capacity < r.capacity
	r.capacity = capacity
	if shrinks && r.memory() > capacity && cap(r.chunk) > r.chunkLen() && r.head > r.tail {
		r.rechunk()
	}
	r.evict()
	r.mu.Unlock()
}

// SetLow records that the ring holds every record of partition from offset on, when nothing of that partition
// was published yet. The Kafka reader calls it with the offset it starts reading a partition at, so that the
// ring can later answer whether it still holds a given position.
func (r *Ring) SetLow(partition int32, offset int64) {
	r.mu.Lock()
	if _, ok := r.low[partition]; !ok {
		r.low[partition] = offset
	}
	r.mu.Unlock()
}

// Touch records id as the position after the last frame, as an empty Publish does, and wakes every waiting
// cursor: the feed calls it when the topic changed under the streams (it was created again), so that they
// look at once.
func (r *Ring) Touch(id []byte) {
	r.mu.Lock()
	r.headID = append(r.headID[:0], id...)
	old := r.wake
	r.wake = make(chan struct{})
	r.mu.Unlock()
	close(old)
}

// Trim records that Kafka no longer holds the partition's records below offset (its low watermark, after
// retention or DeleteRecords): Seek answers no offset below it, whatever frames the ring still holds, so a
// resume is answered the same way by a pod that holds those frames and by one that never did. It does
// nothing for a partition the ring knows nothing of.
func (r *Ring) Trim(partition int32, offset int64) {
	r.mu.Lock()
	if low, ok := r.low[partition]; ok && offset > low {
		r.low[partition] = offset
	}
	if r.idx != nil {
		r.idx.trim(partition, offset)
	}
	r.mu.Unlock()
}

// Forget makes the ring forget what it knows of a partition (its topic was deleted and created again, so its
// offsets start over): Seek answers nothing of it until its next frame, and its frames still in the ring
// are no longer indexed. The frames themselves stay until evicted; cursors reading through them get them.
func (r *Ring) Forget(partition int32) {
	r.mu.Lock()
	delete(r.low, partition)
	if r.idx != nil {
		r.idx.forget(partition)
	}
	if q := r.index[partition]; q != nil {
		r.idxSlots -= len(q.buf)
		delete(r.index, partition)
	}
	r.mu.Unlock()
}

// Start returns the sequence number a new cursor starts at (the next frame to be published) and appends to
// dst the position id that goes with it (the id passed to the latest Publish).
func (r *Ring) Start(dst []byte) (uint64, []byte) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.head, append(dst, r.headID...)
}

// Read appends to spans the frames from sequence number from on, merging frames that are adjacent in memory
// into one span, and stops after maxBytes (but always returns at least one frame when one is available). It
// returns the grown spans, the sequence number to read next, and a channel that is closed when frames after
// the ones returned are published. It returns ErrBehind when from was already evicted.
func (r *Ring) Read(from uint64, spans [][]byte, maxBytes int) ([][]byte, uint64, <-chan struct{}, error) {
	spans, _, next, wake, err := r.ReadLast(from, spans, maxBytes)
	return spans, next, wake, err
}

// ReadLast is Read that also returns the last frame it read (nil when none): a reader that knows its position
// by the last frame's id gets that frame without searching the spans for where it begins, once per reader
// and write.
func (r *Ring) ReadLast(from uint64, spans [][]byte, maxBytes int) ([][]byte, []byte, uint64, <-chan struct{}, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if from < r.tail {
		return spans, nil, from, r.wake, ErrBehind
	}
	next := min(from, r.head)
	n := 0
	var lastChunk uint64
	var last []byte
	lastEnd, spanStart := -1, 0
	for next < r.head && (n == 0 || n < maxBytes) {
		e := &r.ents[next&r.mask]
		if e.chunk == lastChunk && e.start == lastEnd {
			spans[len(spans)-1] = e.buf[spanStart:e.end:e.end]
		} else {
			spans = append(spans, e.buf[e.start:e.end:e.end])
			spanStart = e.start
		}
		last = e.buf[e.start:e.end:e.end]
		lastChunk, lastEnd = e.chunk, e.end
		n += e.end - e.start
		next++
	}
	return spans, last, next, r.wake, nil
}

// Head returns the sequence number of the next frame to be published.
func (r *Ring) Head() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.head
}

// Wake returns the channel the next Publish closes. A caller that reads everything up to the head after
// taking it misses no frame: frames published after the read close it.
func (r *Ring) Wake() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.wake
}

// Stats is a snapshot of a ring's size.
type Stats struct {
	Frames    int    // frames held
	Bytes     int    // frame bytes held
	Memory    int    // bytes of memory held (chunks, entries, index), what the capacity bounds
	Capacity  int    // the capacity (see SetCapacity)
	Head      uint64 // sequence number of the next frame
	Tail      uint64 // sequence number of the oldest frame held
	Evicted   uint64 // frames evicted since the ring was made
	Published uint64 // frame bytes published since the ring was made
}

// Stats returns the ring's current size.
func (r *Ring) Stats() Stats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return Stats{
		Frames: int(r.head - r.tail), Bytes: r.bytes, Memory: r.memory(), Capacity: r.capacity,
		Head: r.head, Tail: r.tail, Evicted: r.evicted, Published: r.published,
	}
}

// Low calls fn, outside the ring's lock, with each partition and the oldest offset from which the ring holds
// all of that partition's records (see SetLow).
func (r *Ring) Low(fn func(partition int32, offset int64)) {
	r.mu.RLock()
	type pl struct {
		p int32
		o int64
	}
	all := make([]pl, 0, len(r.low))
	for p, o := range r.low {
		all = append(all, pl{p, o})
	}
	r.mu.RUnlock()
	for _, x := range all {
		fn(x.p, x.o)
	}
}

// Frame is one frame with the Kafka coordinates of its record, as returned by ReadFrames.
type Frame struct {
	Partition int32
	Offset    int64
	Key       []byte // the record's key; immutable
	Bytes     []byte // the whole SSE frame, starting with its "id:" line; immutable
	// Own says the frame is the gateway's own (Batch.AddOwn), not a record's: what it is, whatever its bytes
	// say.
	Own bool
	seq uint64 // its sequence number (KeySnapshot sorts by it)
}

// ReadFrames is Read for callers that look at each frame (to skip some or rewrite ids): it appends frames
// from sequence number from on to out, up to maxBytes (at least one), with the same results as Read.
func (r *Ring) ReadFrames(from uint64, out []Frame, maxBytes int) ([]Frame, uint64, <-chan struct{}, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if from < r.tail {
		return out, from, r.wake, ErrBehind
	}
	next := min(from, r.head)
	for n := 0; next < r.head && (n == 0 || n < maxBytes); next++ {
		e := &r.ents[next&r.mask]
		out = append(out, Frame{Partition: e.partition, Offset: e.offset, Key: e.key, Bytes: e.buf[e.start:e.end:e.end], Own: e.own})
		n += e.end - e.start
	}
	return out, next, r.wake, nil
}

// Seek returns the sequence number of the first frame of partition whose offset is at least offset, or the
// head when the ring holds none yet. ok is false when the ring does not hold every record of the partition
// from offset on (they were evicted, or were never read into it).
func (r *Ring) Seek(partition int32, offset int64) (seq uint64, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	low, known := r.low[partition]
	if !known || offset < low {
		return 0, false
	}
	q := r.index[partition]
	if q == nil {
		return r.head, true
	}
	i := sort.Search(q.n, func(i int) bool { return r.ents[q.at(i)&r.mask].offset >= offset })
	if i == q.n {
		return r.head, true
	}
	return q.at(i), true
}

// seqQueue is a FIFO of sequence numbers in a power-of-two circular buffer.
type seqQueue struct {
	buf  []uint64
	head int // index of the oldest element
	n    int
}

// push appends s and returns how many slots the buffer grew by.
func (q *seqQueue) push(s uint64) int {
	grew := 0
	if q.n == len(q.buf) {
		grew = q.resize(max(minQueue, 2*len(q.buf)))
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = s
	q.n++
	return grew
}

// pop drops the oldest element and returns how many slots the buffer grew by (negative: it halved when a
// quarter of it was in use).
func (q *seqQueue) pop() int {
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	if n := len(q.buf); n > minQueue && q.n <= n/4 {
		return q.resize(n / 2)
	}
	return 0
}

// resize moves the elements into a buffer of n slots and returns the change in slots.
func (q *seqQueue) resize(n int) int {
	nb := make([]uint64, n)
	for i := range q.n {
		nb[i] = q.at(i)
	}
	d := n - len(q.buf)
	q.buf, q.head = nb, 0
	return d
}

func (q *seqQueue) at(i int) uint64 { return q.buf[(q.head+i)&(len(q.buf)-1)] }
