package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// oauthOpts returns the options of a client authenticating with tokens from ts at the test broker's SASL
// listener (SASL_PLAINTEXT, and an http token endpoint: both allowed here).
func oauthOpts(t *testing.T, ts *kafkatest.TokenServer) []kgo.Opt {
	t.Helper()
	opts, err := Config{Brokers: kafkatest.SASLBrokers(t), SASL: SASLConfig{
		Mechanism: MechanismOAuthBearer, AllowPlaintext: true,
		OAuth: OAuthConfig{
			TokenURL: ts.URL, ClientID: ts.ClientID, ClientSecret: ts.ClientSecret, Scope: "kafka",
			Extensions: map[string]string{"logicalCluster": "lkc-test"}, // the broker accepts any
		},
	}}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestOAuthBearerLongStream: against a broker that checks OAUTHBEARER tokens with its JWKS and asks every
// connection to authenticate again every 3 s, clients whose tokens live 4 s produce and read a stream for 9 s:
// every record arrives, in order, because the token is refreshed before it expires. Without the refresh the
// broker drops the connections once the first token has expired.
func TestOAuthBearerLongStream(t *testing.T) {
	ts := kafkatest.NewTokenServer(t, 4*time.Second, false)
	topic := kafkatest.NewTopic(t, 1, nil)
	opts := oauthOpts(t, ts)
	prod, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const n = 36 // one every 250 ms: 9 s
	errs := make(chan error, 1)
	go func() {
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				errs <- fmt.Errorf("record %d: %w", i, err)
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		errs <- nil
	}()
	next := 0
	for next < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint(next) {
				t.Fatalf("record %q, want %d", r.Value, next)
			}
			next++
		})
	}
	if err := <-errs; err != nil {
		t.Fatalf("produce: %v", err)
	}
	if got := ts.Issued.Load(); got < 3 {
		t.Errorf("%d tokens issued in 9 s of tokens living 4 s, want at least 3", got)
	}
}

// TestOAuthBearerForeignToken: a token signed with a key the broker does not know is refused, as an
// authentication failure.
func TestOAuthBearerForeignToken(t *testing.T) {
	ts := kafkatest.NewTokenServer(t, time.Minute, true)
	topic := kafkatest.NewTopic(t, 1, nil)
	cl, err := kgo.NewClient(append(oauthOpts(t, ts), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("produce with a foreign token: %v, want %v", err, kerr.SaslAuthenticationFailed)
	}
}

// TestOAuthClientSecretRotation: a client whose secret comes from kafka-sasl-oauth-client-secret-file keeps
// streaming while the identity provider rotates the secret (the old one refused from then on) and the file
// follows: its next token requests carry the new secret. The broker asks every connection to authenticate
// again every 3 s and tokens live 4 s, so a client that read the file once loses its connections.
func TestOAuthClientSecretRotation(t *testing.T) {
	ts := kafkatest.NewTokenServer(t, 4*time.Second, false)
	topic := kafkatest.NewTopic(t, 1, nil)
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	writeFile(t, secretFile, ts.ClientSecret+"\n")
	opts, err := Config{Brokers: kafkatest.SASLBrokers(t), SASL: SASLConfig{
		Mechanism: MechanismOAuthBearer, AllowPlaintext: true,
		OAuth: OAuthConfig{TokenURL: ts.URL, ClientID: ts.ClientID, ClientSecretFile: secretFile, Scope: "kafka"},
	}}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(20*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var issuedAtRotation int64
	const n = 40 // one every 250 ms: 10 s, the secret rotated after 2 s
	for i := range n {
		if i == 8 {
			ts.RotateSecret("rotated-secret")
			writeFile(t, secretFile, "rotated-secret\n")
			issuedAtRotation = ts.Issued.Load()
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatalf("record %d (the secret rotated at 8): %v", i, err)
		}
		time.Sleep(250 * time.Millisecond) // the stream's pace, not a wait for something
	}
	if got := ts.Issued.Load() - issuedAtRotation; got < 2 {
		t.Errorf("%d tokens issued in the 8 s after the rotation, want at least 2", got)
	}
	if got := len(kafkatest.ReadAll(t, topic)[0]); got != n {
		t.Fatalf("the topic holds %d records, want %d", got, n)
	}
}
