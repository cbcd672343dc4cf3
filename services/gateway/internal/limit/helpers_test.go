package limit

import (
	"bufio"
	"cmp"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// link is a TCP proxy to a server that a test can cut and restore, as a network partition does: while it is
// cut, what clients send on open connections is held (also when the client closes the connection meanwhile)
// and new connections fail at once. Restored, it delivers what it held, newest first: a connection that
// failed earlier waits longer for TCP to send again (its retransmission timeout doubles), so what was sent
// last may well arrive first.
type link struct {
	t  *testing.T
	ln net.Listener
	to string

	mu    sync.Mutex
	cut   bool
	held  []heldSend // in the order they were sent
	conns []net.Conn
}

// heldSend is one connection's send the link holds: turn lets it through, done says it was delivered.
type heldSend struct{ turn, done chan struct{} }

// newLink starts a link to the server at addr, closed when t ends.
func newLink(t *testing.T, addr string) *link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{t: t, ln: ln, to: addr}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.accept()
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		l.restore()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.conns {
			_ = c.Close()
		}
	})
	return l
}

func (l *link) addr() string { return l.ln.Addr().String() }

// breakLink cuts the link.
func (l *link) breakLink() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
}

// restore delivers what the link held, newest first, and lets everything through again.
func (l *link) restore() {
	l.mu.Lock()
	held := l.held
	l.cut, l.held = false, nil
	l.mu.Unlock()
	for _, h := range slices.Backward(held) {
		close(h.turn)
		<-h.done
	}
}

func (l *link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.cut {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		var d net.Dialer
		up, err := d.DialContext(context.Background(), "tcp", l.to)
		if err != nil {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.conns = append(l.conns, c, up)
		l.mu.Unlock()
		go func() { // answers go back as they come (none come while the requests are held)
			_, _ = io.Copy(c, up)
			_ = c.Close()
		}()
		go l.forward(c, up.(*net.TCPConn)) //nolint:forcetypeassert // a TCP dial
	}
}

// forward copies what the client sends to the server, one read at a time, each held while the link is cut;
// the client's close reaches the server after what it sent.
func (l *link) forward(c net.Conn, up *net.TCPConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		var h *heldSend
		l.mu.Lock()
		if l.cut {
			h = &heldSend{turn: make(chan struct{}), done: make(chan struct{})}
			l.held = append(l.held, *h)
		}
		l.mu.Unlock()
		if h != nil {
			<-h.turn
		}
		if n > 0 {
			_, werr := up.Write(buf[:n])
			err = cmp.Or(werr, err)
		}
		if err != nil {
			_ = up.CloseWrite()
		}
		if h != nil {
			close(h.done)
		}
		if err != nil {
			return
		}
	}
}

// quietRedis drops go-redis's own log lines (dial failures while a test's server is down on purpose).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}
