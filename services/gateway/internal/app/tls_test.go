package app

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/tlstest"
)

// testPair is a throwaway self-signed certificate for 127.0.0.1 and localhost, and its key.
type testPair struct{ tlstest.Pair }

func newTestPair(t *testing.T, cn string) testPair {
	t.Helper()
	return newTestPairUntil(t, cn, time.Now().Add(24*time.Hour))
}

// newTestPairUntil is newTestPair with a certificate that expires at notAfter.
func newTestPairUntil(t *testing.T, cn string, notAfter time.Time) testPair {
	t.Helper()
	return testPair{tlstest.New(t, cn, notAfter, "127.0.0.1", "localhost")}
}

// install writes the pair as a mounted Secret's rotation does: new files swapped in by rename.
func (p testPair) install(t *testing.T, certFile, keyFile string) {
	t.Helper()
	for _, f := range []struct {
		path string
		data []byte
	}{{certFile, p.CertPEM}, {keyFile, p.KeyPEM}} {
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// pool returns a pool of roots trusting the pair.
func (p testPair) pool() *x509.CertPool { return p.Pool() }

// TestCertStoreReloads: the pair in service is read again when its files change; a pair that does not load
// leaves the previous one in service, is counted once, and is taken once fixed; files that do not change are
// not read again.
func TestCertStoreReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a, b, c := newTestPair(t, "a"), newTestPair(t, "b"), newTestPair(t, "c")
	a.install(t, certFile, keyFile)
	s, err := newCertStore(TLSConfig{CertFile: certFile, KeyFile: keyFile}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.now = func() time.Time { return now }
	serving := func() string {
		t.Helper()
		cert, err := s.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return cert.Leaf.Subject.CommonName
	}
	if got := serving(); got != "a" {
		t.Fatalf("serving %q at start, want a", got)
	}

	b.install(t, certFile, keyFile)
	if got := serving(); got != "a" {
		t.Errorf("serving %q within a second of the last look, want a (the files are looked at once a second)", got)
	}
	now = now.Add(certCheckEvery)
	if got := serving(); got != "b" {
		t.Errorf("serving %q after the files changed, want b", got)
	}

	// Half a rotation: c's certificate with b's key does not load.
	if err := os.WriteFile(certFile+".new", c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(certFile+".new", certFile); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		now = now.Add(certCheckEvery)
		if got := serving(); got != "b" {
			t.Errorf("serving %q while the files do not make a pair, want b", got)
		}
	}
	if f := s.failures.Load(); f != 1 {
		t.Errorf("failures = %d after one bad change looked at three times, want 1", f)
	}
	c.install(t, certFile, keyFile)
	now = now.Add(certCheckEvery)
	if got := serving(); got != "c" {
		t.Errorf("serving %q once the pair is whole, want c", got)
	}
	if r := s.reloads.Load(); r != 2 {
		t.Errorf("reloads = %d, want 2 (b, c)", r)
	}
}

// TestTLSServesRotatedCertificate: a TLS client of the clients' port is shown the certificate on disk now,
// after a rotation, without a restart, and negotiates HTTP/2 by ALPN.
func TestTLSServesRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a, b := newTestPair(t, "a"), newTestPair(t, "b")
	a.install(t, certFile, keyFile)
	s, err := newCertStore(TLSConfig{CertFile: certFile, KeyFile: keyFile}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", func() *tls.Config {
		cfg := s.serverConfig()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		return cfg
	}())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	dial := func(p testPair) (*tls.ConnectionState, error) {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: p.pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			return nil, err
		}
		defer func() { _ = c.Close() }()
		st := c.ConnectionState()
		return &st, nil
	}
	st, err := dial(a)
	if err != nil {
		t.Fatalf("handshake with a: %v", err)
	}
	if st.NegotiatedProtocol != "h2" {
		t.Errorf("ALPN chose %q, want h2", st.NegotiatedProtocol)
	}
	b.install(t, certFile, keyFile)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := dial(b); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not served within 5 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := dial(a); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting only the old certificate: %v, want a certificate error", err)
	}
}

// TestTLSConfigValidate: the TLS settings come as a pair that loads, and h2c only without TLS.
func TestTLSConfigValidate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	newTestPair(t, "a").install(t, certFile, keyFile)
	other := filepath.Join(dir, "other.key")
	if err := os.WriteFile(other, newTestPair(t, "b").KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  TLSConfig
		want string // in the error; "" for none
	}{
		{"none", TLSConfig{}, ""},
		{"pair", TLSConfig{CertFile: certFile, KeyFile: keyFile}, ""},
		{"h2c", TLSConfig{H2C: true}, ""},
		{"key alone", TLSConfig{KeyFile: keyFile}, "tls-key-file (SSEGATE_TLS_KEY_FILE): set without tls-cert-file"},
		{"cert alone", TLSConfig{CertFile: certFile}, "tls-cert-file (SSEGATE_TLS_CERT_FILE): set without tls-key-file"},
		{"h2c with tls", TLSConfig{CertFile: certFile, KeyFile: keyFile, H2C: true}, "invalid setting h2c (SSEGATE_H2C)"},
		{"missing file", TLSConfig{CertFile: filepath.Join(dir, "nope"), KeyFile: keyFile}, "no such file"},
		{"key of another", TLSConfig{CertFile: certFile, KeyFile: other}, "private key does not match public key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
