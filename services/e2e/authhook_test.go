package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// TestAuthHookBlackBox: the gateway binary with an authorization hook (a session store served by the test):
// a session's stream reads on past the hook's TTL while the session lives, ends with token-expired at its exact
// position within the TTL of the session's revocation, is refused while revoked, resumes with every record
// once when the session is back, and a hook slower than auth-hook-timeout refuses with 503, never lets in.
func TestAuthHookBlackBox(t *testing.T) {
	var mu sync.Mutex
	live, slow := true, false
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok, wait := live, slow
		mu.Unlock()
		if wait {
			time.Sleep(2 * time.Second)
		}
		c, err := r.Cookie("session")
		if err != nil || c.Value != "s-1" || !ok {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"session revoked"}`))
			return
		}
		_, _ = w.Write([]byte(`{"subject":"alice"}`))
	}))
	t.Cleanup(hook.Close)
	set := func(l, s bool) { mu.Lock(); live, slow = l, s; mu.Unlock() }

	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 2, nil)
	clients, _ := blackBoxGateway(t, brokers, "--topics", topic, "--auth-url", hook.URL, "--auth-hook-ttl", "3s", "--auth-hook-timeout", "500ms")
	url := "http://" + clients + "/streams/" + topic
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	seq := 0
	produce := func() {
		kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", seq%5), Value: fmt.Appendf(nil, "r%d", seq)})
		seq++
	}
	open := func(lastID string) (*http.Response, *sse.Parser) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		req.Header.Set("Cookie", "session=s-1")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp, sse.NewParser(resp.Body)
	}
	seen := map[string]bool{}
	lastID := ""
	read := func(p *sse.Parser) sse.Event {
		ev, err := p.Next()
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if ev.Type == "message" {
			if seen[ev.Data] {
				t.Fatalf("%s twice", ev.Data)
			}
			seen[ev.Data] = true
			lastID = ev.ID
		}
		return ev
	}
	resp, p := open("")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		produce()
		if ev := read(p); ev.Type != "message" {
			t.Fatalf("event %+v while the session lives, past the TTL", ev)
		}
	}
	set(false, false)
	revoked := time.Now()
	var ended sse.Event
	for ended.Type == "" {
		produce()
		if ev := read(p); ev.Type == "token-expired" {
			ended = ev
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(revoked); took > 4*time.Second {
		t.Errorf("a revoked session read on for %v (auth-hook-ttl 3s)", took)
	}
	if ended.ID != lastID {
		t.Errorf("token-expired id %s, want the position %s", ended.ID, lastID)
	}
	if r, _ := open(lastID); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a revoked session's reconnect: %d, want the hook's 403", r.StatusCode)
	}
	produce()
	set(true, false)
	resumed, p := open(lastID)
	bound := time.AfterFunc(30*time.Second, func() { _ = resumed.Body.Close() }) // a missing record fails, not hangs
	defer bound.Stop()
	for len(seen) < seq {
		if ev := read(p); ev.Type != "message" {
			t.Fatalf("event %+v on the resume", ev)
		}
	}
	set(true, true)
	start := time.Now()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Cookie", "session=s-2") // not cached: the hook is asked
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = r2.Body.Close()
	if r2.StatusCode != http.StatusServiceUnavailable || time.Since(start) > 1500*time.Millisecond {
		t.Errorf("a slow hook: status %d after %v, want 503 within about auth-hook-timeout", r2.StatusCode, time.Since(start))
	}
}
