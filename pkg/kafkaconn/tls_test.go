package kafkaconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// testCA issues certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns the PEM certificate and key of cn, for 127.0.0.1 (a server) or a client.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// mutualTLSServer accepts TLS connections that present a client certificate of ca and sends the name of
// each client it saw on the returned channel.
func mutualTLSServer(t *testing.T, ca *testCA) (addr string, clients <-chan string) {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, "server", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	seen := make(chan string, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				seen <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String(), seen
}

// TestTLSClientCertRotation: the client certificate and key files are read again when they change: a dialer
// made with client A's presents client B's certificate once the files hold B's, without being made again.
// The broker is checked by its IP address against the CA file.
func TestTLSClientCertRotation(t *testing.T) {
	ca := newTestCA(t)
	addr, clients := mutualTLSServer(t, ca)
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	writeFile(t, caFile, string(ca.pem))
	install := func(cn string) {
		c, k := ca.issue(t, cn, false)
		writeFile(t, certFile, string(c))
		writeFile(t, keyFile, string(k))
	}
	install("client-a")
	d, err := TLSConfig{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}.NewDialer()
	if err != nil {
		t.Fatal(err)
	}
	dial := func() string {
		t.Helper()
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		_ = c.Close()
		return <-clients
	}
	if got := dial(); got != "client-a" {
		t.Fatalf("the server saw %q, want client-a", got)
	}
	install("client-b")
	kafkatest.WaitFor(t, 10*time.Second, "the rotated client certificate", func() bool { return dial() == "client-b" })
}

// TestTLSDialerErrors: NewDialer reads the files once and names the one at fault.
func TestTLSDialerErrors(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	writeFile(t, good, string(ca.pem))
	notPEM := filepath.Join(dir, "junk.pem")
	writeFile(t, notPEM, "junk")
	certA, _ := ca.issue(t, "a", false)
	_, keyB := ca.issue(t, "b", false)
	cert, key := filepath.Join(dir, "a.pem"), filepath.Join(dir, "b-key.pem")
	writeFile(t, cert, string(certA))
	writeFile(t, key, string(keyB))
	for _, tc := range []struct {
		name string
		cfg  TLSConfig
		want string
	}{
		{"missing CA file", TLSConfig{CAFile: filepath.Join(dir, "nope.pem")}, "tls ca file " + dir + "/nope.pem: no such file"},
		{"CA file without PEM", TLSConfig{CAFile: notPEM}, "no PEM certificates"},
		{"key of another certificate", TLSConfig{CAFile: good, CertFile: cert, KeyFile: key}, "private key does not match public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.cfg.NewDialer(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewDialer: %v, want %q", err, tc.want)
			}
		})
	}
}
