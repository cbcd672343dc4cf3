package kafkatest

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestProxy: a proxy forwards both ways; blackholed, its open connections carry nothing either way and new
// ones are accepted quickly and carry nothing; reset, new connections fail at once.
func TestProxy(t *testing.T) {
	echo, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo.Close() }()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					_, _ = c.Write(append(sc.Bytes(), '\n'))
				}
			}()
		}
	}()
	p := NewProxy(t, echo.Addr().String())
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		return r.ReadString('\n')
	}
	open, openR := dial()
	if got, err := roundTrip(open, openR, 5*time.Second); got != "ping\n" || err != nil {
		t.Fatalf("forwarded: %q, %v", got, err)
	}
	p.Blackhole()
	if got, err := roundTrip(open, openR, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("open connection blackholed: %q, %v; want nothing back", got, err)
	}
	for range 20 {
		c, r := dial()
		if got, err := roundTrip(c, r, 50*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("new connection blackholed: %q, %v; want nothing back", got, err)
		}
	}
	p.Reset()
	// The reset can come before the dial returns, or at the first read.
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		got, err := roundTrip(c, bufio.NewReader(c), 5*time.Second)
		_ = c.Close()
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection reset: %q, %v; want an error at once", got, err)
		}
	}
	p.Forward()
	c, r := dial()
	if got, err := roundTrip(c, r, 5*time.Second); got != "ping\n" || err != nil {
		t.Fatalf("forwarded again: %q, %v", got, err)
	}
	if n := p.Accepted(); n != 23 {
		t.Errorf("accepted %d connections, want 23", n)
	}
}
