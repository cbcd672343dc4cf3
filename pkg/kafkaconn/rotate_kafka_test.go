package kafkaconn

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// connCounter counts a client's open connections to brokers.
type connCounter struct{ open atomic.Int64 }

func (c *connCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.open.Add(1)
	}
}

func (c *connCounter) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { c.open.Add(-1) }

// writeFile writes s to path, replacing what it held.
func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSCRAMPasswordRotation: a client whose password comes from kafka-sasl-password-file keeps producing after
// the broker's SCRAM credentials change to a new password (the old one refused from then on) and the file
// follows: the connections it opens after the change authenticate with the file's new contents. Reading the
// file once at start, the client cannot connect again. A consumer of the same options reads on throughout.
func TestSCRAMPasswordRotation(t *testing.T) {
	brokers := kafkatest.SASLBrokers(t)
	adm := kafkatest.Admin(t)
	ctx := kafkatest.Context(t)
	user := "rotate-" + kafkatest.TopicName(t)[2:]
	setPassword := func(pw string) {
		t.Helper()
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pw}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("set the SCRAM password: %v", err)
		}
	}
	setPassword("old-password")
	t.Cleanup(func() {
		_, _ = adm.AlterUserSCRAMs(context.Background(), []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha512}}, nil)
	})
	pwFile := filepath.Join(t.TempDir(), "password")
	writeFile(t, pwFile, "old-password\n")
	topic := kafkatest.NewTopic(t, 1, nil)
	opts, err := Config{Brokers: brokers, SASL: SASLConfig{Mechanism: MechanismScramSHA512, Username: user, PasswordFile: pwFile}}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	conns := &connCounter{}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.ConnIdleTimeout(300*time.Millisecond),
		kgo.WithHooks(conns), kgo.RecordDeliveryTimeout(15*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	consumed := make(chan string, 2)
	go func() {
		for len(consumed) < cap(consumed) {
			fs := cons.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { consumed <- string(r.Value) })
		}
	}()
	produce := func(v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	produce("before")
	setPassword("new-password")
	writeFile(t, pwFile, "new-password\n")
	// Every connection authenticated with the old password closes once idle: what follows needs new ones.
	kafkatest.WaitFor(t, 10*time.Second, "the client's idle connections to close", func() bool { return conns.open.Load() == 0 })
	produce("after")
	got := kafkatest.ReadAll(t, topic)[0]
	if len(got) != 2 || string(got[0].Value) != "before" || string(got[1].Value) != "after" {
		t.Fatalf("the topic holds %d records, want before and after", len(got))
	}
	for _, want := range []string{"before", "after"} {
		select {
		case v := <-consumed:
			if v != want {
				t.Fatalf("the consumer read %q, want %q", v, want)
			}
		case <-ctx.Done():
			t.Fatalf("the consumer did not read %q", want)
		}
	}
}

// TestTLSCARotation: a client whose kafka-tls-ca-file holds a CA that did not sign the brokers' certificate
// cannot connect; once the file holds the right CA, the same client connects and produces, without a restart.
func TestTLSCARotation(t *testing.T) {
	brokers, rightCA := kafkatest.TLSBrokers(t)
	right, err := os.ReadFile(rightCA)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, caFile, string(newTestCA(t).pem))
	topic := kafkatest.NewTopic(t, 1, nil)
	opts, err := Config{Brokers: brokers, TLS: TLSConfig{CAFile: caFile}}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ping := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		return cl.Ping(ctx)
	}
	var unknown x509.UnknownAuthorityError
	if err := ping(5 * time.Second); !errors.As(err, &unknown) {
		t.Fatalf("ping with the wrong CA: %v, want an unknown authority", err)
	}
	writeFile(t, caFile, string(right))
	kafkatest.WaitFor(t, 15*time.Second, "a connection with the rotated CA file", func() bool { return ping(2*time.Second) == nil })
	if err := cl.ProduceSync(kafkatest.Context(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the rotation: %v", err)
	}
}
