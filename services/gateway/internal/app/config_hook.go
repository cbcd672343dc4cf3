package app

import (
	"fmt"
	"time"

	"github.com/ssegate/ssegate/pkg/settings"
)

// HookConfig is the authorization hook: an HTTP service of the site's own (its session store) that the gateway
// asks whether a request may read (or publish to) a topic, for sites whose browsers carry a session cookie
// rather than a JWT. docs/security.md ("The authorization hook") says what it is sent and what it answers.
type HookConfig struct {
	// URL is the hook asked for every topic without its own TopicURLs entry. Default none: no hook.
	URL string
	// TopicURLs maps served topics to their own hook, overriding URL. Default none.
	TopicURLs map[string]string
	// Timeout bounds one call; no answer in time refuses the request (503). Default 2s.
	Timeout time.Duration
	// TTL is the longest an answer is trusted: kept in the cache, and how long a stream runs before the hook is
	// asked again (earlier when the answer says it expires sooner). Default 1m.
	TTL time.Duration
	// CacheEntries bounds the answers kept. Default 10000.
	CacheEntries int
}

func hookDefaults() HookConfig {
	return HookConfig{Timeout: 2 * time.Second, TTL: time.Minute, CacheEntries: 10000}
}

func hookSettings(h *HookConfig) []settings.Setting {
	return []settings.Setting{
		setting("auth-url", "authorization hook asked for each new stream, WebSocket and publish of every topic (its answer allows, refuses or scopes the request); default none", settings.String(&h.URL)),
		setting("topic-auth-url", "per-topic authorization hooks overriding auth-url, comma-separated topic=URL pairs", settings.Map(&h.TopicURLs)),
		setting("auth-hook-timeout", "longest one call of the authorization hook may take; no answer in time refuses the request (503)", settings.Duration(&h.Timeout)),
		setting("auth-hook-ttl", "longest an authorization hook's answer is trusted: cached that long, and a stream asks again before it runs out", settings.Duration(&h.TTL)),
		setting("auth-hook-cache-entries", "authorization hook answers kept, at most", settings.Int(&h.CacheEntries)),
	}
}

// urlFor returns the hook of topic, "" for none.
func (h HookConfig) urlFor(topic string) string {
	if u, ok := h.TopicURLs[topic]; ok {
		return u
	}
	return h.URL
}

// validateHook checks the hook's settings.
func (c Config) validateHook() error {
	h := c.Auth.Hook
	if h.URL != "" {
		if err := httpURL(h.URL); err != nil {
			return badSetting("auth-url", "%v", err)
		}
	}
	if err := c.perTopic(h.TopicURLs, func(topic, u string) error {
		if u == "" {
			return nil // an empty URL takes the topic out of auth-url's hook
		}
		if err := httpURL(u); err != nil {
			return fmt.Errorf("topic %s: %w", topic, err)
		}
		return nil
	}); err != nil {
		return badSetting("topic-auth-url", "%v", err)
	}
	switch {
	case h.Timeout < 10*time.Millisecond || h.Timeout > 30*time.Second:
		return badSetting("auth-hook-timeout", "must be from 10ms to 30s")
	case h.TTL < time.Second || h.TTL > 24*time.Hour:
		return badSetting("auth-hook-ttl", "must be from 1s to 24h")
	case h.CacheEntries < 1:
		return badSetting("auth-hook-cache-entries", "must be at least 1")
	}
	return nil
}
