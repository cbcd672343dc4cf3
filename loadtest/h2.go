package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Protocols the streams are spoken in (--proto).
//
// With h1 every stream is a TCP connection of its own, written and read by the tool itself (client.go). With
// h2 and h2c the streams of a run are split into groups of --streams-per-conn, per gateway URL, and each group
// shares one HTTP/2 connection, as a browser's tabs share one connection to an origin: one http.Transport and
// one http.ClientConn (Transport.NewClientConn, which always dials a connection of its own and never opens a
// second) per group, dialed by the group's first stream to need it. The response body of each stream is read
// by the same code as an HTTP/1.1 one (client.read): the opening block, the pkg/sse Parser, the tracker, the
// counters and the latency histogram.
const (
	protoH1  = "h1"  // HTTP/1.1, cleartext
	protoH2C = "h2c" // HTTP/2 with prior knowledge, cleartext
	protoH2  = "h2"  // HTTP/2 over TLS, by ALPN
)

// maxStreamsPerConn bounds --streams-per-conn. A server allows a number of concurrent streams per connection
// (SETTINGS_MAX_CONCURRENT_STREAMS; 250 for Go's net/http, the gateway's): a stream beyond it waits for a
// slot and connect counts it as not opened.
const maxStreamsPerConn = 1000

// h2GroupOf returns the connection group of stream i among the streams to one gateway URL, with nURLs URLs
// (stream i goes to URL i mod nURLs, or the next one in a cross-pod storm: the group does not depend on which)
// and perConn streams per connection: the streams to one URL are numbered i / nURLs, and each perConn of them
// in a row share a connection.
func h2GroupOf(i, nURLs, perConn int) int {
	return (i / max(nURLs, 1)) / max(perConn, 1)
}

// h2Key names one connection: the gateway (scheme and host:port) and the group.
type h2Key struct {
	origin string
	group  int
}

// h2Conn is one HTTP/2 connection, dialed once by the first stream of its group that needs it.
type h2Conn struct {
	once sync.Once
	cc   *http.ClientConn
	err  error
}

// h2Pool holds the HTTP/2 connections of one connect (one group of streams), and closes them when the
// streams have ended.
type h2Pool struct {
	proto string
	tls   *tls.Config // h2 only
	dials *atomic.Int64

	mu    sync.Mutex
	conns map[h2Key]*h2Conn
}

// newH2Pool returns an empty pool; dials counts the connections it opens.
func newH2Pool(proto string, tlsConf *tls.Config, dials *atomic.Int64) *h2Pool {
	return &h2Pool{proto: proto, tls: tlsConf, dials: dials, conns: map[h2Key]*h2Conn{}}
}

// conn returns the connection of group on u's gateway, dialing it (from local, when valid and the gateway is
// an IPv4 one) when it is the group's first stream. Every stream of a group gets the same connection, or the
// error its dial ended with.
func (p *h2Pool) conn(ctx context.Context, u *url.URL, group int, local netip.Addr) (*http.ClientConn, error) {
	k := h2Key{origin: u.Scheme + "://" + u.Host, group: group}
	p.mu.Lock()
	c := p.conns[k]
	if c == nil {
		c = &h2Conn{}
		p.conns[k] = c
	}
	p.mu.Unlock()
	c.once.Do(func() {
		c.cc, c.err = p.dial(ctx, u, local)
		if c.err == nil && p.dials != nil {
			p.dials.Add(1)
		}
	})
	return c.cc, c.err
}

// dial opens one HTTP/2 connection to u's gateway.
func (p *h2Pool) dial(ctx context.Context, u *url.URL, local netip.Addr) (*http.ClientConn, error) {
	network := "tcp"
	if !local.IsValid() || !bindsSource(u.Hostname()) {
		local = netip.Addr{}
	} else {
		network = "tcp4"
	}
	d := dialer(0, local)
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return d.DialContext(ctx, network, addr) },
		TLSClientConfig:     p.tls.Clone(), // the Transport writes its NextProtos
		TLSHandshakeTimeout: 10 * time.Second,
		Protocols:           h2Protocols(p.proto),
	}
	cc, err := tr.NewClientConn(ctx, u.Scheme, u.Host)
	if err != nil {
		return nil, fmt.Errorf("connect (%s): %w", p.proto, err)
	}
	return cc, nil
}

// close closes every connection; call it once the streams that use them have ended.
func (p *h2Pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c.cc != nil {
			_ = c.cc.Close()
		}
	}
	p.conns = map[h2Key]*h2Conn{}
}

// h2Protocols is the one protocol a Transport may speak for proto: HTTP/2 over TLS (h2, offered alone by
// ALPN, so a gateway without HTTP/2 fails the handshake rather than answer in HTTP/1.1) or cleartext HTTP/2
// with prior knowledge (h2c).
func h2Protocols(proto string) *http.Protocols {
	p := new(http.Protocols)
	switch proto {
	case protoH2:
		p.SetHTTP2(true)
	case protoH2C:
		p.SetUnencryptedHTTP2(true)
	}
	return p
}

// clientTLS returns the TLS config of --proto=h2: the certificates of caFile as the only roots, or no
// verification at all with insecure, or the system's roots. Nil for the other protocols.
func clientTLS(proto string, insecure bool, caFile string) (*tls.Config, error) {
	if proto != protoH2 {
		return nil, nil // no TLS, no error
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // --insecure asks for it, against a loopback gateway
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile) //nolint:gosec // the operator names the file
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file: no PEM certificate in %s", caFile)
	}
	return c, nil
}

// roundTripH2 sends the stream's request on its group's HTTP/2 connection and returns the response, which
// must be HTTP/2.
func (c *client) roundTripH2(ctx context.Context, req *http.Request, o connOpts) (*http.Response, error) {
	cc, err := o.h2.conn(ctx, req.URL, o.h2Group, o.local)
	if err != nil {
		return nil, err
	}
	c.requested = time.Now()
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if resp.ProtoMajor != 2 {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("response: %s, want HTTP/2", resp.Proto)
	}
	return resp, nil
}
