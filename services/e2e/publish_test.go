package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/redistest"
)

// publishAnswer is a published record's answer.
type publishAnswer struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
}

// TestPublishExactlyOnceThroughSIGKILL: clients publish records with idempotency keys through two gateways
// sharing Redis, retrying every request that fails on the other gateway, while one gateway is killed with
// SIGKILL (requests in flight: some produced and not answered) and started again. The topic then holds each
// key's record exactly once, every answer names that record, and every answer's id resumes right after it.
func TestPublishExactlyOnceThroughSIGKILL(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	redisAddr, prefix := redistest.Addr(t), redistest.Prefix(t)
	bin := filepath.Join(buildBinaries(t), "gateway")
	topic := kafkatest.NewTopic(t, 3, nil)
	start := func(name string) (string, *process) {
		addr, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
		p := startProcess(t, name, bin, brokers, "--topics", topic, "--listen", addr, "--admin-listen", admin,
			"--prefill", "0", "--publish-topics", topic, "--publish-anonymous", "--redis-addr", redisAddr,
			"--publish-idempotency-prefix", prefix, "--publish-timeout", "2s", "--publish-queue-wait", "500ms",
			"--drain", "0s")
		waitReady(t, name, "http://"+admin+"/readyz")
		return "http://" + addr + "/topics/" + topic + "/records", p
	}
	urlA, procA := start("gateway a")
	urlB, _ := start("gateway b")
	var urls atomic.Pointer[[2]string]
	urls.Store(&[2]string{urlA, urlB})

	const clients, perClient = 8, 60
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		answers  = map[string]publishAnswer{}
		failures atomic.Int64 // requests that got no answer or a failure, and were retried
		dups     atomic.Int64
		progress atomic.Int64
	)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range perClient {
				key := fmt.Sprintf("c%d-%d", c, k)
				a, retried, err := publishUntilDone(ctx, &urls, key, fmt.Sprintf(`{"key":"k%d","value":%q}`, c, key))
				if err != nil {
					t.Errorf("%s: %v", key, err)
					return
				}
				failures.Add(int64(retried))
				if a.Duplicate {
					dups.Add(1)
				}
				mu.Lock()
				answers[key] = a
				mu.Unlock()
				progress.Add(1)
			}
		})
	}
	kafkatest.WaitFor(t, time.Minute, "a third of the records", func() bool { return progress.Load() >= clients*perClient/3 })
	procA.kill(t)
	time.Sleep(500 * time.Millisecond)
	urlA2, _ := start("gateway a, again")
	urls.Store(&[2]string{urlA2, urlB})
	wg.Wait()
	if t.Failed() {
		return
	}
	if failures.Load() == 0 {
		t.Fatal("no request failed: the kill did not catch one in flight, and the test proves nothing")
	}
	t.Logf("%d records, %d requests retried after a failure, %d answered as duplicates", len(answers), failures.Load(), dups.Load())

	byKey := map[string][]string{}
	for part, recs := range kafkatest.ReadAll(t, topic) {
		for _, r := range recs {
			for _, h := range r.Headers {
				if h.Key == "idempotency-key" {
					byKey[string(h.Value)] = append(byKey[string(h.Value)], fmt.Sprintf("%d/%d", part, r.Offset))
				}
			}
		}
	}
	for key, a := range answers {
		places := byKey[key]
		if len(places) != 1 {
			t.Errorf("key %s is in the topic %d times (%v), want once", key, len(places), places)
			continue
		}
		if got := fmt.Sprintf("%d/%d", a.Partition, a.Offset); got != places[0] {
			t.Errorf("key %s answered %s, the record is at %s", key, got, places[0])
		}
		v, err := position.Parse(a.ID)
		if o, ok := v.Offset(a.Partition); err != nil || !ok || o != a.Offset {
			t.Errorf("key %s: id %s does not resume right after partition %d offset %d", key, a.ID, a.Partition, a.Offset)
		}
	}
	if len(byKey) != len(answers) {
		t.Errorf("the topic holds %d keys, %d were published", len(byKey), len(answers))
	}
}

// publishUntilDone posts one record with its idempotency key to one gateway, and after a failure (no answer,
// a 5xx, a 409) again to the other, until it is answered 200. It returns the answer and the failures.
func publishUntilDone(ctx context.Context, urls *atomic.Pointer[[2]string], key, body string) (publishAnswer, int, error) {
	pick := rand.IntN(2)
	for failures := 0; ; failures++ {
		if ctx.Err() != nil {
			return publishAnswer{}, failures, ctx.Err()
		}
		url := urls.Load()[(pick+failures)%2]
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		switch {
		case resp.StatusCode == http.StatusOK:
			var a publishAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				return a, failures, fmt.Errorf("answer %q: %w", b, err)
			}
			return a, failures, nil
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusConflict:
			time.Sleep(100 * time.Millisecond)
		default:
			return publishAnswer{}, failures, errors.New(resp.Status + " " + string(b))
		}
	}
}

// TestPublishKeysPerSubject: through the built gateway with tokens and Redis, two token subjects that pick the
// same Idempotency-Key each get their record written; one subject's repeat of its key with another record is
// 409 naming the key and writes nothing; its repeat of the same record is the first's duplicate.
func TestPublishKeysPerSubject(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	bin := filepath.Join(buildBinaries(t), "gateway")
	topic := kafkatest.NewTopic(t, 2, nil)
	secret := []byte("e2e-secret-of-at-least-32-bytes-0123456789")
	secretFile := filepath.Join(t.TempDir(), "hmac")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	addr, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "gateway", bin, brokers, "--topics", topic, "--listen", addr, "--admin-listen", admin,
		"--prefill", "0", "--publish-topics", topic, "--auth", "required", "--auth-algorithms", "HS256",
		"--auth-hmac-secret-file", secretFile, "--redis-addr", redistest.Addr(t),
		"--publish-idempotency-prefix", redistest.Prefix(t), "--drain", "0s")
	waitReady(t, "gateway", "http://"+admin+"/readyz")
	url := "http://" + addr + "/topics/" + topic + "/records"
	as := func(sub string) string {
		claims := jwt.MapClaims{
			"sub": sub, "exp": time.Now().Add(time.Hour).Unix(),
			"ssegate": map[string]any{"topics": []string{}, "publish": []string{topic}},
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	send := func(tok, body string) (int, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "order-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	alice, bob := as("alice"), as("bob")
	answers := map[string]publishAnswer{}
	for name, tok := range map[string]string{"alice": alice, "bob": bob} {
		code, body := send(tok, `{"key":"cart-9","value":"`+name+`'s order"}`)
		var a publishAnswer
		if err := json.Unmarshal([]byte(body), &a); code != http.StatusOK || err != nil || a.Duplicate {
			t.Fatalf("%s: %d %s; want its own record written", name, code, body)
		}
		answers[name] = a
	}
	if answers["alice"].Partition == answers["bob"].Partition && answers["alice"].Offset == answers["bob"].Offset {
		t.Fatalf("alice and bob were answered the same place: %+v", answers)
	}
	code, body := send(alice, `{"key":"cart-9","value":"alice's other order"}`)
	var e struct {
		Error, Reason string
		Key           string `json:"idempotency_key"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusConflict || e.Reason != "idempotency_conflict" || e.Key != "order-1" {
		t.Fatalf("alice's key with another record: %d %s; want 409 idempotency_conflict naming order-1", code, body)
	}
	code, body = send(alice, `{"key":"cart-9","value":"alice's order"}`)
	var again publishAnswer
	if err := json.Unmarshal([]byte(body), &again); err != nil || code != http.StatusOK || !again.Duplicate ||
		again.Partition != answers["alice"].Partition || again.Offset != answers["alice"].Offset {
		t.Fatalf("alice's record again: %d %s; want the first's place, a duplicate", code, body)
	}
	values := map[string]int{}
	for _, recs := range kafkatest.ReadAll(t, topic) {
		for _, r := range recs {
			values[string(r.Value)]++
		}
	}
	if len(values) != 2 || values["alice's order"] != 1 || values["bob's order"] != 1 {
		t.Fatalf("the topic holds %v; want alice's and bob's order once each", values)
	}
}
