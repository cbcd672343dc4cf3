package runbooks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// startPublishTLSGateway starts a second gateway, on a topic of its own, with the features whose metrics the
// main one does not export: publishing (publish-topics, anonymous) and TLS on the clients' port (a
// self-signed certificate for 127.0.0.1). It publishes one record through it, so that every publish metric
// has a series (the duration histogram has none before a request), and returns its admin URL. The pages do
// not use it: they are written for the variables of docs/runbook.md, and start a gateway of their own to show
// what these features answer.
func startPublishTLSGateway(t *testing.T, env stack) string {
	t.Helper()
	topic := kafkatest.NewTopic(t, 1, nil)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	gw, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "publishing TLS gateway", filepath.Join(env["BIN"], "gateway"), env["BROKERS"],
		"--topics", topic, "--publish-topics", topic, "--publish-anonymous",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--listen", gw, "--admin-listen", admin)
	waitReady(t, "publishing TLS gateway", "http://"+admin+"/readyz")

	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true,
	}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+gw+"/topics/"+topic+"/records",
		strings.NewReader(`{"key": "o-0001", "value": {"status": "order.created"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "runbooks-1")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("publish through the TLS gateway: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("publish through the TLS gateway: %s %s: %s", resp.Proto, resp.Status, body)
	}
	return "http://" + admin
}

// selfSigned writes a self-signed ECDSA certificate for 127.0.0.1, valid for 90 days, and its key as PEM files
// in dir, and returns them with a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "ssegate runbooks"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
