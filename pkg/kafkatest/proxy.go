package kafkatest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on loopback in front of one broker's client listener (NewProxiedRackCluster), through
// which a test makes that broker unreachable for the clients that use it, and only for them: the brokers
// replicate over their own listener, so the broker stays in the cluster and in the in-sync replicas.
type Proxy struct {
	ln       net.Listener
	target   atomic.Pointer[string]
	mode     atomic.Int32
	accepted atomic.Int64

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	wg    sync.WaitGroup
}

// Proxy modes.
const (
	proxyForward   = iota // bytes go through both ways
	proxyBlackhole        // connections are accepted and nothing goes through, either way; none is closed
	proxyReset            // connections are accepted and closed at once
)

// proxyConn is one client connection through a Proxy.
type proxyConn struct {
	client, broker net.Conn
	// dead: this connection forwards nothing any more (it was blackholed, and a stream that lost bytes
	// cannot carry Kafka's protocol again).
	dead atomic.Bool
}

// NewProxy listens on a free loopback port and forwards each connection to target, which SetTarget may give
// later (before the first client connects). It stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{ln: ln, conns: map[*proxyConn]struct{}{}}
	p.SetTarget(target)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets the address connections are forwarded to.
func (p *Proxy) SetTarget(target string) { p.target.Store(&target) }

// Accepted is how many connections the proxy has accepted, in any mode.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Forward lets new connections through again (the ones blackholed stay dead).
func (p *Proxy) Forward() { p.mode.Store(proxyForward) }

// Blackhole makes the broker unreachable as a network that drops packets would: the connections open stop
// carrying anything either way without closing, and new ones are accepted and carry nothing.
func (p *Proxy) Blackhole() {
	p.mode.Store(proxyBlackhole)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.dead.Store(true)
	}
}

// Reset makes the broker refuse clients, as a broker that went away would: the connections open are reset,
// and new ones are accepted and reset at once.
func (p *Proxy) Reset() {
	p.mode.Store(proxyReset)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		reset(c.client)
	}
}

// reset closes conn with a reset, as a closed port answers.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		mode := p.mode.Load()
		if mode == proxyReset {
			reset(client)
			continue
		}
		c := &proxyConn{client: client}
		if mode == proxyBlackhole {
			c.dead.Store(true)
		} else if c.broker, err = new(net.Dialer).DialContext(context.Background(), "tcp", *p.target.Load()); err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		if p.mode.Load() == proxyBlackhole { // Blackhole ran since the mode was read, before c was listed
			c.dead.Store(true)
		}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, c.client, c.broker) })
		if c.broker != nil {
			p.wg.Go(func() { p.pipe(c, c.broker, c.client) })
		}
	}
}

// pipe copies from to to while c is alive, and reads and drops what comes once it is dead; it closes both
// ends when from ends.
func (p *Proxy) pipe(c *proxyConn, from, to net.Conn) {
	defer func() {
		_ = c.client.Close()
		if c.broker != nil {
			_ = c.broker.Close()
		}
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !c.dead.Load() && to != nil {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.client.Close()
		if c.broker != nil {
			_ = c.broker.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}
