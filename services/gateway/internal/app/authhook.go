package app

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ssegate/ssegate/services/gateway/internal/auth"
	"github.com/ssegate/ssegate/services/gateway/internal/limit"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// The authorization hook (docs/security.md, "The authorization hook"): for a topic with a hook URL, the gateway
// asks the site's own service whether a request may read (or publish to) it, forwarding the request's cookie,
// Authorization and Origin headers. An answer allows the request with a scope (the form of a token's scope
// claim) and an expiry, or refuses it with a status the client gets as it is. Answers are cached per
// (credential, topic set, action) for at most the TTL, in a bounded LRU; a stream holds its answer's lease, and
// the renewer asks the hook again before the lease runs out, so that a long stream goes on while its session
// lives and ends (token-expired) within the TTL of a revoked one.

// Hook actions: what a request asks to do.
const (
	hookStream    = "stream"
	hookWebSocket = "websocket"
	hookPublish   = "publish"
)

// hookRequest is what the hook is sent (as JSON), and the headers forwarded with it.
type hookRequest struct {
	Action   string   `json:"action"`
	Topics   []string `json:"topics"`
	Path     string   `json:"path"`
	Query    string   `json:"query"`
	ClientIP string   `json:"client_ip"`
	Origin   string   `json:"origin,omitempty"`
	headers  http.Header
}

// hookAnswer is a hook's 200 answer.
type hookAnswer struct {
	Subject   string          `json:"subject"`
	Scope     json.RawMessage `json:"scope"`
	ExpiresIn *float64        `json:"expires_in"` // seconds
	ExpiresAt *time.Time      `json:"expires_at"`
}

// hookRefusal is a hook's refusal (its 401 or 403 passed on), or its failure to answer (503).
type hookRefusal struct {
	status int
	msg    string
}

func (e *hookRefusal) Error() string { return e.msg }

// httpError is how abort answers a refusal.
func (e *hookRefusal) httpError() *httpError {
	reason := "auth_hook"
	if e.status == http.StatusServiceUnavailable {
		reason = "auth_hook_unavailable"
	}
	return &httpError{status: e.status, msg: e.msg, reason: reason}
}

// hookLease is a cached allowing answer: its claims, and its Renewal, which every stream that holds it shares
// and the renewer moves on while the hook keeps allowing.
type hookLease struct {
	key     [32]byte
	url     string
	req     hookRequest
	claims  *auth.Claims
	scope   string // the answer's scope as it came, to tell a changed scope on renewal
	renewal *stream.Renewal
	// held counts the streams holding the lease; the renewer asks again only for held leases. renewing: a
	// renewal is under way; ended: the hook refused or changed it, it is renewed no more. Guarded by
	// authHook.mu.
	held     int
	renewing bool
	ended    bool
}

// authHook asks hooks, caches their answers and renews the held ones. Safe for concurrent use.
type authHook struct {
	cfg    HookConfig
	client *http.Client
	log    *slog.Logger
	stats  *hookStats
	now    func() time.Time

	cache *lru.Cache[[32]byte, *hookLease] // allowing answers by key
	mu    sync.Mutex
	held  map[*hookLease]struct{} // leases streams hold, which the renewer keeps asking
	calls map[[32]byte]*hookCall  // calls under way, shared by requests of the same key
}

// hookCall is one call under way; done closes when lease or err is set.
type hookCall struct {
	done  chan struct{}
	lease *hookLease
	err   error
}

func newAuthHook(cfg HookConfig, log *slog.Logger) *authHook {
	cache, _ := lru.New[[32]byte, *hookLease](cfg.CacheEntries) // only a size below 1 fails; validated
	return &authHook{
		cfg: cfg, log: log, stats: &hookStats{}, now: time.Now, cache: cache,
		client: &http.Client{Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is not an answer
		}},
		held: map[*hookLease]struct{}{}, calls: map[[32]byte]*hookCall{},
	}
}

// forwarded are the request headers the hook gets: what identifies the client's session.
var forwarded = []string{"Cookie", "Authorization", "Origin"}

// newHookRequest is what r asks of the hook for topics.
func newHookRequest(r *http.Request, action string, topics []string, clientIP string) hookRequest {
	h := http.Header{}
	for _, name := range forwarded {
		for _, v := range r.Header.Values(name) {
			h.Add(name, v)
		}
	}
	return hookRequest{
		Action: action, Topics: topics, Path: r.URL.Path, Query: r.URL.RawQuery,
		ClientIP: clientIP, Origin: r.Header.Get("Origin"), headers: h,
	}
}

// key is the cache key of req at url: the credential (the forwarded headers, hashed: no credential is kept in
// a key), the topics and the action. The query is not in it: an answer covers every query of the same
// credential and topics, and narrows them through its scope.
func (req hookRequest) key(url string) [32]byte {
	h := sha256.New()
	for _, part := range []string{url, req.Action, strings.Join(req.Topics, ",")} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	for _, name := range forwarded {
		for _, v := range req.headers.Values(name) {
			h.Write([]byte(name + ":" + v))
			h.Write([]byte{0})
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// admit returns the lease of an allowing answer for req at url: from the cache, from a call under way for the
// same key, or from a new call. A refusal or a failure is a *hookRefusal.
func (h *authHook) admit(ctx context.Context, url string, req hookRequest) (*hookLease, error) {
	k := req.key(url)
	if l, ok := h.cache.Get(k); ok && h.now().Before(l.renewal.Until()) {
		h.stats.cacheHits.Add(1)
		return l, nil
	}
	h.stats.cacheMisses.Add(1)
	h.mu.Lock()
	call, ok := h.calls[k]
	if !ok {
		call = &hookCall{done: make(chan struct{})}
		h.calls[k] = call
		go h.run(k, url, req, call) //nolint:gosec // detached from the request: its answer serves every request waiting for it
	}
	h.mu.Unlock()
	select {
	case <-call.done:
		return call.lease, call.err
	case <-ctx.Done():
		return nil, &hookRefusal{status: http.StatusServiceUnavailable, msg: "authorization hook: the request ended while it was asked"}
	}
}

// run makes a call and gives its outcome to everyone waiting for it; an allowing answer is cached.
func (h *authHook) run(k [32]byte, url string, req hookRequest, call *hookCall) {
	lease, err := h.ask(context.Background(), url, req)
	if err == nil {
		lease.key = k
		h.cache.Add(k, lease)
	}
	h.mu.Lock()
	delete(h.calls, k)
	h.mu.Unlock()
	call.lease, call.err = lease, err
	close(call.done)
}

// maxHookAnswer bounds the body of a hook's answer that is read.
const maxHookAnswer = 64 << 10

// ask calls the hook once and turns its answer into a lease, or a *hookRefusal.
func (h *authHook) ask(ctx context.Context, url string, req hookRequest) (*hookLease, error) {
	start := h.now()
	status, body, err := h.post(ctx, url, req)
	h.stats.observe(h.now().Sub(start))
	unavailable := func(why string, err error) error {
		h.stats.result(hookError)
		h.log.Warn("authorization hook failed", "url", url, "action", req.Action, "topics", req.Topics, "why", why, "err", err)
		return &hookRefusal{status: http.StatusServiceUnavailable, msg: "authorization hook unavailable: " + why}
	}
	switch {
	case err != nil:
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			h.stats.result(hookTimeout)
			return nil, &hookRefusal{status: http.StatusServiceUnavailable, msg: "authorization hook unavailable: no answer within auth-hook-timeout"}
		}
		return nil, unavailable("no answer", err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		h.stats.result(hookDenied)
		return nil, &hookRefusal{status: status, msg: refusalMessage(body)}
	case status != http.StatusOK:
		return nil, unavailable(fmt.Sprintf("status %d", status), nil)
	}
	lease, err := h.lease(url, req, body)
	if err != nil {
		return nil, unavailable("a malformed answer", err)
	}
	h.stats.result(hookAllowed)
	return lease, nil
}

// post sends req to url and returns the answer's status and (bounded) body.
func (h *authHook) post(ctx context.Context, url string, req hookRequest) (int, []byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	hr.Header = req.headers.Clone()
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("User-Agent", "ssegate")
	resp, err := h.client.Do(hr)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHookAnswer))
	return resp.StatusCode, body, err
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// refusalMessage is the "error" of a hook's refusal, or a plain one: at most 200 bytes, one line.
func refusalMessage(body []byte) string {
	var v struct {
		Error string `json:"error"`
	}
	msg := "refused by the authorization hook"
	if json.Unmarshal(body, &v) == nil && v.Error != "" {
		msg = strings.Join(strings.Fields(v.Error), " ")
		if len(msg) > 200 {
			msg = strings.ToValidUTF8(msg[:200], "")
		}
	}
	return msg
}

// lease turns an allowing answer's body into a lease: its scope (the topics asked for when it has none, to
// read, or to publish for a publish request), its subject, and its expiry, at most the TTL away.
func (h *authHook) lease(url string, req hookRequest, body []byte) (*hookLease, error) {
	var a hookAnswer
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &a); err != nil {
			return nil, err
		}
	}
	now := h.now()
	until := now.Add(h.cfg.TTL)
	if a.ExpiresIn != nil {
		until = minTime(until, now.Add(time.Duration(*a.ExpiresIn*float64(time.Second))))
	}
	if a.ExpiresAt != nil {
		until = minTime(until, *a.ExpiresAt)
	}
	if !until.After(now) {
		return nil, errors.New("the answer has expired already")
	}
	scope, err := hookScope(req, a.Scope)
	if err != nil {
		return nil, err
	}
	return &hookLease{
		url: url, req: req, scope: string(a.Scope),
		claims:  &auth.Claims{Subject: a.Subject, Expires: until, Scope: scope},
		renewal: stream.NewRenewal(until),
	}, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// hookScope parses an answer's scope; without one, the answer allows what was asked.
func hookScope(req hookRequest, raw json.RawMessage) (*auth.Scope, error) {
	if len(raw) == 0 || string(raw) == "null" {
		s := &auth.Scope{Topics: slices.Clone(req.Topics)}
		if req.Action == hookPublish {
			s.Publish = slices.Clone(req.Topics)
		}
		return s, nil
	}
	s, err := auth.ParseScope(raw)
	if err != nil {
		return nil, fmt.Errorf("scope: %w", err)
	}
	return s, nil
}

// hasHook says whether any served topic has an authorization hook.
func (c Config) hasHook() bool {
	for _, t := range c.Topics {
		if c.Auth.Hook.urlFor(t) != "" {
			return true
		}
	}
	return false
}

// admitHook admits topic through the hook at url: the request's topics that the same hook decides are asked
// about at once (one call, one cached answer for the set), and the answer's scope must allow topic.
func (g *gate) admitHook(cr *credential, url, topic string) (grant, error) {
	l, ok := cr.hooked[url]
	if !ok {
		var topics []string
		for _, t := range orElse(cr.topics, []string{topic}) {
			if g.hookCfg.urlFor(t) == url {
				topics = append(topics, t)
			}
		}
		slices.Sort(topics)
		topics = slices.Compact(topics)
		req := newHookRequest(cr.r, cmp.Or(cr.action, hookStream), topics, g.clientIP(cr.r))
		var err error
		if l, err = g.hook.admit(cr.r.Context(), url, req); err != nil {
			return grant{}, err
		}
		if cr.hooked == nil {
			cr.hooked = map[string]*hookLease{}
		}
		cr.hooked[url] = l
	}
	if cr.action != hookPublish && !l.claims.Scope.AllowsTopic(topic) {
		return grant{}, &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: "the authorization hook's scope does not name topic " + topic}
	}
	return grant{claims: l.claims, topic: topic, hook: l}, nil
}

// admitPublishHook admits a publish into topic through the hook at url: its scope's publish must name it.
func (g *gate) admitPublishHook(r *http.Request, url, topic string) (grant, error) {
	gr, err := g.admitHook(&credential{r: r, action: hookPublish, topics: []string{topic}}, url, topic)
	if err != nil {
		return grant{}, err
	}
	if !gr.claims.Scope.AllowsPublish(topic) {
		return grant{}, &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: "publish " + topic}
	}
	return gr, nil
}

// clientIP is the request's client address as the limits see it, for the hook's client_ip.
func (g *gate) clientIP(r *http.Request) string {
	return limit.ClientIP(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), g.trusted).String()
}

// holdHooks holds the hook answers of grants for the life of a stream, so that the renewer keeps them up;
// the function it returns lets them go (once).
func (g *gate) holdHooks(grants []grant) func() {
	var held []*hookLease
	for _, gr := range grants {
		if gr.hook != nil && !slices.Contains(held, gr.hook) {
			g.hook.hold(gr.hook)
			held = append(held, gr.hook)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, l := range held {
				g.hook.release(l)
			}
		})
	}
}

// orElse returns a, or b when a is empty.
func orElse[T any](a, b []T) []T {
	if len(a) > 0 {
		return a
	}
	return b
}
