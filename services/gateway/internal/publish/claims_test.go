package publish

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestPublisherKeepsClaimInFlight: a produce that takes many leases (a stalled broker) keeps its claim, so a
// retry on another pod waits for it instead of taking the claim over and producing the record a second time.
func TestPublisherKeepsClaimInFlight(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 3)
			prod := &memProducer{kc: kc, block: make(chan struct{})}
			const lease = 150 * time.Millisecond
			short := func(c *Config) { c.Lease = lease }
			p1 := newTestPublisher(kc, prod, store, short)
			p2 := newTestPublisher(kc, &memProducer{kc: kc}, store, short)
			rec := Record{Key: []byte("k"), Value: []byte("v"), IdemKey: "slow"}
			first := make(chan error, 1)
			go func() {
				_, errs := p1.Publish(t.Context(), "t", "sub:a", []Record{rec})
				first <- errs[0]
			}()
			waitFor(t, func() bool { return p1.Pending() > 0 })
			deadline := time.Now().Add(5 * lease)
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(t.Context(), lease)
				_, errs := p2.Publish(ctx, "t", "sub:a", []Record{rec})
				cancel()
				if !errors.Is(errs[0], ErrInFlight) {
					t.Fatalf("a retry while the first produce is in flight, %v after it began: %v, want ErrInFlight", time.Until(deadline), errs[0])
				}
			}
			close(prod.block)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			r, errs := p2.Publish(t.Context(), "t", "sub:a", []Record{rec})
			if errs[0] != nil || !r[0].Duplicate {
				t.Fatalf("the retry after the produce: %+v, %v; want the duplicate", r[0], errs[0])
			}
			if n := len(kcAll(kc, r[0].Partition)); n != 1 {
				t.Fatalf("the partition holds %d records, want 1", n)
			}
		})
	}
}

// kcAll is every record of partition of topic t.
func kcAll(kc *memlog.Cluster, partition int32) []*kgo.Record {
	var all []*kgo.Record
	for next := int64(0); ; {
		rs, n, _ := kc.Fetch(context.Background(), "t", partition, next)
		if len(rs) == 0 && n == next {
			return all
		}
		all, next = append(all, rs...), n
	}
}

// TestPublisherScanBounded: a request that takes over a claim reads at most MaxScan records looking for its
// record and answers ErrLooking; the next request goes on from where it stopped, and finds it.
func TestPublisherScanBounded(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 3)
			p := newTestPublisher(kc, &memProducer{kc: kc}, store, func(c *Config) { c.MaxScan = 100 })
			ctx := t.Context()
			rec := Record{Value: []byte("w"), IdemKey: "deep"}
			key := storeKey("t", "sub:a", "deep")
			if e, err := store.Claim(ctx, key, "dead", time.Millisecond, rec.Digest("t"), 1, 0); err != nil || e.State != Claimed {
				t.Fatal(e, err)
			}
			for i := range 350 {
				kc.Produce("t", &kgo.Record{Partition: 1, Value: fmt.Appendf(nil, "other %d", i)})
			}
			off := kc.Produce("t", &kgo.Record{Partition: 1, Value: []byte("w"), Headers: []kgo.RecordHeader{{Key: IdemHeader, Value: []byte("deep")}}})
			time.Sleep(5 * time.Millisecond) // the dead owner's lease ends
			for want := int64(100); want <= 300; want += 100 {
				_, errs := p.Publish(ctx, "t", "sub:a", []Record{rec})
				if !errors.Is(errs[0], ErrLooking) {
					t.Fatalf("a look past MaxScan: %v, want ErrLooking", errs[0])
				}
				if e, err := store.Claim(ctx, key, "probe", time.Nanosecond, rec.Digest("t"), 0, 0); err != nil || e.From != want {
					t.Fatalf("the claim after the look: %+v, %v; want the look kept up to %d", e, err, want)
				}
				time.Sleep(2 * time.Millisecond) // the probe's lease ends
			}
			r, errs := p.Publish(ctx, "t", "sub:a", []Record{rec})
			if errs[0] != nil || !r[0].Duplicate || r[0].Partition != 1 || r[0].Offset != off {
				t.Fatalf("the fourth look: %+v, %v; want the record at 1/%d", r[0], errs[0], off)
			}
		})
	}
}

// TestPublisherBatchOrder: a partition never gets a request's records out of their order. A record that cannot
// be published (its key in flight elsewhere) stops the later records of its partition, not those of other
// partitions; a retry of a request published in part does not write an earlier record after a later one already
// in the partition.
func TestPublisherBatchOrder(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			kc := memlog.New()
			kc.CreateTopic("t", 3)
			prod := &memProducer{kc: kc}
			p := newTestPublisher(kc, prod, store, nil)
			ctx := t.Context()
			other := kc.KeyPartition("t", "b")
			if other == kc.KeyPartition("t", "a") {
				t.Fatal("keys a and b share a partition")
			}
			batch := []Record{
				{Key: []byte("a"), Value: []byte("0"), IdemKey: "o/0"},
				{Key: []byte("b"), Value: []byte("x"), IdemKey: "o/1"},
				{Key: []byte("a"), Value: []byte("1"), IdemKey: "o/2"},
				{Key: []byte("a"), Value: []byte("2"), IdemKey: "o/3"},
			}
			// Record 2's key is held by a request in flight on another pod.
			if _, err := store.Claim(ctx, storeKey("t", "sub:a", "o/2"), "elsewhere", time.Hour, batch[2].Digest("t"), kc.KeyPartition("t", "a"), 0); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, errs := p.Publish(short, "t", "sub:a", batch)
			if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], ErrInFlight) || !errors.Is(errs[3], ErrEarlierFailed) {
				t.Fatalf("errors %v; want record 2 in flight, record 3 not produced after it, 0 and 1 published", errs)
			}
			if prod.produced() != 2 {
				t.Fatalf("%d records produced, want 2", prod.produced())
			}
			// The request elsewhere published record 3 and died before record 2: writing 2 now would put it
			// after 3.
			b3 := storeKey("t", "sub:a", "o/3")
			if err := store.Release(ctx, storeKey("t", "sub:a", "o/2"), "elsewhere", 0); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Claim(ctx, b3, "elsewhere", time.Hour, batch[3].Digest("t"), kc.KeyPartition("t", "a"), 0); err != nil {
				t.Fatal(err)
			}
			if ok, err := store.Complete(ctx, b3, "elsewhere", kc.KeyPartition("t", "a"), 40, time.Now()); err != nil || !ok {
				t.Fatal(ok, err)
			}
			res, errs := p.Publish(ctx, "t", "sub:a", batch)
			var oe *OrderError
			if errs[0] != nil || !res[0].Duplicate || errs[1] != nil || !res[1].Duplicate || !errors.As(errs[2], &oe) || oe.Later != 3 || oe.Offset != 40 || errs[3] != nil || !res[3].Duplicate {
				t.Fatalf("the retry: %+v %v; want record 2 refused for the order, the others duplicates", res, errs)
			}
			if prod.produced() != 2 {
				t.Fatalf("%d records produced, want still 2", prod.produced())
			}
		})
	}
}
