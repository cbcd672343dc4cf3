package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/services/gateway/internal/limit"
)

// newLimiter builds the stream limiter from the configuration, with its Redis store when the limits per
// address or subject are shared. It does not contact Redis. The caller closes the limiter, then the client.
func newLimiter(c LimitConfig, log *slog.Logger) (*limit.Limiter, *limit.Redis, *redis.Client, error) {
	log = log.With("component", "limit")
	opts := []limit.Option{
		limit.WithMaxStreams(c.MaxStreams),
		limit.WithRate(float64(c.StreamRate), c.StreamBurst),
		limit.WithMaxPerIP(c.MaxPerIP),
		limit.WithMaxPerSubject(c.MaxPerSubject),
		limit.WithFailOpen(c.QuotaFailure == "open"),
		limit.WithStoreTimeout(c.QuotaTimeout),
		limit.WithLimiterLogger(log),
	}
	var store *limit.Redis
	var rdb *redis.Client
	if c.shared() {
		rdb = redis.NewClient(&redis.Options{
			Addr: c.Redis.Addr, CredentialsProviderContext: c.Redis.Credentials(), DB: c.Redis.DB,
			// Admission waits for Redis at most quota-timeout; the client must honor the deadline.
			ContextTimeoutEnabled: true,
		})
		var err error
		store, err = limit.NewRedis(rdb, limit.WithExpiry(c.QuotaExpiry), limit.WithPrefix(c.QuotaKeyPrefix),
			limit.WithTimeout(c.QuotaTimeout), limit.WithLogger(log))
		if err != nil {
			_ = rdb.Close()
			return nil, nil, nil, err
		}
		opts = append(opts, limit.WithStore(store))
	}
	l, err := limit.New(opts...)
	if err != nil {
		if store != nil {
			_ = store.Close()
			_ = rdb.Close()
		}
		return nil, nil, nil, err
	}
	return l, store, rdb, nil
}

// admit decides whether the stream request may start, by its client address (behind trusted proxies) and
// its token subject. The lease it returns must be released when the stream ends.
func (a *App) admit(c *gin.Context, subject string) (*limit.Lease, error) {
	r := c.Request
	ip := limit.ClientIP(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), a.trusted)
	return a.limits.Admit(r.Context(), ip, subject)
}

// registerLimitMetrics adds the limiter's instruments to the telemetry: refused streams by kind (on the one
// refused counter, see refusedCounter), quota store errors by operation, and streams admitted on this pod's
// counts alone while Redis could not answer.
func (t *telemetry) registerLimitMetrics(l *limit.Limiter, store *limit.Redis) error {
	m := t.provider.Meter("github.com/ssegate/ssegate/services/gateway")
	refused, err1 := t.refusedCounter()
	storeErrors, err2 := m.Int64ObservableCounter("ssegate.quota.store.errors",
		metric.WithDescription("Failed calls to the quota store (Redis), by operation"))
	failOpen, err3 := m.Int64ObservableCounter("ssegate.quota.fail_open",
		metric.WithDescription("Streams admitted on this pod's own counts because the quota store could not answer"))
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	kinds := limit.Kinds()
	kindAttrs := make([]metric.MeasurementOption, len(kinds))
	for i, k := range kinds {
		kindAttrs[i] = metric.WithAttributes(attribute.String("reason", "limit"), attribute.String("kind", k.String()))
	}
	ops := limit.Ops()
	opAttrs := make([]metric.MeasurementOption, len(ops))
	for i, op := range ops {
		opAttrs[i] = metric.WithAttributes(attribute.String("op", op.String()))
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, k := range kinds {
			o.ObserveInt64(refused, l.Stats.Refused[k].Load(), kindAttrs[i])
		}
		for i, op := range ops {
			var n int64
			if store != nil {
				n = store.Stats.Errors[op].Load()
			}
			o.ObserveInt64(storeErrors, n, opAttrs[i])
		}
		o.ObserveInt64(failOpen, l.Stats.FailedOpen.Load())
		return nil
	}, refused, storeErrors, failOpen)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
