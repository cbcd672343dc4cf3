package publish

import (
	"errors"
	"strings"
	"testing"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestPublisherKeysScoped: an idempotency key is its publisher's own and bound to its record. Two publishers
// with the same key both get their record written; a publisher's repeat of the key with another record (key,
// value or headers) is a conflict naming the key, with nothing produced and the first record's entry kept; the
// same record again is the first's duplicate.
func TestPublisherKeysScoped(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 3)
			prod := &memProducer{kc: kc}
			p := newTestPublisher(kc, prod, store, nil)
			ctx := t.Context()
			alice := Record{Key: []byte("user-1"), Value: []byte("alice's"), IdemKey: "order-1"}
			bob := Record{Key: []byte("user-1"), Value: []byte("bob's"), IdemKey: "order-1"}
			ra, errs := p.Publish(ctx, "t", "sub:alice", []Record{alice})
			if errs[0] != nil || ra[0].Duplicate {
				t.Fatalf("alice: %+v, %v", ra[0], errs[0])
			}
			rb, errs := p.Publish(ctx, "t", "sub:bob", []Record{bob})
			if errs[0] != nil || rb[0].Duplicate || rb[0].Offset == ra[0].Offset && rb[0].Partition == ra[0].Partition {
				t.Fatalf("bob, with alice's key: %+v, %v; want his own record written", rb[0], errs[0])
			}
			for _, other := range []Record{
				{Key: []byte("user-1"), Value: []byte("alice's, changed"), IdemKey: "order-1"},
				{Key: []byte("user-2"), Value: []byte("alice's"), IdemKey: "order-1"},
				{Key: []byte("user-1"), Value: []byte("alice's"), Headers: []Header{{"h", []byte("1")}}, IdemKey: "order-1"},
				{Key: []byte("user-1"), IdemKey: "order-1"}, // a null value is not an empty one
			} {
				_, errs = p.Publish(ctx, "t", "sub:alice", []Record{other})
				var ce *ConflictError
				if !errors.Is(errs[0], ErrConflict) || !errors.As(errs[0], &ce) || ce.IdemKey != "order-1" || !strings.Contains(errs[0].Error(), `"order-1"`) {
					t.Fatalf("alice's key with another record %+v: %v, want a conflict naming the key", other, errs[0])
				}
			}
			again, errs := p.Publish(ctx, "t", "sub:alice", []Record{alice})
			if errs[0] != nil || !again[0].Duplicate || again[0].Offset != ra[0].Offset || again[0].Partition != ra[0].Partition {
				t.Fatalf("alice's record again: %+v, %v; want the first's place, a duplicate", again[0], errs[0])
			}
			if prod.produced() != 2 {
				t.Fatalf("%d records produced, want alice's and bob's", prod.produced())
			}
			// Two empty values and an empty key are one record.
			empty := Record{Key: []byte{}, Value: []byte{}, IdemKey: "e"}
			if _, errs = p.Publish(ctx, "t", "sub:alice", []Record{empty}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			if r, errs := p.Publish(ctx, "t", "sub:alice", []Record{{Key: []byte{}, Value: []byte{}, IdemKey: "e"}}); errs[0] != nil || !r[0].Duplicate {
				t.Fatalf("the same empty record again: %+v, %v", r[0], errs[0])
			}
		})
	}
}

// TestRecordDigest: every part of a record changes its digest, and fields cannot run into each other.
func TestRecordDigest(t *testing.T) {
	base := Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{"a", []byte("1")}}}
	variants := map[string]Record{
		"key":          {Key: []byte("k2"), Value: []byte("v"), Headers: base.Headers},
		"null key":     {Value: []byte("v"), Headers: base.Headers},
		"empty key":    {Key: []byte{}, Value: []byte("v"), Headers: base.Headers},
		"value":        {Key: []byte("k"), Value: []byte("w"), Headers: base.Headers},
		"null value":   {Key: []byte("k"), Headers: base.Headers},
		"no headers":   {Key: []byte("k"), Value: []byte("v")},
		"header value": {Key: []byte("k"), Value: []byte("v"), Headers: []Header{{"a", []byte("2")}}},
		"shifted":      {Key: []byte("kv"), Value: []byte{}, Headers: base.Headers},
	}
	d := base.Digest("t")
	if base.Digest("u") == d {
		t.Error("the topic does not change the digest")
	}
	if (Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{"a", []byte("1")}}, IdemKey: "x"}).Digest("t") != d {
		t.Error("the idempotency key changes the digest")
	}
	for name, r := range variants {
		if r.Digest("t") == d {
			t.Errorf("%s: the same digest", name)
		}
	}
	if storeKey("t", "sub:a", "k") == storeKey("t", "sub:b", "k") || storeKey("t", "a", "bk") == storeKey("t", "ab", "k") {
		t.Error("store keys of two publishers are the same")
	}
}
