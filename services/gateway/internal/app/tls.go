package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/pkg/settings"
)

// The clients' port speaks TLS when tls-cert-file and tls-key-file are set: HTTP/2 by ALPN, HTTP/1.1 kept.
// Without TLS it speaks HTTP/1.1, and with h2c also cleartext HTTP/2 with prior knowledge (the connection
// preface at once, as proxies and meshes speak it to an upstream; the Upgrade: h2c dance is not offered).
//
// The certificate and key are read again when either file changes on disk: a mounted Secret that rotates
// swaps both at once, and the next TLS handshake presents the new pair. Files are looked at, at most once a
// second, by the handshakes themselves; a pair that does not load (a key that does not match the certificate
// yet, a file half written) leaves the previous pair in service and is tried again a second later.

// TLSConfig is how the clients' port speaks TLS and HTTP/2.
type TLSConfig struct {
	// CertFile and KeyFile are the PEM files of the clients' port's certificate (its chain, leaf first) and
	// key. Both or neither. Default none: the port speaks cleartext.
	CertFile, KeyFile string
	// H2C makes the cleartext port speak HTTP/2 with prior knowledge too, beside HTTP/1.1. Not with TLS, where
	// ALPN offers HTTP/2. Default false.
	H2C bool
}

// enabled says the clients' port speaks TLS.
func (c TLSConfig) enabled() bool { return c.CertFile != "" }

func tlsSettings(c *TLSConfig) []settings.Setting {
	return []settings.Setting{
		setting("tls-cert-file", "PEM certificate (chain, leaf first) of the clients' port: it then speaks TLS, HTTP/2 by ALPN and HTTP/1.1; read again when it changes on disk", settings.String(&c.CertFile)),
		setting("tls-key-file", "PEM private key of tls-cert-file; read again when it changes on disk", settings.String(&c.KeyFile)),
		setting("h2c", "serve cleartext HTTP/2 (prior knowledge) beside HTTP/1.1 on the clients' port, for proxies and meshes that speak it to their upstreams; not with TLS", settings.Bool(&c.H2C)),
	}
}

// validate checks that the files come as a pair that loads, and that h2c is asked for without TLS.
func (c TLSConfig) validate() error {
	switch {
	case c.CertFile == "" && c.KeyFile != "":
		return errors.New("invalid setting tls-key-file (SSEGATE_TLS_KEY_FILE): set without tls-cert-file (SSEGATE_TLS_CERT_FILE); both or neither")
	case c.CertFile != "" && c.KeyFile == "":
		return errors.New("invalid setting tls-cert-file (SSEGATE_TLS_CERT_FILE): set without tls-key-file (SSEGATE_TLS_KEY_FILE); both or neither")
	case c.CertFile != "" && c.H2C:
		return errors.New("invalid setting h2c (SSEGATE_H2C): h2c is cleartext HTTP/2; with tls-cert-file HTTP/2 is offered by ALPN already")
	}
	if c.CertFile != "" {
		if _, err := loadPair(c.CertFile, c.KeyFile); err != nil {
			return fmt.Errorf("invalid setting tls-cert-file (SSEGATE_TLS_CERT_FILE) or tls-key-file (SSEGATE_TLS_KEY_FILE): %w", err)
		}
	}
	return nil
}

// protocols returns what the clients' port speaks: HTTP/1.1, and HTTP/2 over TLS or, with h2c, cleartext.
func (c TLSConfig) protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	if c.enabled() {
		p.SetHTTP2(true)
	}
	if c.H2C {
		p.SetUnencryptedHTTP2(true)
	}
	return p
}

// loadPair loads a certificate and its key, and parses the leaf (for its expiry).
func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse the certificate: %w", err)
		}
	}
	return &cert, nil
}

// certCheckEvery is how often the handshakes look at the files.
const certCheckEvery = time.Second

// certStore holds the clients' port's certificate, read again when its files change.
type certStore struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	cert atomic.Pointer[tls.Certificate]

	mu      sync.Mutex
	checked time.Time
	loaded  fileStamps // of the files the pair in service was read from
	failing bool       // the files changed and do not load: logged once until they change again
	failed  fileStamps // of those files

	reloads, failures atomic.Int64
}

// fileStamp tells a file's versions apart: a Secret's rotation swaps in new files (new inode, new time).
type fileStamp struct {
	ino   uint64
	size  int64
	mtime time.Time
}

type fileStamps [2]fileStamp

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s, nil
}

func (s *certStore) stamps() (fileStamps, error) {
	c, err := stampOf(s.certFile)
	if err != nil {
		return fileStamps{}, err
	}
	k, err := stampOf(s.keyFile)
	return fileStamps{c, k}, err
}

// newCertStore loads the pair, or fails.
func newCertStore(c TLSConfig, log *slog.Logger) (*certStore, error) {
	s := &certStore{certFile: c.CertFile, keyFile: c.KeyFile, log: log, now: time.Now}
	st, err := s.stamps()
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	cert, err := loadPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	s.cert.Store(cert)
	s.loaded, s.checked = st, s.now()
	return s, nil
}

// getCertificate is the TLS config's GetCertificate: the pair in service, read again first when the files
// changed since they were last looked at (at most once a second).
func (s *certStore) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	if now := s.now(); now.Sub(s.checked) >= certCheckEvery {
		s.checked = now
		s.refresh()
	}
	s.mu.Unlock()
	return s.cert.Load(), nil
}

// refresh reads the pair again when its files changed; a pair that does not load leaves the one in service.
// It runs under mu.
func (s *certStore) refresh() {
	st, err := s.stamps()
	if err == nil && st == s.loaded {
		return
	}
	var cert *tls.Certificate
	if err == nil {
		cert, err = loadPair(s.certFile, s.keyFile)
	}
	if err != nil {
		if !s.failing || st != s.failed {
			s.failures.Add(1)
			s.log.Warn("tls: the certificate or key changed on disk and does not load; the previous pair stays in service",
				"cert_file", s.certFile, "key_file", s.keyFile, "err", err)
		}
		s.failing, s.failed = true, st
		return
	}
	s.cert.Store(cert)
	s.loaded, s.failing = st, false
	s.reloads.Add(1)
	s.log.Info("tls: certificate reloaded", "cert_file", s.certFile, "subject", cert.Leaf.Subject.String(),
		"not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// serverConfig returns the clients' port's TLS config.
func (s *certStore) serverConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.getCertificate}
}

// registerTLSMetrics adds the certificate's expiry and its reloads to the telemetry.
func (t *telemetry) registerTLSMetrics(s *certStore) error {
	m := t.provider.Meter("github.com/ssegate/ssegate/services/gateway")
	expiry, err1 := m.Int64ObservableGauge("ssegate.tls.certificate.expiry",
		metric.WithDescription("When the clients' port's certificate in service expires (Unix seconds)"), metric.WithUnit("s"))
	reloads, err2 := m.Int64ObservableCounter("ssegate.tls.certificate.reloads",
		metric.WithDescription("Times the clients' port's certificate files changed on disk, by result: loaded, or failed (the previous pair stays in service)"))
	for _, err := range []error{err1, err2} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	loaded := metric.WithAttributes(attribute.String("result", "loaded"))
	failed := metric.WithAttributes(attribute.String("result", "failed"))
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(expiry, s.cert.Load().Leaf.NotAfter.Unix())
		o.ObserveInt64(reloads, s.reloads.Load(), loaded)
		o.ObserveInt64(reloads, s.failures.Load(), failed)
		return nil
	}, expiry, reloads)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
