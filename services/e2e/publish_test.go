package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
