package app

import (
	"fmt"
	"slices"
	"time"

	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/publish"
)

// PublishConfig is who may publish into which topic through the gateway (POST /topics/{topic}/records), and
// the bounds on it. Publishing is off unless Topics names a topic.
type PublishConfig struct {
	// Topics are the served topics open for publishing. Default none.
	Topics []string
	// Anonymous lets requests without a token publish into the topics whose auth mode is none or optional
	// (for demos). Default false: writing needs a token whose scope's publish covers the topic.
	Anonymous bool
	// MaxKeyBytes, MaxValueBytes and MaxHeaderBytes bound a record's key, value, and headers (names and values
	// together); MaxRecords the records of one request. Defaults 4KiB, 1MiB, 16KiB, 500.
	MaxKeyBytes, MaxValueBytes, MaxHeaderBytes int64
	MaxRecords                                 int
	// PendingBytes bounds, pod-wide, the bytes of records given to Kafka and not acknowledged yet; a record
	// waits at most QueueWait for room, then its request is answered 503. Defaults 16MiB and 2s.
	PendingBytes int64
	QueueWait    time.Duration
	// Timeout bounds a record's produce: one Kafka did not acknowledge by then fails (503). Default 10s.
	Timeout time.Duration
	// IdempotencyWindow is how long an idempotency key is remembered. Default 24h.
	IdempotencyWindow time.Duration
	// IdempotencyKeys bounds the keys remembered in the pod's memory when there is no Redis (redis-addr);
	// with Redis every key is remembered for the window, across pods and restarts. Default 100000.
	IdempotencyKeys int
	// IdempotencyPrefix starts the Redis keys of the idempotency entries. Default "ssegate:gateway:publish:".
	IdempotencyPrefix string
	// Rate bounds the records a second one token subject (or, without a token, one client address) may
	// publish through a pod, with bursts of Burst (0: the rate). Default 0: no bound.
	Rate, Burst int
	// MaxBodyBytes bounds a request's body. Default 0: 4MiB, or one record at its largest (its key, value and
	// headers in base64, with room for the JSON) when that is more; never more than every record at its
	// largest.
	MaxBodyBytes int64
	// MaxBodyReads bounds the request bodies read and parsed at once by a pod (a body takes about ten times its
	// size while it is parsed); one more is answered 503 at once. Default 8.
	MaxBodyReads int
	// BodyTimeout bounds the time a request's body takes to arrive; a later one is answered 408. Default 10s.
	BodyTimeout time.Duration
}

func publishDefaults() PublishConfig {
	return PublishConfig{
		MaxKeyBytes: 4 << 10, MaxValueBytes: 1 << 20, MaxHeaderBytes: 16 << 10, MaxRecords: 500,
		PendingBytes: 16 << 20, QueueWait: 2 * time.Second, Timeout: 10 * time.Second,
		IdempotencyWindow: 24 * time.Hour, IdempotencyKeys: 100000, IdempotencyPrefix: "ssegate:gateway:publish:",
		MaxBodyReads: 8, BodyTimeout: 10 * time.Second,
	}
}

func publishSettings(c *PublishConfig) []settings.Setting {
	return []settings.Setting{
		setting("publish-topics", "served topics clients may publish into (POST /topics/{topic}/records), comma-separated; default none: publishing is off", settings.List(&c.Topics)),
		setting("publish-anonymous", "let requests without a token publish into topics whose auth mode is none or optional (demos); else writing needs a token whose scope's publish names the topic", settings.Bool(&c.Anonymous)),
		setting("publish-max-key-bytes", "largest key of a published record (bytes, or with KiB/MiB)", settings.Bytes(&c.MaxKeyBytes)),
		setting("publish-max-value-bytes", "largest value of a published record (bytes, or with KiB/MiB); keep it under the topic's max.message.bytes", settings.Bytes(&c.MaxValueBytes)),
		setting("publish-max-header-bytes", "most bytes of a published record's header names and values together", settings.Bytes(&c.MaxHeaderBytes)),
		setting("publish-max-records", "most records in one publish request", settings.Int(&c.MaxRecords)),
		setting("publish-pending-bytes", "bound, pod-wide, on the bytes of published records Kafka has not acknowledged yet; more wait publish-queue-wait, then get 503", settings.Bytes(&c.PendingBytes)),
		setting("publish-queue-wait", "longest a published record waits for room under publish-pending-bytes before its request gets 503", settings.Duration(&c.QueueWait)),
		setting("publish-timeout", "longest Kafka may take to acknowledge a published record before its request gets 503", settings.Duration(&c.Timeout)),
		setting("publish-idempotency-window", "how long an Idempotency-Key is remembered: a repeat within it publishes nothing and answers the first record's place", settings.Duration(&c.IdempotencyWindow)),
		setting("publish-idempotency-keys", "most idempotency keys remembered in the pod's memory when there is no redis-addr (with Redis, all of them, across pods and restarts)", settings.Int(&c.IdempotencyKeys)),
		setting("publish-idempotency-prefix", "prefix of the Redis keys of idempotency entries", settings.String(&c.IdempotencyPrefix)),
		setting("publish-rate", "records a second one token subject (without a token, one client address) may publish through a pod; 0 means no bound", settings.Int(&c.Rate)),
		setting("publish-burst", "records publish-rate lets come at once; 0 means the rate. A request of more records than this is refused with 413: it could never pass", settings.Int(&c.Burst)),
		setting("publish-max-body-bytes", "largest publish request body (bytes, or with KiB/MiB); a larger one gets 413. 0 means 4MiB, or one record at its largest when that is more", settings.Bytes(&c.MaxBodyBytes)),
		setting("publish-max-body-reads", "most publish request bodies a pod reads and parses at once (each takes about ten times its size meanwhile); one more gets 503 with Retry-After", settings.Int(&c.MaxBodyReads)),
		setting("publish-body-timeout", "longest a publish request's body may take to arrive; a slower one gets 408", settings.Duration(&c.BodyTimeout)),
	}
}

// enabled says whether any topic is open for publishing.
func (c PublishConfig) enabled() bool { return len(c.Topics) > 0 }

// limits are the publish package's limits.
func (c PublishConfig) limits() publish.Limits {
	l := publish.DefaultLimits
	l.MaxKeyBytes, l.MaxValueBytes, l.MaxHeaderBytes = int(c.MaxKeyBytes), int(c.MaxValueBytes), int(c.MaxHeaderBytes)
	l.MaxRecords = c.MaxRecords
	return l
}

// maxBody bounds a publish request's body: MaxBodyBytes, or by default 4MiB, or one record at its largest (in
// base64, with room for the JSON) when that is more; never more than every record at its largest, nor 64MiB.
func (c PublishConfig) maxBody() int64 {
	per := (c.MaxKeyBytes+c.MaxValueBytes+c.MaxHeaderBytes)*4/3 + 1024
	body := c.MaxBodyBytes
	if body == 0 {
		body = max(4<<20, per)
	}
	return min(body, per*int64(c.MaxRecords), 64<<20)
}

func (c Config) validatePublish() error {
	p := c.Publish
	for _, t := range p.Topics {
		if !slices.Contains(c.Topics, t) {
			return fmt.Errorf("invalid setting publish-topics (SSEGATE_PUBLISH_TOPICS): %q is not one of the served topics (the answer's id is a position of its stream)", t)
		}
	}
	checks := []struct {
		name string
		bad  bool
		want string
	}{
		{"publish-max-key-bytes", p.MaxKeyBytes < 1 || p.MaxKeyBytes > 1<<20, "from 1 to 1MiB"},
		{"publish-max-value-bytes", p.MaxValueBytes < 1 || p.MaxValueBytes > 64<<20, "from 1 to 64MiB"},
		{"publish-max-header-bytes", p.MaxHeaderBytes < 0 || p.MaxHeaderBytes > 1<<20, "from 0 to 1MiB"},
		{"publish-max-records", p.MaxRecords < 1 || p.MaxRecords > 10000, "from 1 to 10000"},
		{"publish-pending-bytes", p.PendingBytes < 1<<20, "at least 1MiB"},
		{"publish-queue-wait", p.QueueWait < 0 || p.QueueWait > time.Minute, "from 0 to 1m"},
		{"publish-timeout", p.Timeout < time.Second || p.Timeout > 5*time.Minute, "from 1s to 5m"},
		{"publish-idempotency-window", p.IdempotencyWindow < time.Minute, "at least 1m"},
		{"publish-idempotency-keys", p.IdempotencyKeys < 1, "at least 1"},
		{"publish-idempotency-prefix", p.IdempotencyPrefix == "", "set"},
		{"publish-rate", p.Rate < 0, "zero or positive"},
		{"publish-burst", p.Burst < 0, "zero or positive"},
		{"publish-max-body-bytes", p.MaxBodyBytes != 0 && (p.MaxBodyBytes < 1<<10 || p.MaxBodyBytes > 64<<20), "0 (the default) or from 1KiB to 64MiB"},
		{"publish-max-body-reads", p.MaxBodyReads < 1 || p.MaxBodyReads > 10000, "from 1 to 10000"},
		{"publish-body-timeout", p.BodyTimeout < time.Second || p.BodyTimeout > 10*time.Minute, "from 1s to 10m"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("invalid setting %s (%s): must be %s", ch.name, settings.EnvName("SSEGATE_", ch.name), ch.want)
		}
	}
	return nil
}
