package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// connect opens one connection. It returns the response of a usable stream (200, text/event-stream), or
// nil and the outcome saying why there is none.
func (s *Source) connect(ctx context.Context, lastID string) (*http.Response, outcome) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.spec.URL, http.NoBody)
	if err != nil {
		return nil, outcome{reason: ReasonConnectError, err: err}
	}
	for k, vs := range s.spec.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "text/event-stream")
	}
	req.Header.Set("Cache-Control", "no-cache")
	// Unlike a browser, ingest sends Last-Event-ID on its first request too: the id comes from the
	// checkpoint (or the source's start setting), and an empty id is never sent.
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	switch s.spec.Auth.Kind {
	case AuthBasic, AuthBearer:
		secret, err := s.spec.Auth.Secret.Get()
		if err != nil {
			return nil, outcome{reason: ReasonConnectError, err: fmt.Errorf("reading the auth secret: %w", err)}
		}
		if s.spec.Auth.Kind == AuthBasic {
			req.SetBasicAuth(s.spec.Auth.Username, secret)
		} else {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
	}
	injectTrace(ctx, req)
	s.stats.Connects.Add(1)
	resp, err := s.client.Do(req)
	if err != nil {
		var redirect *RedirectError
		switch {
		case ctx.Err() != nil:
			return nil, outcome{reason: ReasonShutdown}
		case errors.As(err, &redirect):
			// The error alone: the *url.Error around it names the URL with its query.
			return nil, outcome{reason: ReasonRedirect, err: redirect}
		}
		return nil, outcome{reason: ReasonConnectError, err: err}
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	if resp.StatusCode == http.StatusOK {
		mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if err == nil && mt == "text/event-stream" {
			return resp, outcome{}
		}
		discard(resp)
		return nil, outcome{
			reason: ReasonContentType,
			err:    fmt.Errorf("content type %q is not text/event-stream", resp.Header.Get("Content-Type")),
		}
	}
	discard(resp)
	o := outcome{err: fmt.Errorf("HTTP status %s", resp.Status)}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		o.reason, o.err = ReasonNoContent, ErrNoContent
	case resp.StatusCode == http.StatusTooManyRequests:
		o.reason, o.retryAfter = ReasonThrottled, retryAfter(resp.Header.Get("Retry-After"), time.Now())
	case resp.StatusCode >= 500:
		o.reason, o.retryAfter = ReasonServerError, retryAfter(resp.Header.Get("Retry-After"), time.Now())
	default:
		o.reason = ReasonBadStatus
	}
	return nil, o
}

// discard reads a little of a body that is not a stream, so the connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}

// retryAfter parses a Retry-After value (seconds or an HTTP date); zero means none.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff computes reconnection delays: the server's retry: value (or the minimum) doubled per failure
// in a row, capped, plus up to a quarter more as jitter so that many sources do not reconnect in step.
// A capped delay is never below the server's retry: value.
//
// "retry: 0" is a valid reconnection time: the first reconnection after it is immediate. Doubling zero
// would keep it zero, so further failures in a row back off from the minimum instead (0, min, 2*min, ...):
// a server that asks for 0 ms and then keeps failing is not hammered.
type backoff struct {
	min, max time.Duration
	retry    time.Duration // the last retry: value the server sent, valid when hasRetry
	hasRetry bool
	failures int
}

func (b *backoff) next() time.Duration {
	base := b.min
	if b.hasRetry {
		base = b.retry
	}
	limit := max(b.max, base)
	d, doublings := base, b.failures
	b.failures++
	if d == 0 {
		if doublings == 0 {
			return 0
		}
		d, doublings = b.min, doublings-1
	}
	for i := 0; i < doublings && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d + rand.N(d/4+1) //nolint:gosec // jitter needs no cryptographic randomness
}

func (b *backoff) reset() { b.failures = 0 }

// delay returns how long to wait before reconnecting after the connection that ended with o: the next
// backoff, and at least backoff-max after a failure that is not transient (a status or content type that
// is not a stream, a refused redirect: the upstream or the source's settings have to change), or at least
// the Retry-After of a 5xx or 429.
func (b *backoff) delay(o outcome) time.Duration {
	d := b.next()
	switch o.reason {
	case ReasonContentType, ReasonBadStatus, ReasonRedirect:
		// Not a transient failure: retried, but slowly, and loudly.
		d = max(d, b.max)
	case ReasonServerError, ReasonThrottled:
		d = max(d, o.retryAfter)
	}
	return d
}

// sleep waits d or until ctx ends, and reports whether the whole d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// idleReader ends a connection that delivers no bytes for idle. Only time spent inside Read counts, so a
// stream that is not read because Kafka is slow (backpressure) is not mistaken for an idle one.
type idleReader struct {
	r     io.Reader
	idle  time.Duration
	t     *time.Timer
	fired atomic.Bool
	bytes *atomic.Int64
}

// newIdleReader returns a reader of r that calls cancel after idle without bytes; zero idle means never.
// Call stop when done with it.
func newIdleReader(r io.Reader, idle time.Duration, bytes *atomic.Int64, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, idle: idle, bytes: bytes}
	if idle > 0 {
		ir.t = time.AfterFunc(time.Hour, func() {
			ir.fired.Store(true)
			cancel()
		})
		ir.t.Stop()
	}
	return ir
}

func (r *idleReader) Read(p []byte) (int, error) {
	if r.t != nil {
		r.t.Reset(r.idle)
	}
	n, err := r.r.Read(p)
	if r.t != nil {
		r.t.Stop()
	}
	r.bytes.Add(int64(n))
	if err != nil && r.fired.Load() {
		return n, errIdle
	}
	return n, err
}

func (r *idleReader) stop() {
	if r.t != nil {
		r.t.Stop()
	}
}
