package limit

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// checkFor polls cond every 10ms for up to 10s.
func checkFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// redisServer is a redis-server of a test's own, on a loopback port, that the test can stop and start
// again (on the same port) to see what a store does while Redis is down.
type redisServer struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

// startRedis starts a redis-server for t, stopped when t ends. It skips t when redis-server is not
// installed.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a TCP listener
	_ = ln.Close()
	s := &redisServer{t: t, port: port}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server and waits until it answers PING.
func (s *redisServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.t.TempDir())
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { // drain its log
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			_ = strings.TrimSpace(sc.Text())
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	defer func() { _ = c.Close() }()
	checkFor(s.t, "redis-server to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
}

// stop kills the server (SIGKILL: nothing is saved) and waits for it.
func (s *redisServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// client returns a client of the server with short timeouts, closed when the test ends.
func (s *redisServer) client() *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: s.addr(), ContextTimeoutEnabled: true, DialTimeout: 200 * time.Millisecond, MaxRetries: -1,
	})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// quietRedis drops go-redis's own log lines (dial failures while a test's server is down on purpose).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}
