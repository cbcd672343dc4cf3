package publish

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/redistest"
	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestParseRecords: the body's forms, and every bad input refused with its status and nothing parsed.
func TestParseRecords(t *testing.T) {
	lim := Limits{MaxKeyBytes: 8, MaxValueBytes: 16, MaxHeaderBytes: 10, MaxRecords: 3, MaxIdemKeyBytes: 10}
	cases := []struct {
		name, body, idem string
		want             []Record
		status           int    // 0: no error
		msg              string // in the error
	}{
		{name: "text value", body: `{"key":"k","value":"hi"}`, want: []Record{{Key: []byte("k"), Value: []byte("hi")}}},
		{name: "JSON value compacted", body: `{"value": {"a": [1, 2]}}`, want: []Record{{Value: []byte(`{"a":[1,2]}`)}}},
		{name: "null value", body: `{"key":"k","value":null}`, want: []Record{{Key: []byte("k")}}},
		{name: "empty text", body: `{"value":""}`, want: []Record{{Value: []byte{}}}},
		{name: "base64", body: `{"key_base64":"AAE=","value_base64":"/w=="}`, want: []Record{{Key: []byte{0, 1}, Value: []byte{0xff}}}},
		{name: "headers sorted", body: `{"value":"v","headers":{"b":"2","a":"1"}}`, want: []Record{{Value: []byte("v"), Headers: []Header{{"a", []byte("1")}, {"b", []byte("2")}}}}},
		{name: "idempotency header", body: `{"value":"v"}`, idem: "k1", want: []Record{{Value: []byte("v"), IdemKey: "k1"}}},
		{
			name: "batch keys derived", body: `{"records":[{"value":"a"},{"value":"b","idempotency_key":"own"}]}`, idem: "k1",
			want: []Record{{Value: []byte("a"), IdemKey: "k1/0"}, {Value: []byte("b"), IdemKey: "own"}},
		},
		{name: "not JSON", body: `hello`, status: 400, msg: "not a JSON object"},
		{name: "a list", body: `[{"value":"a"}]`, status: 400, msg: "not a JSON object"},
		{name: "no value", body: `{"key":"k"}`, status: 400, msg: "value is required"},
		{name: "unknown field", body: `{"value":"v","partition":2}`, status: 400, msg: "unknown field"},
		{name: "key twice", body: `{"key":"a","key_base64":"AA==","value":"v"}`, status: 400, msg: "key and key_base64"},
		{name: "bad base64", body: `{"value_base64":"!!"}`, status: 400, msg: "value_base64"},
		{name: "value too large", body: `{"value":"` + strings.Repeat("x", 17) + `"}`, status: 413, msg: "the value has 17 bytes; at most 16"},
		{name: "key too large", body: `{"key":"123456789","value":"v"}`, status: 413, msg: "the key has 9 bytes"},
		{name: "headers too large", body: `{"value":"v","headers":{"abcde":"123456"}}`, status: 413, msg: "the headers have 11 bytes"},
		{name: "reserved header", body: `{"value":"v","headers":{"idempotency-key":"x"}}`, status: 400, msg: "the gateway's own"},
		{name: "reserved event type", body: `{"value":"v","headers":{"event":"resync"}}`, status: 400, msg: `header event: the event type "resync" is reserved: the event types delete, drain, error`},
		{name: "reserved ce_type", body: `{"value":"v","headers":{"ce_type":"live"}}`, status: 400, msg: `header ce_type: the event type "live" is reserved`},
		{name: "reserved type in a batch named", body: `{"records":[{"value":"a"},{"value":"b","headers":{"event":"open"}}]}`, status: 400, msg: `records[1]: header event: the event type "open" is reserved`},
		{name: "reserved type of a tombstone", body: `{"key":"k","value":null,"headers":{"event":"delete"}}`, status: 400, msg: `"delete" is reserved`},
		{name: "near a reserved type", body: `{"value":"v","headers":{"event":"live2"}}`, want: []Record{{Value: []byte("v"), Headers: []Header{{"event", []byte("live2")}}}}},
		{name: "reserved value in another header", body: `{"value":"v","headers":{"x":"resync"}}`, want: []Record{{Value: []byte("v"), Headers: []Header{{"x", []byte("resync")}}}}},
		{name: "too many records", body: `{"records":[{"value":"a"},{"value":"a"},{"value":"a"},{"value":"a"}]}`, status: 413, msg: "4 records"},
		{name: "empty batch", body: `{"records":[]}`, status: 400, msg: "empty"},
		{name: "batch and more", body: `{"records":[{"value":"a"}],"value":"b"}`, status: 400, msg: "nothing else"},
		{name: "bad record in batch named", body: `{"records":[{"value":"a"},{"key":"k"}]}`, status: 400, msg: "records[1]: value is required"},
		{name: "idempotency key too long", body: `{"value":"v"}`, idem: "12345678901", status: 400, msg: "idempotency key has 11 bytes"},
		{name: "idempotency key control", body: `{"value":"v","idempotency_key":"a\nb"}`, status: 400, msg: "printable"},
		{name: "a key twice in a batch", body: `{"records":[{"value":"a","idempotency_key":"x"},{"value":"b","idempotency_key":"x"}]}`, status: 400, msg: "records[0] and records[1] have the same idempotency key"},
		{name: "two values", body: `{"value":"v"} {"value":"w"}`, status: 400, msg: "not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRecords(strings.NewReader(tc.body), tc.idem, lim)
			if tc.status != 0 {
				var ie *InputError
				if !errors.As(err, &ie) || ie.Status != tc.status || !strings.Contains(ie.Msg, tc.msg) {
					t.Fatalf("err = %v, want a %d with %q", err, tc.status, tc.msg)
				}
				if got != nil {
					t.Errorf("records parsed with an error: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d records, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if string(g.Key) != string(w.Key) || (g.Key == nil) != (w.Key == nil) || string(g.Value) != string(w.Value) ||
					(g.Value == nil) != (w.Value == nil) || g.IdemKey != w.IdemKey || len(g.Headers) != len(w.Headers) {
					t.Fatalf("record %d = %+v, want %+v", i, g, w)
				}
				for j := range g.Headers {
					if g.Headers[j].Key != w.Headers[j].Key || string(g.Headers[j].Value) != string(w.Headers[j].Value) {
						t.Errorf("record %d header %d = %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
					}
				}
			}
		})
	}
}

// stores returns the stores under test: memory, and Redis (a real server) so that the fake tells the truth.
func stores(t *testing.T) map[string]Store {
	return map[string]Store{
		"memory": NewMemoryStore(100, time.Hour),
		"redis":  NewRedisStore(redistest.Client(t), redistest.Prefix(t), time.Hour),
	}
}

// TestStores: a claim is held by its owner until its lease ends or it lets go; another request then takes it
// over with the same partition and offset (or the offset a look reached); only the owner of the claim extends it
// or records the result, which every later claim gets; a claim of another digest is a conflict and changes
// nothing.
func TestStores(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			e, err := s.Claim(ctx, "k", "a", time.Hour, "d1", 2, 40)
			if err != nil || e.State != Claimed || e.Partition != 2 || e.From != 40 {
				t.Fatalf("first claim = %+v, %v", e, err)
			}
			if e, err = s.Claim(ctx, "k", "b", time.Hour, "d1", 1, 90); err != nil || e.State != Held {
				t.Fatalf("claim while held = %+v, %v", e, err)
			}
			if e, err = s.Claim(ctx, "k", "b", time.Hour, "d2", 1, 90); err != nil || e.State != Conflict || e.Digest != "d1" {
				t.Fatalf("claim of another record while held = %+v, %v; want a conflict", e, err)
			}
			if err := s.Release(ctx, "k", "b", 0); err != nil {
				t.Fatal(err)
			}
			if e, _ = s.Claim(ctx, "k", "b", time.Hour, "d1", 1, 90); e.State != Held {
				t.Fatalf("a release by another owner let the claim go: %+v", e)
			}
			if err := s.Release(ctx, "k", "a", 45); err != nil {
				t.Fatal(err)
			}
			if e, err = s.Claim(ctx, "k", "b", time.Hour, "d2", 1, 90); err != nil || e.State != Conflict {
				t.Fatalf("claim of another record after the release = %+v, %v; want a conflict", e, err)
			}
			if e, err = s.Claim(ctx, "k", "b", time.Hour, "d1", 1, 90); err != nil || e.State != TakenOver || e.Partition != 2 || e.From != 45 {
				t.Fatalf("claim after the release = %+v, %v; want taken over at partition 2 from 45, where the look stopped", e, err)
			}
			if ok, err := s.Extend(ctx, "k", "a", time.Hour); err != nil || ok {
				t.Fatalf("the first owner extended a claim taken over: %v, %v", ok, err)
			}
			if ok, err := s.Complete(ctx, "k", "a", 2, 41, time.UnixMilli(5)); err != nil || ok {
				t.Fatalf("the first owner completed a claim taken over: %v, %v", ok, err)
			}
			if ok, err := s.Complete(ctx, "k", "b", 2, 42, time.UnixMilli(7)); err != nil || !ok {
				t.Fatalf("the owner's complete = %v, %v", ok, err)
			}
			e, err = s.Claim(ctx, "k", "c", time.Hour, "d1", 0, 0)
			if err != nil || e.State != Done || e.Partition != 2 || e.Offset != 42 || e.Time.UnixMilli() != 7 {
				t.Fatalf("claim after the result = %+v, %v", e, err)
			}
			if e, err = s.Claim(ctx, "k", "c", time.Hour, "d2", 0, 0); err != nil || e.State != Conflict || e.Offset != 42 {
				t.Fatalf("claim of another record after the result = %+v, %v; want a conflict", e, err)
			}
			if ok, err := s.Extend(ctx, "k", "b", time.Hour); err != nil || ok {
				t.Fatalf("a completed claim was extended: %v, %v", ok, err)
			}
			// A lease that runs out lets another take over without a release; one extended does not.
			if e, _ = s.Claim(ctx, "short", "a", 50*time.Millisecond, "d", 0, 3); e.State != Claimed {
				t.Fatalf("claim = %+v", e)
			}
			if ok, err := s.Extend(ctx, "short", "a", time.Hour); err != nil || !ok {
				t.Fatalf("the owner's extend = %v, %v", ok, err)
			}
			time.Sleep(80 * time.Millisecond)
			if e, _ = s.Claim(ctx, "short", "b", time.Hour, "d", 1, 9); e.State != Held {
				t.Fatalf("claim after the first lease of a claim extended = %+v, want held", e)
			}
			if e, _ = s.Claim(ctx, "shorter", "a", time.Millisecond, "d", 0, 3); e.State != Claimed {
				t.Fatalf("claim = %+v", e)
			}
			time.Sleep(20 * time.Millisecond)
			if e, _ = s.Claim(ctx, "shorter", "b", time.Hour, "d", 1, 9); e.State != TakenOver || e.From != 3 {
				t.Fatalf("claim after the lease = %+v, want taken over from 3", e)
			}
		})
	}
}

// memProducer produces into a memlog cluster; block, when set, holds every produce until it is closed.
type memProducer struct {
	kc    *memlog.Cluster
	block chan struct{}
	n     int
	mu    sync.Mutex
}

func (m *memProducer) Produce(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	go func() {
		if m.block != nil {
			select {
			case <-m.block:
			case <-ctx.Done():
				done(nil, ctx.Err())
				return
			}
		}
		m.mu.Lock()
		m.n++
		m.kc.Produce(r.Topic, r)
		m.mu.Unlock()
		done(r, nil)
	}()
}

func (m *memProducer) produced() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func newTestPublisher(kc *memlog.Cluster, prod Producer, store Store, mut func(*Config)) *Publisher {
	cfg := Config{
		Producer: prod, Log: kc, Store: store,
		Partitions:      func(string) []int32 { return []int32{0, 1, 2} },
		Start:           func(string, int32) int64 { return 0 },
		MaxPendingBytes: 1 << 20, QueueWait: time.Second, Lease: time.Hour, Owner: "test",
	}
	if mut != nil {
		mut(&cfg)
	}
	return New(cfg)
}

// TestPublisherIdempotent: a key published twice is one record, answered twice at the same place; a claim whose
// owner died after its produce is taken over and its record found, not produced again; a claim whose owner died
// before it is taken over and produced once.
func TestPublisherIdempotent(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 3)
			prod := &memProducer{kc: kc}
			p := newTestPublisher(kc, prod, store, nil)
			ctx := t.Context()
			rec := Record{Key: []byte("user-1"), Value: []byte("v"), IdemKey: "order-1"}
			r1, errs := p.Publish(ctx, "t", "sub:a", []Record{rec})
			r2, errs2 := p.Publish(ctx, "t", "sub:a", []Record{rec})
			if errs[0] != nil || errs2[0] != nil {
				t.Fatal(errs[0], errs2[0])
			}
			if r1[0].Duplicate || !r2[0].Duplicate || r1[0].Partition != r2[0].Partition || r1[0].Offset != r2[0].Offset {
				t.Fatalf("first %+v, second %+v: want the same place, the second a duplicate", r1[0], r2[0])
			}
			if want := kc.KeyPartition("t", "user-1"); r1[0].Partition != want {
				t.Errorf("partition %d, want the key's %d", r1[0].Partition, want)
			}

			// An owner that produced and died: its claim is held by nobody once its lease ends.
			dead := newTestPublisher(kc, prod, store, func(c *Config) { c.Lease = 10 * time.Millisecond; c.Owner = "dead" })
			key := storeKey("t", "sub:a", "order-2")
			w := Record{Value: []byte("w"), IdemKey: "order-2"}
			if e, err := store.Claim(ctx, key, dead.owner, 10*time.Millisecond, w.Digest("t"), 1, kcEnd(kc, 1)); err != nil || e.State != Claimed {
				t.Fatal(e, err)
			}
			// Another publisher's record with the same key comes first: it is not this one.
			kc.Produce("t", &kgo.Record{Partition: 1, Value: []byte("not w"), Headers: []kgo.RecordHeader{{Key: IdemHeader, Value: []byte("order-2")}}})
			off := kc.Produce("t", &kgo.Record{Partition: 1, Value: []byte("w"), Headers: []kgo.RecordHeader{{Key: IdemHeader, Value: []byte("order-2")}}})
			kc.Produce("t", &kgo.Record{Partition: 1, Value: []byte("other")})
			time.Sleep(30 * time.Millisecond)
			before := prod.produced()
			r3, errs := p.Publish(ctx, "t", "sub:a", []Record{w})
			if errs[0] != nil || !r3[0].Duplicate || r3[0].Partition != 1 || r3[0].Offset != off || prod.produced() != before {
				t.Fatalf("after an owner died after producing: %+v, %v, %d produced; want its record at 1/%d, nothing produced", r3[0], errs[0], prod.produced()-before, off)
			}

			// An owner that died before producing.
			x := Record{Value: []byte("x"), IdemKey: "order-3"}
			if _, err := store.Claim(ctx, storeKey("t", "sub:a", "order-3"), dead.owner, 10*time.Millisecond, x.Digest("t"), 2, kcEnd(kc, 2)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(30 * time.Millisecond)
			r4, errs := p.Publish(ctx, "t", "sub:a", []Record{x})
			if errs[0] != nil || r4[0].Duplicate || r4[0].Partition != 2 || prod.produced() != before+1 {
				t.Fatalf("after an owner died before producing: %+v, %v; want one record produced to the claim's partition 2", r4[0], errs[0])
			}
		})
	}
}

// kcEnd is the offset the next record of partition gets.
func kcEnd(kc *memlog.Cluster, partition int32) int64 {
	next := int64(0)
	for {
		rs, n, _ := kc.Fetch(context.Background(), "t", partition, next)
		if len(rs) == 0 && n == next {
			return next
		}
		next = n
	}
}

// TestPublisherBusy: while Kafka does not acknowledge, records past the pending bound wait QueueWait and are
// refused (ErrBusy), and nothing of them is produced; an idempotency key held by a request in flight is
// answered ErrInFlight when the second request's time runs out.
func TestPublisherBusy(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 3)
	prod := &memProducer{kc: kc, block: make(chan struct{})}
	p := newTestPublisher(kc, prod, NewMemoryStore(10, time.Hour), func(c *Config) { c.MaxPendingBytes = 100; c.QueueWait = 50 * time.Millisecond })
	ctx := t.Context()
	first := make(chan error, 1)
	go func() {
		_, errs := p.Publish(ctx, "t", "ip:1", []Record{{Value: []byte(strings.Repeat("a", 80)), IdemKey: "k"}})
		first <- errs[0]
	}()
	waitFor(t, func() bool { return p.Pending() == 81 })
	start := time.Now()
	_, errs := p.Publish(ctx, "t", "ip:1", []Record{{Value: []byte(strings.Repeat("b", 40))}})
	if !errors.Is(errs[0], ErrBusy) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("a record past the bound: %v after %v, want ErrBusy after the queue wait", errs[0], time.Since(start))
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, errs := p.Publish(short, "t", "ip:1", []Record{{Value: []byte(strings.Repeat("a", 80)), IdemKey: "k"}}); !errors.Is(errs[0], ErrInFlight) {
		t.Fatalf("a repeat of a key in flight: %v, want ErrInFlight", errs[0])
	}
	close(prod.block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if prod.produced() != 1 || p.Pending() != 0 {
		t.Fatalf("%d records produced, %d bytes pending; want 1 and 0", prod.produced(), p.Pending())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
