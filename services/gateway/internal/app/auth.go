package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/auth"
	"github.com/ssegate/ssegate/services/gateway/internal/limit"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// realm is the realm of the gateway's WWW-Authenticate challenges.
const realm = "ssegate"

// gate decides who may read which topic: the topic's auth mode, the request's token, and what the token's
// scope allows. It is immutable once built, and safe for concurrent use.
type gate struct {
	verifier *auth.Verifier // nil when no topic looks at tokens
	hook     *authHook      // nil when no topic has an authorization hook
	hookCfg  HookConfig
	trusted  []netip.Prefix // proxies whose X-Forwarded-For names the client (the hook's client_ip)
	modes    map[string]auth.Mode
	extract  auth.Extractor
	leeway   time.Duration
	notice   time.Duration
}

func newGate(cfg Config, log *slog.Logger) (*gate, error) {
	modes, err := cfg.authModes()
	if err != nil {
		return nil, err
	}
	g := &gate{
		hookCfg: cfg.Auth.Hook,
		modes:   modes,
		extract: auth.Extractor{Cookie: cfg.Auth.Cookie, Query: cfg.Auth.QueryToken},
		leeway:  cfg.Auth.Leeway,
		notice:  cfg.Auth.ExpiryNotice,
	}
	if g.trusted, err = limit.ParseTrusted(cfg.Limits.TrustedProxies); err != nil {
		return nil, err
	}
	if cfg.hasHook() {
		g.hook = newAuthHook(cfg.Auth.Hook, log.With("component", "auth-hook"))
	}
	if !cfg.needsTokens() {
		if cfg.Auth.hasKeySource() {
			log.Warn("auth keys are configured but every topic has auth none: no token is looked at")
		}
		return g, nil
	}
	g.verifier, err = auth.New(auth.Config{
		Algorithms:     cfg.Auth.Algorithms,
		KeyFile:        cfg.Auth.KeyFile,
		HMACSecretFile: cfg.Auth.HMACSecretFile,
		JWKSURL:        cfg.Auth.JWKSURL,
		JWKSFile:       cfg.Auth.JWKSFile,
		Issuer:         cfg.Auth.Issuer,
		Audience:       cfg.Auth.Audience,
		Leeway:         cfg.Auth.Leeway,
		Refresh:        cfg.Auth.KeyRefresh,
		Claim:          cfg.Auth.Claim,
		Logger:         log.With("component", "auth"),
	})
	return g, err
}

// run refreshes the keys, and renews the authorization hook's held answers, until ctx ends.
func (g *gate) run(ctx context.Context) {
	var wg sync.WaitGroup
	if g.hook != nil {
		wg.Go(func() { g.hook.renewLoop(ctx) })
	}
	if g.verifier != nil {
		g.verifier.Run(ctx)
	}
	wg.Wait()
}

// grant is what a request may read of a topic: nil claims for an anonymous reader (a public topic).
type grant struct {
	claims *auth.Claims
	topic  string     // the topic the grant is for: the scope's per-topic entries that match it apply
	hook   *hookLease // the authorization hook's answer the claims come from; nil for a token's
}

// credential is a stream request's token, read and verified once however many topics the request names, and
// the authorization hook's answers, asked once per hook for every topic of the request it decides.
type credential struct {
	r      *http.Request
	read   bool
	tok    string
	claims *auth.Claims
	err    error
	// action and topics are what the request asks of an authorization hook (hookStream when empty; the topic
	// admitted when none); hooked its answers by hook URL.
	action string
	topics []string
	hooked map[string]*hookLease
}

// token returns the request's token ("" for none) and its claims, reading and verifying it on first use.
func (g *gate) token(cr *credential) (string, *auth.Claims, error) {
	if !cr.read {
		cr.read = true
		cr.tok, cr.err = g.extract.Token(cr.r)
		if cr.err == nil && cr.tok != "" {
			cr.claims, cr.err = g.verifier.Verify(cr.r.Context(), cr.tok)
		}
	}
	return cr.tok, cr.claims, cr.err
}

// admit checks the request's token (cr) against topic's mode. A refusal is an *auth.Error: 401 for a missing
// or bad token, 403 when the token does not allow the topic, 400 for a request with tokens in two places.
//
// On an optional topic, a request without a token, or with a valid token whose scope does not name the topic,
// reads it anonymously: a token never makes a public topic unreadable. A token that fails verification is
// refused even there, so that a client learns its token needs renewing instead of silently getting another
// view.
func (g *gate) admit(cr *credential, topic string) (grant, error) {
	if url := g.hookCfg.urlFor(topic); url != "" && g.hook != nil {
		return g.admitHook(cr, url, topic)
	}
	mode := g.modes[topic]
	if mode == auth.ModeNone {
		return grant{}, nil
	}
	tok, claims, err := g.token(cr)
	if err != nil {
		return grant{}, err
	}
	if tok == "" {
		if mode == auth.ModeOptional {
			return grant{}, nil
		}
		return grant{}, &auth.Error{Reason: auth.ReasonMissing}
	}
	if !claims.Scope.AllowsTopic(topic) {
		if mode == auth.ModeOptional {
			return grant{}, nil
		}
		return grant{}, &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: "topic " + topic}
	}
	return grant{claims: claims, topic: topic}, nil
}

// apply narrows a stream's parameters to the grant: the scope's keys and events, and the token's expiry (exp
// plus the leeway: the moment the gateway stops accepting the token).
func (gr grant) apply(g *gate, p *stream.Params) error {
	if gr.claims == nil {
		return nil
	}
	if err := gr.narrow(p); err != nil {
		return err
	}
	if gr.hook != nil {
		// The hook's answer ends when it says, without leeway or notice (the session is the site's to renew);
		// the renewer moves it on while the hook keeps allowing.
		p.Expires, p.Renewal = gr.hook.renewal.Until(), gr.hook.renewal
		return nil
	}
	p.Expires = gr.claims.Expires.Add(g.leeway)
	p.ExpiryNotice = g.notice
	return nil
}

// narrow narrows a stream's parameters to the grant's scope: its keys, events and filters.
func (gr grant) narrow(p *stream.Params) error {
	keys, events, filters := gr.claims.Scope.ForTopic(gr.topic)
	if err := p.Narrow(keys, events); err != nil {
		var se *stream.ScopeError
		detail := "the query asks for nothing the token allows"
		if errors.As(err, &se) {
			detail = "query parameter " + se.Param + ": none of its values is allowed by the token"
		}
		return &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: detail, Err: err}
	}
	for _, f := range filters {
		if err := p.NarrowFilter(f); err != nil {
			return &auth.Error{Reason: auth.ReasonBadClaim, Detail: "the token's filter: " + err.Error(), Err: err}
		}
	}
	return nil
}

// refusals counts the streams refused before they start, per topic and reason (the auth reasons, "origin"
// and "host"). The maps are built once; only the counters change.
type refusals map[string]map[string]*atomic.Int64

// refusalReasons are the reason labels of ssegate_streams_refused_total.
func refusalReasons() []string {
	var out []string
	for _, r := range auth.Reasons() {
		out = append(out, r.String())
	}
	return append(out, reasonOrigin, reasonHost)
}

// reasonOrigin is the reason of a request refused for its Origin.
const reasonOrigin = "origin"

func newRefusals(topics []string) refusals {
	rs := refusals{}
	for _, t := range topics {
		rs[t] = map[string]*atomic.Int64{}
		for _, r := range refusalReasons() {
			rs[t][r] = new(atomic.Int64)
		}
	}
	return rs
}

// add counts a refusal of a served topic; other topics (404s) are not counted, their names are the client's.
func (rs refusals) add(topic, reason string) {
	if n := rs[topic][reason]; n != nil {
		n.Add(1)
	}
}

// subject is the token's subject, "" for an anonymous request (or a token without sub). The limits count
// streams per subject by it (max-streams-per-subject); anonymous streams are counted per address only.
func (gr grant) subject() string {
	if gr.claims == nil {
		return ""
	}
	return gr.claims.Subject
}
