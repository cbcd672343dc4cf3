package ring

// Batch stages frames for one Publish. The writer appends each frame's bytes to Buf and then calls Add with
// the grown buffer; Publish copies them into the ring in one step, under one lock, with one wake-up.
// A Batch is reused across publishes (Reset) so staging allocates nothing in steady state. It is not safe
// for concurrent use.
type Batch struct {
	buf   []byte
	keys  []byte
	items []item
}

type item struct {
	partition int32
	offset    int64
	end       int // end of the frame in buf; it starts where the previous one ended
	keyEnd    int // end of the record's key in keys, likewise
	own       bool
}

// Buf returns the staging buffer to append the next frame to.
func (b *Batch) Buf() []byte { return b.buf }

// Add records the frame appended to the buffer returned by Buf: buf must be that buffer with exactly one
// frame appended. partition, offset and key are those of the record the frame carries (the key is kept for
// key-filtered streams; it is copied).
func (b *Batch) Add(buf []byte, partition int32, offset int64, key []byte) {
	b.buf = buf
	b.keys = append(b.keys, key...)
	b.items = append(b.items, item{partition: partition, offset: offset, end: len(buf), keyEnd: len(b.keys)})
}

// AddOwn is Add for a frame of the gateway's own (a resync the feed publishes), which carries no record: a
// reader knows it by Frame.Own, never by its event type, which a record could carry too. partition and offset
// are where it moves the position to.
func (b *Batch) AddOwn(buf []byte, partition int32, offset int64) {
	b.Add(buf, partition, offset, nil)
	b.items[len(b.items)-1].own = true
}

// Len returns the number of frames staged.
func (b *Batch) Len() int { return len(b.items) }

// Bytes returns the number of frame bytes staged.
func (b *Batch) Bytes() int { return len(b.buf) }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.buf = b.buf[:0]
	b.keys = b.keys[:0]
	b.items = b.items[:0]
}
