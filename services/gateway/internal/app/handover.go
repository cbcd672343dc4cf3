package app

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// At the drain, the clients' port stays open (new streams are told where they are and to come back soon),
// yet every HTTP/2 connection must be told to go away at once: a client whose stream the drain ends
// reconnects on the connection it has, and only a GOAWAY makes it open a new one, which the Service can send
// to another pod. http.Server sends GOAWAY only from Shutdown, which also closes its listeners. So the port's
// connections are accepted by one goroutine and handed to the server that serves the port now: the first
// until the drain, then a successor with the same handler, while the first shuts down (GOAWAY on its HTTP/2
// connections, its idle HTTP/1.1 ones closed, its open responses left to end with the drain).

// acceptor accepts the connections of a listener and hands each to the view that takes it.
type acceptor struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{} // closed when Accept failed; err is why
	err   error
	stop  chan struct{} // closed by close
	once  sync.Once
}

func newAcceptor(ln net.Listener) *acceptor {
	a := &acceptor{ln: ln, conns: make(chan net.Conn), done: make(chan struct{}), stop: make(chan struct{})}
	go a.run()
	return a
}

func (a *acceptor) run() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			a.err = err
			close(a.done)
			return
		}
		a.give(c)
	}
}

// give hands c to the next Accept of a view, or closes it once the acceptor is closed.
func (a *acceptor) give(c net.Conn) {
	select {
	case a.conns <- c:
	case <-a.stop:
		_ = c.Close()
	}
}

// close closes the listener; connections not taken by a view yet are closed.
func (a *acceptor) close() error {
	var err error
	a.once.Do(func() {
		close(a.stop)
		err = a.ln.Close()
	})
	return err
}

// view returns a listener of the acceptor's connections, for one server: closing it stops that server's
// Accept and leaves the port open.
func (a *acceptor) view() *acceptView {
	return &acceptView{a: a, closed: make(chan struct{})}
}

type acceptView struct {
	a      *acceptor
	closed chan struct{}
	once   sync.Once
}

func (v *acceptView) Accept() (net.Conn, error) {
	select {
	case c := <-v.a.conns:
		select {
		case <-v.closed:
			// Taken as the view closed: the server after this one takes it.
			go v.a.give(c)
			return nil, net.ErrClosed
		default:
			return c, nil
		}
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.a.done:
		return nil, v.a.err
	}
}

func (v *acceptView) Close() error {
	v.once.Do(func() { close(v.closed) })
	return nil
}

func (v *acceptView) Addr() net.Addr { return v.a.ln.Addr() }

// clientServer is the server of the clients' port, and how it is handed over at the drain.
type clientServer struct {
	newServer func() *http.Server // a server of the port: same handler, same TLS and protocols
	tls       bool
	acc       *acceptor

	mu      sync.Mutex
	current *http.Server
	retired []retired // the servers handed over from
}

// retired is a server handed over from, and where its Shutdown's result goes.
type retired struct {
	srv  *http.Server
	done chan error
}

func newClientServer(ln net.Listener, tls bool, newServer func() *http.Server) *clientServer {
	return &clientServer{newServer: newServer, tls: tls, acc: newAcceptor(ln), current: newServer()}
}

// serve serves the port with the current server until it is handed over or shut down; its error is the
// server's, nil when it was handed over.
func (cs *clientServer) serve(srv *http.Server) error {
	v := cs.acc.view()
	var err error
	if cs.tls {
		err = srv.ServeTLS(v, "", "") // the config's GetCertificate gives the certificate
	} else {
		err = srv.Serve(v)
	}
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}

// Serve serves the port until Shutdown; it returns the first server's error, if it fails.
func (cs *clientServer) Serve() error {
	cs.mu.Lock()
	srv := cs.current
	cs.mu.Unlock()
	return cs.serve(srv)
}

// handOver starts a successor serving the port, and shuts the current server down: GOAWAY on its HTTP/2
// connections, its idle HTTP/1.1 connections closed, its open responses left to end (within ctx).
func (cs *clientServer) handOver(ctx context.Context) {
	cs.mu.Lock()
	old, next := cs.current, cs.newServer()
	cs.current = next
	r := retired{srv: old, done: make(chan error, 1)}
	cs.retired = append(cs.retired, r)
	cs.mu.Unlock()
	go func() { _ = cs.serve(next) }()
	go func() { r.done <- old.Shutdown(ctx) }()
}

// Shutdown closes the port and shuts every server down, within ctx; on an error the servers are closed.
func (cs *clientServer) Shutdown(ctx context.Context) error {
	cs.mu.Lock()
	cur, retired := cs.current, cs.retired
	cs.mu.Unlock()
	err := cur.Shutdown(ctx)
	_ = cs.acc.close()
	for _, r := range retired {
		if rerr := <-r.done; rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Close closes the port and every server at once.
func (cs *clientServer) Close() {
	cs.mu.Lock()
	cur, retired := cs.current, cs.retired
	cs.mu.Unlock()
	_ = cur.Close()
	for _, r := range retired {
		_ = r.srv.Close()
	}
	_ = cs.acc.close()
}
