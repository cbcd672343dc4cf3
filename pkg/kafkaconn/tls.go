package kafkaconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ssegate/ssegate/pkg/secret"
)

// dialTimeout bounds the TCP connect of a TLS dial (franz-go's default dial timeout).
const dialTimeout = 10 * time.Second

// TLSDialer dials TLS connections with the settings of a TLSConfig, its CA, certificate and key files read
// again when they change (secret.File), so that a rotated CA bundle or client certificate is used by the
// next connection without a restart. Connections already open keep the certificates they were made with.
// Safe for concurrent use.
type TLSDialer struct {
	cfg         TLSConfig
	systemRoots bool // the CA file adds to the system roots instead of replacing them
	ca, cert    *secret.File
	key         *secret.File
	net         net.Dialer

	mu                     sync.Mutex
	caPEM, certPEM, keyPEM []byte // what built tc
	tc                     *tls.Config
}

// NewDialer returns the dialer of t, reading its files once to check them: an unreadable file, a CA file
// without certificates or a key that does not match its certificate is an error naming the setting.
func (t TLSConfig) NewDialer() (*TLSDialer, error) {
	return t.newDialer(false)
}

func (t TLSConfig) newDialer(systemRoots bool) (*TLSDialer, error) {
	d := &TLSDialer{cfg: t, systemRoots: systemRoots, net: net.Dialer{Timeout: dialTimeout}}
	if t.CAFile != "" {
		d.ca = secret.NewFile("tls ca file", t.CAFile)
	}
	if t.CertFile != "" {
		d.cert = secret.NewFile("tls cert file", t.CertFile)
		d.key = secret.NewFile("tls key file", t.KeyFile)
	}
	if _, err := d.config(); err != nil {
		return nil, err
	}
	return d, nil
}

// Load builds the tls.Config t describes from its files as they are now. Connections made with it do not
// follow a later change of the files: NewDialer's do.
func (t TLSConfig) Load() (*tls.Config, error) {
	d, err := t.NewDialer()
	if err != nil {
		return nil, err
	}
	return d.config()
}

// DialContext connects to addr (host:port) and completes a TLS handshake, checking the peer's certificate
// against the CA file as it is now and for the host's name (or the configured ServerName). It fits
// kgo.Dialer and http.Transport.DialTLSContext.
func (d *TLSDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	tc, err := d.config()
	if err != nil {
		return nil, err
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("kafkaconn: tls dial %q: %w", addr, err)
		}
		tc.ServerName = host
	}
	return (&tls.Dialer{NetDialer: &d.net, Config: tc}).DialContext(ctx, network, addr)
}

// config returns the tls.Config of the files' current contents, built again when one of them changed.
func (d *TLSDialer) config() (*tls.Config, error) {
	var caPEM, certPEM, keyPEM []byte
	var err error
	if d.ca != nil {
		if caPEM, err = d.ca.Read(); err != nil {
			return nil, err
		}
	}
	if d.cert != nil {
		if certPEM, err = d.cert.Read(); err != nil {
			return nil, err
		}
		if keyPEM, err = d.key.Read(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tc != nil && bytes.Equal(caPEM, d.caPEM) && bytes.Equal(certPEM, d.certPEM) && bytes.Equal(keyPEM, d.keyPEM) {
		return d.tc, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         d.cfg.ServerName,
		InsecureSkipVerify: d.cfg.InsecureSkipVerify, //nolint:gosec // an explicit, documented test-only setting
	}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if d.systemRoots {
			if sys, err := x509.SystemCertPool(); err == nil {
				pool = sys
			}
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("tls ca file %s: no PEM certificates in it", d.cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// A certificate and a key rotated one after the other do not match for a moment: the next
			// connection, a moment later, finds them matching.
			return nil, fmt.Errorf("tls cert file %s and key file %s: %w", d.cfg.CertFile, d.cfg.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	d.caPEM, d.certPEM, d.keyPEM, d.tc = caPEM, certPEM, keyPEM, tc
	return tc, nil
}
