package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/proctest"

	"github.com/redis/go-redis/v9"
)

// Addr returns the test Redis server's address, or skips t (fails it under CI=true) when there is none.
func Addr(t testing.TB) string {
	t.Helper()
	return proctest.Service(t, "REDIS_ADDR", "a local Redis")
}

// Client returns a client of the test server, closed when the test ends. It fails t when the server does
// not answer PING.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Addr(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: ping %s: %v", Addr(t), err)
	}
	return c
}

// Prefix returns a key prefix unique to this test run, ending with ':'. Keys under it are deleted when
// the test ends.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	p := "test:" + name + "." + hex.EncodeToString(b[:]) + ":"
	c := Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, err := c.Keys(ctx, p+"*").Result()
		if err == nil && len(keys) > 0 {
			_ = c.Del(ctx, keys...).Err()
		}
	})
	return p
}
