package ring

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func publish(t testing.TB, r *Ring, b *Batch, partition int32, offsets ...int64) {
	t.Helper()
	b.Reset()
	for _, o := range offsets {
		b.Add(fmt.Appendf(b.Buf(), "p%d-o%d;", partition, o), partition, o, fmt.Appendf(nil, "k%d", o))
	}
	r.Publish(b, fmt.Appendf(nil, "id-%d-%d", partition, offsets[len(offsets)-1]))
}

func readAll(t *testing.T, r *Ring, from uint64) (string, uint64) {
	t.Helper()
	spans, next, _, err := r.Read(from, nil, 1<<30)
	if err != nil {
		t.Fatalf("Read(%d): %v", from, err)
	}
	return string(bytes.Join(spans, nil)), next
}

func TestPublishRead(t *testing.T) {
	r, err := New(1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	seq, id := r.Start(nil)
	if seq != 0 || len(id) != 0 {
		t.Fatalf("empty ring Start = %d %q", seq, id)
	}
	publish(t, r, &b, 0, 10, 11)
	publish(t, r, &b, 1, 5)
	got, next := readAll(t, r, 0)
	if want := "p0-o10;p0-o11;p1-o5;"; got != want || next != 3 {
		t.Fatalf("Read = %q next %d, want %q next 3", got, next, want)
	}
	got, next = readAll(t, r, 2)
	if got != "p1-o5;" || next != 3 {
		t.Fatalf("Read(2) = %q next %d", got, next)
	}
	got, next = readAll(t, r, 3)
	if got != "" || next != 3 {
		t.Fatalf("Read(head) = %q next %d", got, next)
	}
	seq, id = r.Start(nil)
	if seq != 3 || string(id) != "id-1-5" {
		t.Fatalf("Start = %d %q, want 3 id-1-5", seq, id)
	}
}

func TestReadMergesAdjacentFrames(t *testing.T) {
	r, _ := New(1<<20, 1<<10)
	var b Batch
	for i := range int64(10) {
		publish(t, r, &b, 0, i)
	}
	spans, next, _, err := r.Read(0, nil, 1<<30)
	if err != nil || next != 10 {
		t.Fatalf("Read: next %d err %v", next, err)
	}
	if len(spans) != 1 {
		t.Fatalf("10 frames published into one chunk came back as %d spans, want 1", len(spans))
	}
	// A chunk boundary splits spans: 1 KiB chunks, 100 frames of 8-9 bytes.
	for i := int64(10); i < 200; i++ {
		publish(t, r, &b, 0, i)
	}
	spans, next, _, _ = r.Read(0, nil, 1<<30)
	if next != 200 || len(spans) < 2 {
		t.Fatalf("200 frames over several chunks: next %d, %d spans", next, len(spans))
	}
	var want bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&want, "p0-o%d;", i)
	}
	if got := bytes.Join(spans, nil); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("joined spans differ from published frames")
	}
}

// TestReadLast: ReadLast returns the last frame it read, whether it ends a span merged from several frames,
// stands in a span of its own after a chunk boundary, or is cut off by maxBytes; nil when nothing was read.
func TestReadLast(t *testing.T) {
	r, _ := New(1<<20, 1<<10)
	var b Batch
	for i := range int64(200) { // 1 KiB chunks: several spans
		publish(t, r, &b, 0, i)
	}
	for _, tc := range []struct {
		from     uint64
		maxBytes int
		want     string
	}{
		{0, 1 << 30, "p0-o199;"},
		{0, 12, "p0-o1;"},
		{150, 1, "p0-o150;"},
		{199, 1 << 30, "p0-o199;"},
	} {
		spans, last, next, _, err := r.ReadLast(tc.from, nil, tc.maxBytes)
		if err != nil || len(spans) == 0 {
			t.Fatalf("ReadLast(%d): %v", tc.from, err)
		}
		if string(last) != tc.want {
			t.Errorf("ReadLast(%d, %d) last = %q, want %q", tc.from, tc.maxBytes, last, tc.want)
		}
		if joined := bytes.Join(spans, nil); !bytes.HasSuffix(joined, last) || next == tc.from {
			t.Errorf("ReadLast(%d, %d): last %q does not end the spans (next %d)", tc.from, tc.maxBytes, last, next)
		}
	}
	if _, last, _, _, err := r.ReadLast(200, nil, 100); err != nil || last != nil {
		t.Errorf("ReadLast at the head: last %q, err %v; want none", last, err)
	}
}

func TestReadMaxBytes(t *testing.T) {
	r, _ := New(1<<20, 0)
	var b Batch
	publish(t, r, &b, 0, 1, 2, 3, 4) // 4 frames of 6 bytes
	spans, next, _, _ := r.Read(0, nil, 12)
	if next != 2 || string(bytes.Join(spans, nil)) != "p0-o1;p0-o2;" {
		t.Fatalf("Read max 12 = %q next %d", bytes.Join(spans, nil), next)
	}
	spans, next, _, _ = r.Read(next, nil, 1) // always at least one frame
	if next != 3 || string(bytes.Join(spans, nil)) != "p0-o3;" {
		t.Fatalf("Read max 1 = %q next %d", bytes.Join(spans, nil), next)
	}
}

// publishEach publishes each offset in a batch of its own, with the key "k".
func publishEach(t testing.TB, r *Ring, b *Batch, partition int32, offsets ...int64) {
	t.Helper()
	for _, o := range offsets {
		b.Reset()
		b.Add(fmt.Appendf(b.Buf(), "p%d-o%d;", partition, o), partition, o, []byte("k"))
		r.Publish(b, fmt.Appendf(nil, "id-%d-%d", partition, o))
	}
}

// fixedMemory is what a ring with chunk size 1 holds besides its chunks (each batch then is a chunk of exactly
// its frame bytes, and a key chunk of its key bytes): the smallest entry buffer and one index per partition.
func fixedMemory(partitions int) int {
	return minEntries*EntryBytes + partitions*minQueue*IndexBytes
}

func TestEvictionAndLow(t *testing.T) {
	r, _ := New(fixedMemory(2)+5*7, 1) // 5 frames of 6 bytes with 1-byte keys
	var b Batch
	r.SetLow(0, 1)
	r.SetLow(1, 0)
	publishEach(t, r, &b, 0, 1, 2, 3)
	publishEach(t, r, &b, 1, 0, 1, 2, 3)
	st := r.Stats()
	if st.Frames != 5 || st.Bytes != 30 || st.Tail != 2 || st.Head != 7 || st.Evicted != 2 || st.Memory != st.Capacity {
		t.Fatalf("Stats = %+v", st)
	}
	if _, _, _, err := r.Read(1, nil, 100); !errors.Is(err, ErrBehind) {
		t.Fatalf("Read of an evicted seq: err %v, want ErrBehind", err)
	}
	got, _ := readAll(t, r, 2)
	if got != "p0-o3;p1-o0;p1-o1;p1-o2;p1-o3;" {
		t.Fatalf("after eviction Read = %q", got)
	}
	lows := map[int32]int64{}
	r.Low(func(p int32, o int64) { lows[p] = o })
	if lows[0] != 3 || lows[1] != 0 {
		t.Fatalf("Low = %v, want 0:3 1:0", lows)
	}
}

// TestChunksFreedWhole: a chunk counts until its last frame is evicted, so the frames of a chunk leave
// together; a batch is spread over chunks of the chunk size.
func TestChunksFreedWhole(t *testing.T) {
	r, _ := New(fixedMemory(1)+3*18, 18) // three chunks of three 6-byte frames, no keys
	var b Batch
	add := func(offsets ...int64) {
		b.Reset()
		for _, o := range offsets {
			b.Add(fmt.Appendf(b.Buf(), "p0-o%d;", o), 0, o, nil)
		}
		r.Publish(&b, []byte("id"))
	}
	add(1, 2, 3, 4, 5, 6, 7, 8, 9) // one batch, three chunks
	if st := r.Stats(); st.Tail != 0 || st.Frames != 9 || st.Memory != st.Capacity {
		t.Fatalf("before the ring is full: %+v", st)
	}
	add(10) // a fourth chunk: the first must go, all three of its frames
	if st := r.Stats(); st.Tail != 3 || st.Frames != 7 || st.Memory > st.Capacity {
		t.Fatalf("after one more frame: %+v", st)
	}
}

func TestNewestFrameAlwaysKept(t *testing.T) {
	r, _ := New(4, 0)
	var b Batch
	publish(t, r, &b, 0, 1, 2)
	got, next := readAll(t, r, 1)
	if got != "p0-o2;" || next != 2 {
		t.Fatalf("oversized frame: Read = %q next %d", got, next)
	}
}

// TestSetCapacity: a smaller capacity evicts the oldest frames at once, moves the partitions' lows and gives
// back the entry buffer; a cursor at an evicted frame gets ErrBehind; a larger one keeps more again.
func TestSetCapacity(t *testing.T) {
	r, _ := New(1<<20, 1)
	var b Batch
	r.SetLow(0, 0)
	for i := range int64(4000) {
		publishEach(t, r, &b, 0, i)
	}
	if st := r.Stats(); st.Tail != 0 || st.Memory > st.Capacity {
		t.Fatalf("before: %+v", st)
	}
	// Room for 100 frames of 10 bytes with their keys besides the smallest entry buffer. The buffer halves
	// when a quarter of it is in use, so it is down to its smallest once 32 frames are left: the shrink keeps
	// between 32 and 100.
	r.SetCapacity(fixedMemory(1) + 100*10)
	st := r.Stats()
	if st.Memory > st.Capacity || st.Frames < 32 || st.Frames > 100 || st.Head != 4000 {
		t.Fatalf("after shrinking: %+v", st)
	}
	if len(r.ents) != minEntries {
		t.Fatalf("entry buffer of %d slots for %d frames, want %d", len(r.ents), st.Frames, minEntries)
	}
	if _, _, _, err := r.Read(st.Tail-1, nil, 100); !errors.Is(err, ErrBehind) {
		t.Fatalf("Read of an evicted seq after shrinking: %v", err)
	}
	lows := map[int32]int64{}
	r.Low(func(p int32, o int64) { lows[p] = o })
	if lows[0] != int64(st.Tail) {
		t.Fatalf("low = %d, want %d (the oldest offset held)", lows[0], st.Tail)
	}
	if seq, ok := r.Seek(0, int64(st.Tail)); !ok || seq != st.Tail {
		t.Fatalf("Seek(oldest held) = %d %v", seq, ok)
	}
	if _, ok := r.Seek(0, int64(st.Tail)-1); ok {
		t.Fatal("Seek of an offset evicted by the shrink succeeded")
	}
	r.SetCapacity(1 << 20)
	publishEach(t, r, &b, 0, 4000, 4001)
	if st2 := r.Stats(); st2.Tail != st.Tail || st2.Frames != st.Frames+2 {
		t.Fatalf("after growing again: %+v, before %+v", st2, st)
	}
}

// TestMemoryNeverAboveCapacity publishes frames of many sizes in batches of many lengths over three
// partitions, shrinking and growing the capacity as it goes (by up to 64 times, below the size of the chunks in
// use, which then hold the newest frame alone and are compacted): what the ring holds never exceeds its
// capacity, and its count matches a recount of its chunks.
func TestMemoryNeverAboveCapacity(t *testing.T) {
	r, _ := New(256<<10, 0)
	var b Batch
	caps := []int{256 << 10, 64 << 10, 1 << 20, 100 << 10, 4 << 20, 64 << 10, 300 << 10}
	for i := range 20000 {
		if i%1000 == 0 {
			r.SetCapacity(caps[(i/1000)%len(caps)])
		}
		b.Reset()
		for j := range 1 + i%7 {
			frame := append(b.Buf(), bytes.Repeat([]byte{'x'}, 10+(i*31+j*17)%900)...)
			b.Add(frame, int32(j%3), int64(i), bytes.Repeat([]byte{'k'}, i%20))
		}
		r.Publish(&b, []byte("id"))
		st := r.Stats()
		if st.Memory > st.Capacity {
			t.Fatalf("publish %d: memory %d above capacity %d with %d frames", i, st.Memory, st.Capacity, st.Frames)
		}
		if i%997 == 0 {
			recount(t, r)
		}
	}
}

// recount checks the ring's count of its chunks and index slots against the entries it holds.
func recount(t *testing.T, r *Ring) {
	t.Helper()
	r.mu.RLock()
	defer r.mu.RUnlock()
	first := r.ents[r.tail&r.mask]
	if r.chunks.first != first.chunk || r.chunks.first+uint64(len(r.chunks.sizes))-1 != r.chunkN {
		t.Fatalf("chunks %d..+%d held, frames in %d..%d", r.chunks.first, len(r.chunks.sizes), first.chunk, r.chunkN)
	}
	slots := 0
	for _, q := range r.index {
		slots += len(q.buf)
	}
	if slots != r.idxSlots {
		t.Fatalf("index slots %d, counted %d", slots, r.idxSlots)
	}
}

func TestGrowKeepsOrder(t *testing.T) {
	r, _ := New(1<<30, 0)
	var b Batch
	const n = 5000
	for i := range int64(n) {
		publish(t, r, &b, int32(i%3), i)
	}
	spans, next, _, err := r.Read(0, nil, 1<<30)
	if err != nil || next != n {
		t.Fatalf("Read: next %d err %v", next, err)
	}
	var want bytes.Buffer
	for i := range n {
		fmt.Fprintf(&want, "p%d-o%d;", i%3, i)
	}
	if !bytes.Equal(bytes.Join(spans, nil), want.Bytes()) {
		t.Fatal("frames out of order after the entry buffer grew")
	}
}

func TestWakeClosesOnPublish(t *testing.T) {
	r, _ := New(1<<20, 0)
	var b Batch
	_, next, wake, _ := r.Read(0, nil, 100)
	select {
	case <-wake:
		t.Fatal("wake closed before anything was published")
	default:
	}
	r.Publish(&b, []byte("id-only")) // an empty batch moves the id but wakes no one
	select {
	case <-wake:
		t.Fatal("wake closed by an empty publish")
	default:
	}
	publish(t, r, &b, 0, 1)
	select {
	case <-wake:
	default:
		t.Fatal("wake not closed by a publish")
	}
	if got, _ := readAll(t, r, next); got != "p0-o1;" {
		t.Fatalf("Read after wake = %q", got)
	}
}

// TestConcurrentCursors runs readers against a publishing writer; with -race it checks the memory model, and
// every reader must see every frame exactly once, in order.
func TestConcurrentCursors(t *testing.T) {
	r, _ := New(1<<30, 4<<10)
	const frames, readers = 2000, 8
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			var cur uint64
			var got bytes.Buffer
			var spans [][]byte
			for cur < frames {
				var wake <-chan struct{}
				var err error
				spans, cur, wake, err = r.Read(cur, spans[:0], 512)
				if err != nil {
					t.Error(err)
					return
				}
				for _, s := range spans {
					got.Write(s)
				}
				if len(spans) == 0 {
					<-wake
				}
			}
			var want bytes.Buffer
			for i := range frames {
				fmt.Fprintf(&want, "p0-o%d;", i)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Error("a concurrent cursor saw frames out of order, missing or twice")
			}
		})
	}
	var b Batch
	for i := int64(0); i < frames; i += 4 {
		publish(t, r, &b, 0, i, i+1, i+2, i+3)
	}
	wg.Wait()
}

func TestNewRejectsBadSizes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		max, chunk   int
		wantErr      bool
		wantChunkCap int
	}{
		{name: "zero max", max: 0, wantErr: true},
		{name: "negative chunk", max: 10, chunk: -1, wantErr: true},
		{name: "chunk capped at max", max: 100, chunk: 1000, wantChunkCap: 100},
		{name: "default chunk", max: 1 << 30, wantChunkCap: DefaultChunkSize},
		{name: "a sixteenth of the capacity", max: 1 << 20, wantChunkCap: 64 << 10},
		{name: "at least the smallest chunk", max: 64 << 10, wantChunkCap: MinChunkSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.max, tc.chunk)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New(%d, %d) err = %v", tc.max, tc.chunk, err)
			}
			if err == nil && r.chunkLen() != tc.wantChunkCap {
				t.Fatalf("chunk size %d, want %d", r.chunkLen(), tc.wantChunkCap)
			}
		})
	}
}

func TestSeekAndReadFrames(t *testing.T) {
	r, _ := New(fixedMemory(2)+7*7+8, 1) // exactly the 8 frames below, with their 1-byte keys
	var b Batch
	r.SetLow(0, 1)
	publishEach(t, r, &b, 0, 1, 2)     // seq 0, 1
	publishEach(t, r, &b, 1, 7)        // seq 2
	publishEach(t, r, &b, 0, 3, 5)     // seq 3, 4 (offset 4 is a gap: a transaction marker)
	publishEach(t, r, &b, 1, 8, 9, 10) // seq 5, 6, 7
	for _, tc := range []struct {
		name      string
		partition int32
		offset    int64
		seq       uint64
		ok        bool
	}{
		{"first frame", 0, 1, 0, true},
		{"middle", 0, 3, 3, true},
		{"gap rounds up", 0, 4, 4, true},
		{"past the newest", 0, 6, 8, true},
		{"before low", 0, 0, 0, false},
		{"other partition", 1, 8, 5, true},
		{"unknown partition", 2, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, ok := r.Seek(tc.partition, tc.offset)
			if ok != tc.ok || (ok && seq != tc.seq) {
				t.Fatalf("Seek(%d, %d) = %d %v, want %d %v", tc.partition, tc.offset, seq, ok, tc.seq, tc.ok)
			}
		})
	}
	frames, next, _, err := r.ReadFrames(3, nil, 1<<20)
	if err != nil || next != 8 || len(frames) != 5 {
		t.Fatalf("ReadFrames(3) = %d frames next %d err %v", len(frames), next, err)
	}
	if f := frames[1]; f.Partition != 0 || f.Offset != 5 || string(f.Bytes) != "p0-o5;" {
		t.Fatalf("frame = %+v", f)
	}
	// Two more frames evict the oldest: partition 0 offsets 1 and 2 leave the ring.
	publishEach(t, r, &b, 1, 11, 12)
	if _, ok := r.Seek(0, 2); ok {
		t.Fatal("Seek of an evicted offset succeeded")
	}
	if seq, ok := r.Seek(0, 3); !ok || seq != 3 {
		t.Fatalf("Seek(0, 3) after eviction = %d %v", seq, ok)
	}
	if _, _, _, err := r.ReadFrames(1, nil, 100); !errors.Is(err, ErrBehind) {
		t.Fatalf("ReadFrames of an evicted seq: %v", err)
	}
}

// TestShrinkKeepsWhatFits: a ring shrunk to a sixty-fourth of its capacity, below the size of its chunks,
// copies its newest frames into chunks of the new size and keeps most of what fits, not only its newest frame;
// cursors reading the old chunks keep their bytes.
func TestShrinkKeepsWhatFits(t *testing.T) {
	r, _ := New(16<<20, 0)
	var b Batch
	frame := bytes.Repeat([]byte{'x'}, 1000)
	for i := range int64(15000) {
		b.Reset()
		b.Add(append(b.Buf(), frame...), int32(i%2), i/2, []byte("key"))
		r.Publish(&b, []byte("id"))
	}
	old, _, _, _ := r.Read(r.Stats().Head-1, nil, 1<<20)
	r.SetCapacity(256 << 10)
	st := r.Stats()
	if st.Memory > st.Capacity || st.Bytes < st.Capacity/2 {
		t.Fatalf("after shrinking to 256KiB: %+v, want at least half of it in frames", st)
	}
	got, next := readAll(t, r, st.Tail)
	if next != st.Head || len(got) != st.Bytes || !bytes.Equal(old[0], frame) {
		t.Fatalf("frames after the shrink: %d bytes up to %d, want %d up to %d", len(got), next, st.Bytes, st.Head)
	}
	if seq, ok := r.Seek(1, int64(st.Tail/2)+1); !ok || seq < st.Tail {
		t.Fatalf("Seek in the kept frames = %d %v (tail %d)", seq, ok, st.Tail)
	}
	recount(t, r)
	publish(t, r, &b, 0, 20000, 20001)
	if st2 := r.Stats(); st2.Memory > st2.Capacity {
		t.Fatalf("publishing after the shrink: %+v", st2)
	}
}

// TestOwnFrames: a frame staged with AddOwn is read back marked Own, and every other frame is not, whatever
// its bytes; the mark stays with the frame when the ring shrinks and copies its frames into smaller chunks.
func TestOwnFrames(t *testing.T) {
	r, err := New(1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.Add(append(b.Buf(), "same bytes;"...), 0, 0, nil)
	b.AddOwn(append(b.Buf(), "same bytes;"...), 0, 1)
	b.Add(append(b.Buf(), "record;"...), 0, 2, []byte("k"))
	r.Publish(&b, []byte("id-0-2"))
	check := func(when string) {
		t.Helper()
		frames, _, _, err := r.ReadFrames(0, nil, 1<<20)
		if err != nil || len(frames) != 3 {
			t.Fatalf("%s: %d frames, %v", when, len(frames), err)
		}
		for i, want := range []bool{false, true, false} {
			if frames[i].Own != want || frames[i].Offset != int64(i) {
				t.Errorf("%s: frame %d (%q) Own %t offset %d, want %t", when, i, frames[i].Bytes, frames[i].Own, frames[i].Offset, want)
			}
		}
		if string(frames[2].Key) != "k" || len(frames[1].Key) != 0 {
			t.Errorf("%s: keys %q %q", when, frames[1].Key, frames[2].Key)
		}
	}
	check("published")
	r.SetCapacity(64 << 10)
	check("shrunk")
}
