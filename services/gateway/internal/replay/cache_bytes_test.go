package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// batchLog is a Log whose answers are built as franz-go decodes a fetch: the records of an answer are new,
// in one slice, and their keys, values and header values point into one buffer of the answer's bytes. A
// record kept therefore keeps the whole answer, as a decoded *kgo.Record keeps its batch. answered, if not
// nil, gets each answer's buffer and record slice.
type batchLog struct {
	replay.Log
	answered func(buf []byte, recs []kgo.Record)
}

func (l *batchLog) Fetch(ctx context.Context, topic string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	recs, next, err := l.Log.Fetch(ctx, topic, partition, offset)
	if err != nil || len(recs) == 0 {
		return recs, next, err
	}
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			n += len(h.Value)
		}
	}
	buf := make([]byte, 0, n)
	into := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	decoded := make([]kgo.Record, len(recs))
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		d := &decoded[i]
		d.Topic, d.Partition, d.Offset, d.Timestamp = r.Topic, r.Partition, r.Offset, r.Timestamp
		d.Key, d.Value = into(r.Key), into(r.Value)
		for _, h := range r.Headers {
			d.Headers = append(d.Headers, kgo.RecordHeader{Key: h.Key, Value: into(h.Value)})
		}
		out[i] = d
	}
	if l.answered != nil {
		l.answered(buf, decoded)
	}
	return out, next, nil
}

// readAll reads (after, upto] of partition 0 of topic t and returns the records handed on, checking after
// each one that the cache holds no more than bound.
func readAll(t *testing.T, pool *replay.Pool, after, upto, bound int64) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	err := pool.Read(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: after, Upto: upto}}, 0, nil,
		func(r *kgo.Record) error {
			if n := pool.Stats.CacheBytes.Load(); n > bound {
				return fmt.Errorf("the cache holds %d bytes at offset %d, more than its bound of %d", n, r.Offset, bound)
			}
			got = append(got, r)
			return nil
		})
	if err != nil {
		t.Fatalf("Read (%d, %d]: %v", after, upto, err)
	}
	if int64(len(got)) != upto-after {
		t.Fatalf("Read (%d, %d]: %d records, want %d", after, upto, len(got), upto-after)
	}
	return got
}

// TestCacheBytesBound: blocks of large records fill the cache past its byte bound; the bytes it holds,
// with the block being read, never exceed the bound, the least recently used blocks go, and a block that
// went is read from the log again while one still cached is not.
func TestCacheBytesBound(t *testing.T) {
	const block, blocks, valueBytes = 64, 16, 4 << 10
	const bound = 1 << 20 // about three blocks of 64 records of 4 KiB
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for i := range block * blocks {
		kc.Produce("t", &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, valueBytes)})
	}
	pool := replay.NewPool(replay.Config{BlockSize: block, CacheBytes: bound}, &batchLog{Log: kc})
	for i := range int64(blocks) {
		readAll(t, pool, i*block-1, (i+1)*block-1, bound)
	}
	if peak := replay.CachePeak(pool); peak > bound || peak < 2*block*valueBytes {
		t.Fatalf("the cache held at most %d bytes, want at most %d and more than two blocks' values", peak, bound)
	}
	if n := pool.Stats.CacheBytes.Load(); n <= 0 || n > bound {
		t.Fatalf("the cache holds %d bytes after the reads, want some, at most %d", n, bound)
	}
	reads := pool.Stats.Reads.Load()
	readAll(t, pool, (blocks-1)*block-1, blocks*block-1, bound)
	if got := pool.Stats.Reads.Load(); got != reads {
		t.Fatalf("the last block was read from the log again (%d reads, want %d): it should still be cached", got, reads)
	}
	recs := readAll(t, pool, -1, block-1, bound)
	if got := pool.Stats.Reads.Load(); got != reads+1 {
		t.Fatalf("the first block, evicted, took %d reads, want 1", got-reads)
	}
	for i, r := range recs {
		if len(r.Value) != valueBytes || r.Value[0] != byte(i) {
			t.Fatalf("record %d read again: %d bytes of %d, want %d of %d", i, len(r.Value), r.Value[0], valueBytes, byte(i))
		}
	}
	if peak := replay.CachePeak(pool); peak > bound {
		t.Fatalf("the cache held %d bytes, more than its bound of %d", peak, bound)
	}
}

// ownTopic fills topic t with records of every shape a block copies: keys, headers, a tombstone, an empty
// value, and returns them.
func ownTopic(kc *memlog.Cluster) []*kgo.Record {
	kc.CreateTopic("t", 1)
	var recs []*kgo.Record
	for i := range 250 {
		r := &kgo.Record{
			Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d", i),
			Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("update")}, {Key: "ce_id", Value: fmt.Appendf(nil, "%d", i)}},
		}
		switch i {
		case 7:
			r.Value = nil // a tombstone
		case 8:
			r.Value = []byte{}
		case 9:
			r.Key, r.Headers = nil, nil
		}
		kc.Produce("t", r)
		recs = append(recs, r)
	}
	return recs
}

// sameRecord says got is want as a stream reads it: key, value, headers (nil and empty kept apart for
// values), timestamp, partition, offset.
func sameRecord(got, want *kgo.Record) bool {
	if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) ||
		got.Offset != want.Offset || got.Partition != want.Partition || !got.Timestamp.Equal(want.Timestamp) ||
		len(got.Headers) != len(want.Headers) {
		return false
	}
	for i, h := range got.Headers {
		if h.Key != want.Headers[i].Key || !bytes.Equal(h.Value, want.Headers[i].Value) {
			return false
		}
	}
	return true
}

// TestCachedBlockOwnsItsRecords: a cached block keeps copies of its records, not the records a fetch
// decoded, whose bytes are the fetch's answer: once every answer's bytes are overwritten, the block served
// from the cache still holds the records as they were.
func TestCachedBlockOwnsItsRecords(t *testing.T) {
	kc := memlog.New()
	want := ownTopic(kc)
	var mu sync.Mutex
	var answers [][]byte
	log := &batchLog{Log: kc, answered: func(buf []byte, _ []kgo.Record) {
		mu.Lock()
		answers = append(answers, buf)
		mu.Unlock()
	}}
	pool := replay.NewPool(replay.Config{}, log)
	last := int64(len(want) - 1)
	readAll(t, pool, -1, last, replay.DefaultCacheBytes)
	reads := pool.Stats.Reads.Load()
	mu.Lock()
	for _, buf := range answers {
		for i := range buf {
			buf[i] = 'X'
		}
	}
	mu.Unlock()
	got := readAll(t, pool, -1, last, replay.DefaultCacheBytes)
	if pool.Stats.Reads.Load() != reads {
		t.Fatal("the second read went to the log: the block should be cached")
	}
	for i, r := range got {
		if !sameRecord(r, want[i]) {
			t.Fatalf("cached record %d is %q=%q %v, want %q=%q %v: it shares the fetch's bytes",
				i, r.Key, r.Value, r.Headers, want[i].Key, want[i].Value, want[i].Headers)
		}
	}
}

// TestCachedBlockFreesTheFetch: once a block is read and cached, nothing the pool holds keeps the fetches'
// answers (their bytes, their slices of records) from being collected.
func TestCachedBlockFreesTheFetch(t *testing.T) {
	kc := memlog.New()
	want := ownTopic(kc)
	var answers, freed atomic.Int64
	log := &batchLog{Log: kc, answered: func(buf []byte, recs []kgo.Record) {
		answers.Add(2)
		runtime.AddCleanup(&buf[0], func(f *atomic.Int64) { f.Add(1) }, &freed)
		runtime.AddCleanup(&recs[0], func(f *atomic.Int64) { f.Add(1) }, &freed)
	}}
	pool := replay.NewPool(replay.Config{}, log)
	readAll(t, pool, -1, int64(len(want)-1), replay.DefaultCacheBytes)
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() < answers.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answer buffers and record slices were collected: the cached block keeps the others", freed.Load(), answers.Load())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	reads := pool.Stats.Reads.Load()
	got := readAll(t, pool, -1, int64(len(want)-1), replay.DefaultCacheBytes)
	if pool.Stats.Reads.Load() != reads || !sameRecord(got[len(got)-1], want[len(want)-1]) {
		t.Fatal("the block is not cached any more, or not as it was read")
	}
}
