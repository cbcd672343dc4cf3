package ring

import (
	"errors"
	"fmt"
	"testing"
)

// publishKeyed publishes one frame of partition p at offset off with key k and value v.
func publishKeyed(r *Ring, p int32, off int64, k, v string) {
	var b Batch
	b.Add(fmt.Appendf(b.Buf(), "id: v1:%d-%d\ndata: %s\n\n", p, off, v), p, off, []byte(k))
	r.Publish(&b, fmt.Appendf(nil, "v1:%d-%d", p, off))
}

// TestKeyIndex: the index keeps each key's latest frame per partition in publish order, whatever the ring
// evicts; it is complete only for partitions read from their log start; retention drops what it passes; a
// snapshot's frames stay as they were when a key changes after it.
func TestKeyIndex(t *testing.T) {
	r, err := New(600, 0) // a few frames: the index outlives the ring's eviction
	if err != nil {
		t.Fatal(err)
	}
	r.EnableKeyIndex(1 << 20)
	if _, _, _, err := r.KeySnapshot(nil, []int32{0}, nil); !errors.Is(err, ErrIndexIncomplete) {
		t.Fatalf("before anything: %v, want incomplete", err)
	}
	r.IndexFrom(0, 0)
	r.IndexFrom(1, 5)
	r.Trim(1, 3) // partition 1 was read from 5, but its log starts at 3: incomplete
	for i := range 20 {
		publishKeyed(r, int32(i%2), int64(5+i/2), fmt.Sprintf("k%d", i%4), fmt.Sprintf("v%d", i))
	}
	if _, _, _, err := r.KeySnapshot(nil, []int32{0, 1}, nil); !errors.Is(err, ErrIndexIncomplete) {
		t.Fatalf("partition 1 not read from its log start: %v, want incomplete", err)
	}
	fs, head, id, err := r.KeySnapshot(nil, []int32{0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 0 has k0 (v16, offset 13) and k2 (v18, offset 14); the head follows the last frame.
	if len(fs) != 2 || fs[0].Offset != 13 || string(fs[0].Key) != "k0" || fs[1].Offset != 14 || head != 20 || string(id) != "v1:1-14" {
		t.Fatalf("snapshot %+v head %d id %s", fs, head, id)
	}
	held := string(fs[1].Bytes)
	publishKeyed(r, 0, 15, "k2", "changed")
	if string(fs[1].Bytes) != held {
		t.Fatalf("a snapshot's frame changed under it: %q", fs[1].Bytes)
	}
	r.Trim(0, 14) // k0's latest (13) is gone from Kafka
	fs, _, _, _ = r.KeySnapshot(fs[:0], []int32{0}, nil)
	if len(fs) != 1 || string(fs[0].Key) != "k2" || fs[0].Offset != 15 {
		t.Fatalf("after retention: %+v, want k2 at 15 alone", fs)
	}
	if st, _ := r.KeyIndexStats(); st.Keys != 3 || st.Dropped != "" { // k2 of partition 0, k1 and k3 of 1
		t.Fatalf("stats %+v", st)
	}
	r.Forget(0)
	if _, _, _, err := r.KeySnapshot(nil, []int32{0}, nil); !errors.Is(err, ErrIndexIncomplete) {
		t.Fatalf("a forgotten partition: %v, want incomplete until read again", err)
	}
	// A frame without a key gives the index up for good.
	publishKeyed(r, 1, 20, "", "no key")
	if _, _, _, err := r.KeySnapshot(nil, nil, nil); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("after a frame without a key: %v", err)
	}
	if st, _ := r.KeyIndexStats(); st.Dropped == "" || st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("stats after giving up %+v", st)
	}
}

// TestKeyIndexBound: the index gives up once it holds more than its bound, and a replaced key's frame counts
// once.
func TestKeyIndexBound(t *testing.T) {
	r, _ := New(1<<20, 0)
	r.EnableKeyIndex(10 * (indexedOverhead + 40))
	r.IndexFrom(0, 0)
	for i := range 100 { // one key, rewritten: stays small
		publishKeyed(r, 0, int64(i), "k", "v")
	}
	if st, _ := r.KeyIndexStats(); st.Dropped != "" || st.Keys != 1 {
		t.Fatalf("one key rewritten: %+v", st)
	}
	for i := range 20 {
		publishKeyed(r, 0, int64(100+i), fmt.Sprint("k", i), "v")
	}
	if st, _ := r.KeyIndexStats(); st.Dropped == "" {
		t.Fatalf("20 keys in a bound of about 10: %+v", st)
	}
}
