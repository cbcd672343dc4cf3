package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// sessionStore is a small authorization hook: a site's session store, which knows sessions by their cookie
// and answers the gateway's questions as docs/security.md says a hook does. It can be slowed down, taken down,
// and have sessions revoked.
type sessionStore struct {
	srv    *httptest.Server
	cookie string // the session cookie's name
	mu     sync.Mutex
	users  map[string]string         // session cookie -> subject
	scope  map[string]map[string]any // subject -> scope (nil: what was asked)
	delay  time.Duration
	down   bool
	calls  atomic.Int64
	last   atomic.Pointer[hookSeen]
}

// hookSeen is what the hook was last sent.
type hookSeen struct {
	Body   hookRequest
	Cookie string
	Origin string
}

func newSessionStore(t *testing.T) *sessionStore {
	s := &sessionStore{cookie: "session", users: map[string]string{}, scope: map[string]map[string]any{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sessionStore) serve(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	var body hookRequest
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.last.Store(&hookSeen{Body: body, Cookie: r.Header.Get("Cookie"), Origin: r.Header.Get("Origin")})
	s.mu.Lock()
	delay, down := s.delay, s.down
	var subject string
	if c, err := r.Cookie(s.cookie); err == nil {
		subject = s.users[c.Value]
	}
	scope := s.scope[subject]
	s.mu.Unlock()
	time.Sleep(delay)
	switch {
	case down:
		w.WriteHeader(http.StatusBadGateway)
	case subject == "":
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"no session: log in"}`))
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"subject": subject, "scope": scope})
	}
}

func (s *sessionStore) set(f func(s *sessionStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// withHook is a gateway whose topics ask the session store, with answers trusted ttl.
func withHook(s *sessionStore, ttl time.Duration) func(*Config) {
	return func(c *Config) {
		c.Auth.Hook.URL = s.srv.URL + "/authorize"
		c.Auth.Hook.TTL = ttl
		c.Auth.Hook.Timeout = 500 * time.Millisecond
	}
}

func sessionHeader(cookie string) http.Header { return http.Header{"Cookie": {"session=" + cookie}} }

// sessionHeaders is sessionHeader for connectWith, with more headers (name, value, ...).
func sessionHeaders(cookie string, more ...string) map[string]string {
	h := map[string]string{"Cookie": "session=" + cookie}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

// TestAuthHookRefusals: what the hook says is what the client gets, before the stream starts; a hook that does
// not answer, or not in time, is a 503, never an open door.
func TestAuthHookRefusals(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	s := newSessionStore(t)
	s.set(func(s *sessionStore) { s.users["c-alice"] = "alice" })
	g := startGateway(t, []string{topic}, withHook(s, time.Minute))
	g.waitReady(t)
	url := g.url + "/streams/" + topic

	resp, body := request(t, url, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"error":"no session: log in"`) || !strings.Contains(body, `"reason":"auth_hook"`) {
		t.Fatalf("no session: %d %s", resp.StatusCode, body)
	}
	h := sessionHeader("c-alice")
	h.Set("Origin", g.url)
	resp, _ = request(t, url+"?from=earliest&key=k", h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alice: status %d", resp.StatusCode)
	}
	seen := s.last.Load()
	if seen.Cookie != "session=c-alice" || seen.Origin != g.url || seen.Body.Action != "stream" ||
		strings.Join(seen.Body.Topics, ",") != topic || seen.Body.Query != "from=earliest&key=k" || seen.Body.ClientIP != "127.0.0.1" {
		t.Errorf("the hook was sent %+v", seen)
	}

	s.set(func(s *sessionStore) { s.down = true })
	resp, body = request(t, url, sessionHeader("c-bob"))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"reason":"auth_hook_unavailable"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("hook down: %d %s", resp.StatusCode, body)
	}
	s.set(func(s *sessionStore) { s.down, s.delay = false, 2*time.Second })
	start := time.Now()
	resp, body = request(t, url, sessionHeader("c-carol"))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "auth-hook-timeout") {
		t.Fatalf("hook slow: %d %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("a slow hook held the request %v, past auth-hook-timeout (500ms)", took)
	}
	if v := metricValue(t, g, "ssegate_auth_hook_calls_total", `result="timeout"`); v != 1 {
		t.Errorf("timeouts counted: %v", v)
	}
}

// TestAuthHookScopeAndCache: the hook's scope narrows the stream as a token's would, and a second stream of
// the same session and topics is admitted from the cache, without a call.
func TestAuthHookScopeAndCache(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	s := newSessionStore(t)
	s.set(func(s *sessionStore) {
		s.users["c-alice"] = "alice"
		s.scope["alice"] = map[string]any{"topics": []string{topic}, "keys": []string{"alice"}}
	})
	g := startGateway(t, []string{topic}, withHook(s, time.Minute))
	g.waitReady(t)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Key: []byte("bob"), Value: []byte("b1")}, &kgo.Record{Key: []byte("alice"), Value: []byte("a1")})
	for i := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		c := connectWith(t, ctx, g.url+"/streams/"+topic+"?from=earliest", sessionHeaders("c-alice"))
		if ev := c.next(t); ev.Data != "a1" {
			t.Fatalf("stream %d: %+v, want alice's record only", i, ev)
		}
		cancel()
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("the hook was called %d times for two streams of one session, want 1", n)
	}
	if v := metricValue(t, g, "ssegate_auth_hook_cache_total", `result="hit"`); v != 1 {
		t.Errorf("cache hits %v, want 1", v)
	}
	resp, _ := request(t, g.url+"/streams/"+topic+"?key=bob", sessionHeader("c-alice"))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a key outside the hook's scope: status %d, want 403", resp.StatusCode)
	}
}

// TestAuthHookRevokedMidStream: a stream goes on past its answer's TTL while the session lives (the answer is
// asked again), ends with token-expired within the TTL of the session's revocation, is refused while revoked,
// and resumes exactly, with no gap and no duplicate, once allowed again.
func TestAuthHookRevokedMidStream(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	s := newSessionStore(t)
	s.set(func(s *sessionStore) { s.users["c-alice"] = "alice" })
	const ttl = 3 * time.Second
	g := startGateway(t, []string{topic}, withHook(s, ttl))
	g.waitReady(t)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := connectWith(t, ctx, g.url+"/streams/"+topic, sessionHeaders("c-alice"))
	seq := 0
	produce := func(n int) {
		for range n {
			kafkatest.Produce(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "r%d", seq)})
			seq++
		}
	}
	got := 0
	lastID := ""
	expect := func(n int) {
		for range n {
			ev := c.next(t)
			if ev.Data != fmt.Sprintf("r%d", got) {
				t.Fatalf("event %+v, want r%d", ev, got)
			}
			got++
			lastID = ev.ID
		}
	}
	// Twice the TTL with the session alive: the stream goes on.
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		produce(1)
		expect(1)
	}
	s.set(func(s *sessionStore) { delete(s.users, "c-alice") })
	revoked := time.Now()
	var ended sse.Event
	for {
		produce(1)
		ev := c.next(t)
		if ev.Type == "token-expired" {
			ended = ev
			break
		}
		if ev.Data != fmt.Sprintf("r%d", got) {
			t.Fatalf("event %+v, want r%d", ev, got)
		}
		got++
		lastID = ev.ID
		time.Sleep(200 * time.Millisecond)
	}
	if took := time.Since(revoked); took > ttl+time.Second {
		t.Errorf("the revoked session read on for %v, past the TTL (%v)", took, ttl)
	}
	if ended.ID != lastID {
		t.Errorf("token-expired id %s, want the client's position %s", ended.ID, lastID)
	}
	h := sessionHeader("c-alice")
	h.Set("Last-Event-ID", lastID)
	if resp, _ := request(t, g.url+"/streams/"+topic, h); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a revoked session's reconnect: status %d, want 401", resp.StatusCode)
	}
	s.set(func(s *sessionStore) { s.users["c-alice"] = "alice" })
	c = connectWith(t, ctx, g.url+"/streams/"+topic, sessionHeaders("c-alice", "Last-Event-ID", lastID))
	expect(seq - got) // every record since the position, once, in order
	produce(1)
	expect(1)
}
