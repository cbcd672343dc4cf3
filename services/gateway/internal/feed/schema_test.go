package feed_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// TestSchemaFrames: a topic of a schema format frames a decoded value as one data line of JSON, a tombstone's
// key in the key format, and a value it cannot decode as auto writes it after an undecodable field naming the
// reason, which is also counted.
func TestSchemaFrames(t *testing.T) {
	dir := t.TempDir()
	avsc := `{"type":"record","name":"T","fields":[{"name":"n","type":"long"},{"name":"s","type":"string"}]}`
	if err := os.WriteFile(filepath.Join(dir, "7.avsc"), []byte(avsc), 0o600); err != nil {
		t.Fatal(err)
	}
	var reasons []schema.Reason
	f := &feed.Format{
		Value: feed.ValueAvro, Key: feed.ValueAuto,
		Schemas:     schema.NewDecoders(loadFiles(t, dir), schema.Options{}),
		Undecodable: func(r schema.Reason) { reasons = append(reasons, r) },
	}
	header := []byte{0, 0, 0, 0, 7}
	ev := []kgo.RecordHeader{{Key: "event", Value: []byte("trade")}}
	cases := []struct {
		name string
		rec  *kgo.Record
		want string
	}{
		{
			"decoded", &kgo.Record{Value: append(header, 0x54, 0x04, 'h', '\n')},
			"id: v1:0-1\ndata: {\"n\":42,\"s\":\"h\\n\"}\n\n",
		},
		{
			"decoded, with its event type", &kgo.Record{Value: append(header, 0x02, 0x00), Headers: ev},
			"id: v1:0-1\nevent: trade\ndata: {\"n\":1,\"s\":\"\"}\n\n",
		},
		{
			"tombstone: the key as auto writes it", &kgo.Record{Key: []byte("k-1")},
			"id: v1:0-1\nevent: delete\ndata: k-1\n\n",
		},
		{
			"not framed, text", &kgo.Record{Value: []byte("{\"n\":1}\nx"), Headers: ev},
			"id: v1:0-1\nevent: trade\nundecodable: not-framed\ndata: {\"n\":1}\ndata: x\n\n",
		},
		{
			"unknown schema, binary", &kgo.Record{Value: []byte{0, 0, 0, 0, 9, 0xff}},
			"id: v1:0-1\nundecodable: unknown-schema\ndata: base64:AAAAAAn/\n\n",
		},
		{
			"mismatch", &kgo.Record{Value: append(header, 0x54)},
			"id: v1:0-1\nundecodable: mismatch\ndata: base64:AAAAAAdU\n\n",
		},
	}
	for _, tc := range cases {
		got := feed.AppendFrame([]byte("before"), []byte("v1:0-1"), tc.rec, f)
		if string(got) != "before"+tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got[len("before"):], tc.want)
		}
	}
	want := []schema.Reason{schema.NotFramed, schema.UnknownSchema, schema.Mismatch}
	if len(reasons) != len(want) || reasons[0] != want[0] || reasons[1] != want[1] || reasons[2] != want[2] {
		t.Errorf("counted %v, want %v", reasons, want)
	}
}

// slowSource is a schema source that holds every lookup until release is closed (or the lookup's context
// ends), then answers every id with one Avro schema; it counts the lookups.
type slowSource struct {
	release chan struct{}
	calls   atomic.Int64
}

const slowAvro = `{"type":"record","name":"T","fields":[{"name":"n","type":"long"}]}`

func (s *slowSource) SchemaByID(ctx context.Context, _ int) (sr.Schema, error) {
	s.calls.Add(1)
	select {
	case <-s.release:
		return sr.Schema{Schema: slowAvro, Type: sr.TypeAvro}, nil
	case <-ctx.Done():
		return sr.Schema{}, ctx.Err()
	}
}

func (s *slowSource) SchemaByVersion(context.Context, string, int) (sr.SubjectSchema, error) {
	return sr.SubjectSchema{}, errors.New("no references")
}

// schemaFeed runs a feed of topics "avro" (Avro values, schemas from src) and "plain" on kc, with the reasons
// of its undecodable values counted; it stops with the test.
func schemaFeed(t *testing.T, kc *memlog.Cluster, src schema.Source) (*feed.Feed, *sync.Map) {
	t.Helper()
	reasons := &sync.Map{}
	count := func(r schema.Reason) {
		n, _ := reasons.LoadOrStore(r, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	formats := map[string]*feed.Format{"avro": {
		Value: feed.ValueAvro, Key: feed.ValueAuto, Undecodable: count,
		Schemas: schema.NewDecoders(src, schema.Options{Timeout: 30 * time.Second}),
	}}
	f, err := feed.NewWith(feed.Config{
		Topics: []string{"avro", "plain"}, RingBytes: 1 << 20, MetadataInterval: 50 * time.Millisecond,
		Prefill: 100, Formats: formats,
	}, kc.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f, reasons
}

func reasonCount(reasons *sync.Map, r schema.Reason) int64 {
	n, ok := reasons.Load(r)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// avroValue is the wire-format value of {"n": n} under schema id id (an Avro long is a zig-zag varint).
func avroValue(id uint32, n int64) []byte {
	v := binary.BigEndian.AppendUint32([]byte{0}, id)
	return binary.AppendVarint(v, n)
}

// TestSchemaLookupsNeverHoldTheFeed: once the feed is ready, values of schema ids that a registry answers
// slowly (here: not at all until released) neither hold up their own topic nor another, plain topic: both
// are framed at once, the unknown ones undecodable with reason schema-pending, and the lookups are one per
// id and bounded in number. Once the registry answers, a record read again decodes.
func TestSchemaLookupsNeverHoldTheFeed(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("avro", 1)
	kc.CreateTopic("plain", 1)
	src := &slowSource{release: make(chan struct{})}
	f, reasons := schemaFeed(t, kc, src)
	waitFor(t, func() bool { ok, _ := f.Ready(); return ok })

	const ids = 200
	var recs []*kgo.Record
	for i := range ids {
		rec := &kgo.Record{Value: avroValue(uint32(1000+i), int64(i))}
		kc.Produce("avro", rec)
		kc.Produce("avro", &kgo.Record{Value: avroValue(uint32(1000+i), int64(i))}) // the same id again
		recs = append(recs, rec)
	}
	for i := range 20 {
		kc.Produce("plain", &kgo.Record{Value: fmt.Appendf(nil, "p%d", i)})
	}
	frames := func(topic string) int { return f.Topic(topic).Ring().Stats().Frames }
	waitFor(t, func() bool { return frames("plain") == 20 && frames("avro") == 2*ids })
	if n := reasonCount(reasons, schema.Pending); n != 2*ids {
		t.Errorf("%d values framed schema-pending, want all %d", n, 2*ids)
	}
	if n := src.calls.Load(); n > 50 {
		t.Errorf("%d registry lookups for %d new ids at once, want at most the burst (50)", n, ids)
	}

	close(src.release)
	format := &feed.Format{Value: feed.ValueAvro, Schemas: schema.NewDecoders(src, schema.Options{})}
	got := string(feed.AppendFrame(nil, []byte("v1:0-0"), recs[0], format))
	if want := "id: v1:0-0\ndata: {\"n\":0}\n\n"; got != want {
		t.Errorf("read again once the registry answers: %q, want %q", got, want)
	}
}

// TestSchemaPrefillDecoded: before the feed is first ready (reading its prefill, serving nobody yet) it waits
// for the lookups of the schemas its records use, so the records clients resume from after a deploy decode.
func TestSchemaPrefillDecoded(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("avro", 1)
	kc.CreateTopic("plain", 1)
	for i := range 10 {
		kc.Produce("avro", &kgo.Record{Value: avroValue(7, int64(i))})
	}
	src := &slowSource{release: make(chan struct{})}
	time.AfterFunc(200*time.Millisecond, func() { close(src.release) })
	f, reasons := schemaFeed(t, kc, src)
	waitFor(t, func() bool { return f.Topic("avro").Ring().Stats().Frames == 10 })
	reasons.Range(func(r, n any) bool {
		t.Errorf("%d prefilled values undecodable: %s", n.(*atomic.Int64).Load(), r)
		return true
	})
}

// TestAppendDecodedFrame: a value a filter decoded (FilterValue) is framed from that JSON, without decoding
// it again, into the bytes AppendFrame gives; a value it could not decode is framed as AppendFrame frames it.
func TestAppendDecodedFrame(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "7.avsc"), []byte(slowAvro), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &feed.Format{Value: feed.ValueAvro, Key: feed.ValueAuto, Schemas: schema.NewDecoders(loadFiles(t, dir), schema.Options{})}
	id := []byte("v1:0-3")
	ev := []kgo.RecordHeader{{Key: "event", Value: []byte("tick")}}
	for _, rec := range []*kgo.Record{
		{Value: avroValue(7, 21), Headers: ev},
		{Value: avroValue(7, 21)[:5]}, // mismatch: no datum
		{Value: []byte("plain")},      // not framed
		{Key: []byte("k")},            // tombstone
	} {
		json, _, decoded := f.FilterValue(nil, rec)
		got := feed.AppendDecodedFrame([]byte("x"), id, rec, f, json, decoded)
		if want := feed.AppendFrame([]byte("x"), id, rec, f); string(got) != string(want) {
			t.Errorf("%q: %q, want %q", rec.Value, got, want)
		}
		if rec.Value != nil && string(rec.Value) != "plain" && len(rec.Value) > 5 && !decoded {
			t.Errorf("%q: not decoded", rec.Value)
		}
	}
	// The JSON given is the frame's data: the value is not decoded again.
	got := feed.AppendDecodedFrame(nil, id, &kgo.Record{Value: avroValue(7, 21)}, f, []byte(`{"n":"given"}`), true)
	if want := "id: v1:0-3\ndata: {\"n\":\"given\"}\n\n"; string(got) != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// loadFiles loads the schema files of dir.
func loadFiles(t *testing.T, dir string) *schema.Files {
	t.Helper()
	fs, err := schema.LoadFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestSchemaFilesLive: with schema files (in memory) a live record of an id not seen yet decodes at once:
// there is no registry to wait for.
func TestSchemaFilesLive(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"7", "8"} {
		if err := os.WriteFile(filepath.Join(dir, id+".avsc"), []byte(slowAvro), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kc := memlog.New()
	kc.CreateTopic("avro", 1)
	kc.CreateTopic("plain", 1)
	f, reasons := schemaFeed(t, kc, loadFiles(t, dir))
	waitFor(t, func() bool { ok, _ := f.Ready(); return ok })
	kc.Produce("avro", &kgo.Record{Value: avroValue(7, 1)})
	kc.Produce("avro", &kgo.Record{Value: avroValue(8, 2)})
	waitFor(t, func() bool { return f.Topic("avro").Ring().Stats().Frames == 2 })
	reasons.Range(func(r, n any) bool {
		t.Errorf("%d live values undecodable: %s", n.(*atomic.Int64).Load(), r)
		return true
	})
}

// notFoundAfter is a schema source that answers every lookup 404 after delay.
type notFoundAfter struct{ delay time.Duration }

func (s notFoundAfter) SchemaByID(ctx context.Context, _ int) (sr.Schema, error) {
	select {
	case <-time.After(s.delay):
		return sr.Schema{}, &sr.ResponseError{StatusCode: 404, Message: "not found"}
	case <-ctx.Done():
		return sr.Schema{}, ctx.Err()
	}
}

func (notFoundAfter) SchemaByVersion(context.Context, string, int) (sr.SubjectSchema, error) {
	return sr.SubjectSchema{}, errors.New("no references")
}

// TestSchemaAwaitBounded: a feed that never gets ready (one of its topics does not exist) stops waiting for
// schema lookups once it has waited a few lookup timeouts in all: then a registry that answers every new id
// 404, slowly, holds no topic up.
func TestSchemaAwaitBounded(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("avro", 1)
	kc.CreateTopic("plain", 1)
	const timeout, delay = 400 * time.Millisecond, 300 * time.Millisecond
	formats := map[string]*feed.Format{"avro": {
		Value: feed.ValueAvro, Key: feed.ValueAuto,
		Schemas: schema.NewDecoders(notFoundAfter{delay}, schema.Options{Timeout: timeout}),
	}}
	f, err := feed.NewWith(feed.Config{
		Topics: []string{"avro", "plain", "missing"}, RingBytes: 1 << 20, MetadataInterval: 50 * time.Millisecond,
		Formats: formats,
	}, kc.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, func() bool { return f.Topic("plain").Exists() && f.Topic("avro").Exists() })
	// Each round brings a new schema id and a plain record. Waiting for every lookup, 40 rounds would take
	// 40 delays (12 s); the bound is 3 timeouts in all (1.2 s).
	const rounds = 40
	limit := rounds * delay / 2
	deadline := time.Now().Add(limit)
	for i := range rounds {
		kc.Produce("avro", &kgo.Record{Value: avroValue(uint32(100+i), 1)})
		kc.Produce("plain", &kgo.Record{Value: []byte("p")})
		for f.Topic("plain").Ring().Stats().Frames < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d rounds within %v: the feed waits for every lookup", i, rounds, limit)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if ok, _ := f.Ready(); ok {
		t.Fatal("ready with a topic missing")
	}
}
