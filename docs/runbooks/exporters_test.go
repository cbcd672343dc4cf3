package runbooks

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/tlstest"
)

// startPublishTLSGateway starts a second gateway, on a topic of its own, with the features whose metrics the
// main one does not export: publishing (publish-topics, anonymous), TLS on the clients' port (a self-signed
// certificate for 127.0.0.1) and compact ids (id-format v2, with a position topic of its own). It publishes one record through it, so that every publish metric
// has a series (the duration histogram has none before a request), and returns its admin URL. The pages do
// not use it: they are written for the variables of docs/runbook.md, and start a gateway of their own to show
// what these features answer.
func startPublishTLSGateway(t *testing.T, env stack) string {
	t.Helper()
	topic := kafkatest.NewTopic(t, 1, nil)
	dir := t.TempDir()
	pair := tlstest.New(t, "ssegate runbooks", time.Now().Add(90*24*time.Hour), "127.0.0.1")
	certFile, keyFile := pair.Write(t, dir)
	gw, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "publishing TLS gateway", filepath.Join(env["BIN"], "gateway"), env["BROKERS"],
		"--topics", topic, "--publish-topics", topic, "--publish-anonymous",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--listen", gw, "--admin-listen", admin,
		"--id-format", "v2", "--position-topic", topic+".positions")
	waitReady(t, "publishing TLS gateway", "http://"+admin+"/readyz")

	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pair.Pool(), MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true,
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
