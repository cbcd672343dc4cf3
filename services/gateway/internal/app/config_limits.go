package app

import (
	"fmt"
	"net"
	"time"

	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/limit"
)

// LimitConfig are the limits on streams (see docs/security.md, "Limits and quotas"). A stream beyond a limit
// is refused before it starts: 429 with Retry-After.
type LimitConfig struct {
	// MaxStreams bounds the streams open at once on this pod. Default 0: no bound.
	MaxStreams int
	// StreamRate bounds the new streams per second on this pod. Default 0: no bound.
	StreamRate int
	// StreamBurst is how many new streams may come at once within StreamRate. Default 0: StreamRate.
	StreamBurst int
	// MaxPerIP bounds the streams of one client address (an IPv6 /64): cluster-wide with Redis, else on this
	// pod. Default 0: no bound.
	MaxPerIP int
	// MaxPerSubject bounds the streams of one token subject, likewise; anonymous streams are not counted.
	// Default 0: no bound.
	MaxPerSubject int
	// MaxTopicsPerStream bounds the topics of one stream (/streams/orders,payments): each is a stream of its
	// own inside it, with its goroutine and its Kafka reads. Default 10.
	MaxTopicsPerStream int
	// TrustedProxies are the address ranges (CIDR, or single addresses) of the proxies in front of the
	// gateway, whose X-Forwarded-For is believed. Default none: the peer's address is the client's.
	TrustedProxies []string
	// Redis is where the streams per address and per subject are counted for the whole cluster. Zero (no
	// address) counts them per pod.
	Redis RedisConfig
	// QuotaKeyPrefix starts the Redis keys of the counts. Default "ssegate:gateway:quota:".
	QuotaKeyPrefix string
	// QuotaExpiry is how long a pod's counts outlive it in Redis: the slots of a pod that dies are free
	// again within it. Default 30s; at least 1s.
	QuotaExpiry time.Duration
	// QuotaTimeout bounds each Redis call; a new stream waits for Redis at most this long. Default 1s.
	QuotaTimeout time.Duration
	// QuotaFailure is what happens to a new stream when Redis cannot answer: "open" admits it if this pod's
	// own counts allow it (logged and metered), "closed" refuses it (503). Default open.
	QuotaFailure string
}

// RedisConfig is how to reach Redis (shared with ingest: pkg/settings).
type RedisConfig = settings.Redis

func limitDefaults() LimitConfig {
	return LimitConfig{
		MaxTopicsPerStream: 10,
		QuotaKeyPrefix:     limit.DefaultPrefix,
		QuotaExpiry:        limit.DefaultExpiry,
		QuotaTimeout:       limit.DefaultTimeout,
		QuotaFailure:       "open",
	}
}

func limitSettings(c *LimitConfig) []settings.Setting {
	ss := []settings.Setting{
		setting("max-streams", "most streams open at once on this pod; 0 means no limit", settings.Int(&c.MaxStreams)),
		setting("stream-rate", "most new streams per second on this pod; 0 means no limit", settings.Int(&c.StreamRate)),
		setting("stream-burst", "new streams that may come at once within stream-rate; 0 means stream-rate", settings.Int(&c.StreamBurst)),
		setting("max-streams-per-ip", "most streams of one client address (IPv6: a /64), cluster-wide with redis-addr; 0 means no limit", settings.Int(&c.MaxPerIP)),
		setting("max-streams-per-subject", "most streams of one token subject, cluster-wide with redis-addr; 0 means no limit", settings.Int(&c.MaxPerSubject)),
		setting("max-topics-per-stream", "most topics in one stream (/streams/a,b)", settings.Int(&c.MaxTopicsPerStream)),
		setting("trusted-proxies", "address ranges (CIDR) of proxies whose X-Forwarded-For is believed, comma-separated", settings.List(&c.TrustedProxies)),
	}
	ss = append(ss, settings.RedisSettings(&c.Redis, "SSEGATE_",
		"Redis host:port where streams per address and subject are counted cluster-wide; empty counts them per pod")...)
	return append(ss,
		setting("quota-key-prefix", "prefix of the Redis keys of the counts", settings.String(&c.QuotaKeyPrefix)),
		setting("quota-expiry", "how long a pod's counts outlive it in Redis (a dead pod's slots are free within it)", settings.Duration(&c.QuotaExpiry)),
		setting("quota-timeout", "longest a new stream waits for Redis", settings.Duration(&c.QuotaTimeout)),
		setting("quota-failure", "when Redis cannot answer: open (this pod's own counts decide) or closed (refuse with 503)", settings.String(&c.QuotaFailure)),
	)
}

// validate checks the limits. Its error names the setting at fault.
func (c LimitConfig) validate() error {
	if _, err := limit.ParseTrusted(c.TrustedProxies); err != nil {
		return fmt.Errorf("invalid setting trusted-proxies (SSEGATE_TRUSTED_PROXIES): %w", err)
	}
	if c.Redis.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Redis.Addr); err != nil {
			return fmt.Errorf("invalid setting redis-addr (REDIS_ADDR or SSEGATE_REDIS_ADDR): %q: want host:port", c.Redis.Addr)
		}
	}
	checks := []struct {
		name string
		bad  bool
		want string
	}{
		{"max-streams", c.MaxStreams < 0, "zero (no limit) or positive"},
		{"stream-rate", c.StreamRate < 0, "zero (no limit) or positive"},
		{"stream-burst", c.StreamBurst < 0, "zero (the rate) or positive"},
		{"max-streams-per-ip", c.MaxPerIP < 0, "zero (no limit) or positive"},
		{"max-streams-per-subject", c.MaxPerSubject < 0, "zero (no limit) or positive"},
		{"max-topics-per-stream", c.MaxTopicsPerStream < 1, "at least 1"},
		{"redis-db", c.Redis.DB < 0, "zero or positive"},
		{"quota-key-prefix", c.QuotaKeyPrefix == "", "non-empty"},
		{"quota-expiry", c.QuotaExpiry < time.Second, "at least 1s"},
		{"quota-timeout", c.QuotaTimeout < time.Millisecond || c.QuotaTimeout >= c.QuotaExpiry/3, "at least 1ms and less than a third of quota-expiry"},
		{"quota-failure", c.QuotaFailure != "open" && c.QuotaFailure != "closed", "open or closed"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("invalid setting %s (%s): must be %s", ch.name, settings.EnvName("SSEGATE_", ch.name), ch.want)
		}
	}
	return nil
}

// shared says whether streams per identity are counted in Redis: a Redis is set and a limit needs it.
func (c LimitConfig) shared() bool {
	return c.Redis.Addr != "" && (c.MaxPerIP > 0 || c.MaxPerSubject > 0)
}
