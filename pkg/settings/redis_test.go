package settings

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/redistest"
)

// TestRedisPasswordRotation: a client whose password comes from redis-password-file authenticates its new
// connections with the file as it is then: after the server's password changes (the old one refused from
// then on) and the file follows, the client's next connection gets in.
func TestRedisPasswordRotation(t *testing.T) {
	admin := redistest.Client(t)
	ctx := t.Context()
	user := "rotate-" + strings.TrimSuffix(redistest.Prefix(t), ":")
	setPassword := func(pw string) {
		t.Helper()
		if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", "resetpass", ">"+pw, "+ping").Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
	}
	setPassword("old-password")
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	pwFile := filepath.Join(t.TempDir(), "password")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(pwFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old-password\n")
	r := Redis{Addr: redistest.Addr(t), Username: user, PasswordFile: pwFile}
	cl := redis.NewClient(&redis.Options{Addr: r.Addr, CredentialsProviderContext: r.Credentials(), PoolSize: 1, MaxRetries: -1})
	defer func() { _ = cl.Close() }()
	if err := cl.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping with the first password: %v", err)
	}
	setPassword("new-password")
	write("new-password\n")
	// Drop the client's connection: the next one authenticates again.
	if err := admin.Do(ctx, "CLIENT", "KILL", "USER", user).Err(); err != nil {
		t.Fatalf("CLIENT KILL: %v", err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "a connection with the rotated password", func() bool { return cl.Ping(ctx).Err() == nil })
}
