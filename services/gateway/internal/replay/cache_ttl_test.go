package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// TestCacheTTL: a block read again within CacheTTL comes from the cache; after it, from the log again.
func TestCacheTTL(t *testing.T) {
	kc := topicOfV(10)
	pool := replay.NewPool(replay.Config{BlockSize: 16, CacheTTL: 200 * time.Millisecond}, kc)
	read := func() {
		t.Helper()
		n := 0
		err := pool.Read(context.Background(), "t", 0, []replay.Range{{Partition: 0, After: -1, Upto: 9}}, 0, nil,
			func(*kgo.Record) error { n++; return nil })
		if err != nil || n != 10 {
			t.Fatalf("read %d records: %v", n, err)
		}
	}
	read()
	read()
	if hits := pool.Stats.CacheHits.Load(); hits != 1 {
		t.Fatalf("cache hits after a second read within the TTL: %d, want 1", hits)
	}
	time.Sleep(250 * time.Millisecond)
	read()
	if hits := pool.Stats.CacheHits.Load(); hits != 1 {
		t.Fatalf("cache hits after a read past the TTL: %d, want still 1", hits)
	}
}
