package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ssegate/ssegate/services/gateway/internal/auth"
	"github.com/ssegate/ssegate/services/gateway/internal/limit"
	"github.com/ssegate/ssegate/services/gateway/internal/publish"
)

// Publishing: POST /topics/{topic}/records produces the body's records into the topic with an idempotent
// producer, and answers once Kafka acknowledged them, with each record's partition, offset and the id a stream
// resumes from to start right after it (docs/gateway.md, Publishing).

// publisher is the gateway's publishing side: nil when no topic is open for it.
type publisher struct {
	*publish.Publisher
	producer *kgo.Client
	rdb      *redis.Client // the idempotency store's client when the limits have none to share; nil otherwise
	rates    *limit.Rates  // nil: no rate
	bodies   chan struct{} // a place for each body read and parsed at once (publish-max-body-reads)
	open     map[string]bool
	stats    map[string]*publishStats
	tracer   trace.Tracer
	duration metric.Float64Histogram // nil until the metrics are registered
}

// publishStats count a topic's published records by result.
type publishStats struct {
	results [numPublishResults]atomic.Int64
}

// Results of a published record, the result label of ssegate_publish_records_total.
const (
	resultPublished = iota // produced and acknowledged
	resultDuplicate        // an idempotency key seen before: nothing produced, the first record answered
	resultRejected         // bad input: 4xx, nothing produced
	resultRefused          // no token, a token or scope that does not allow it, a rate
	resultBusy             // 503: too much waits for Kafka, or the key's first request is still publishing
	resultFailed           // Kafka or the idempotency store failed: 503
	numPublishResults
)

var publishResultNames = [numPublishResults]string{"published", "duplicate", "rejected", "refused", "busy", "failed"}

// producerSettle is how much longer than a produce may take a claim on an idempotency key is held (for the
// store's round trips).
const producerSettle = 2 * time.Second

// newPublisher makes the publishing side when a topic is open for it: its producer, its idempotency store
// (Redis with redis-addr, else memory) and rates.
func (a *App) newPublisher(kopts []kgo.Opt, tracer trace.Tracer) error {
	pc := a.cfg.Publish
	if !pc.enabled() {
		return nil
	}
	cl, err := kgo.NewClient(append(kopts,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(pc.Timeout),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return fmt.Errorf("publish: kafka client: %w", err)
	}
	p := &publisher{producer: cl, open: map[string]bool{}, stats: map[string]*publishStats{}, tracer: tracer, bodies: make(chan struct{}, pc.MaxBodyReads)}
	a.publisher = p
	var store publish.Store = publish.NewMemoryStore(pc.IdempotencyKeys, pc.IdempotencyWindow)
	if r := a.cfg.Limits.Redis; r.Addr != "" {
		rdb := a.rdb
		if rdb == nil {
			p.rdb = redis.NewClient(&redis.Options{Addr: r.Addr, CredentialsProviderContext: r.Credentials(), DB: r.DB, ContextTimeoutEnabled: true})
			rdb = p.rdb
		}
		store = publish.NewRedisStore(rdb, pc.IdempotencyPrefix, pc.IdempotencyWindow)
	} else {
		a.log.Warn("publish: no redis-addr: idempotency keys are remembered by each pod alone, and not across its restarts")
	}
	owner, _ := os.Hostname()
	p.Publisher = publish.New(publish.Config{
		Producer:         kafkaProducer{cl},
		Log:              a.replayLog,
		Store:            store,
		Partitions:       func(topic string) []int32 { return a.streamTopics[topic].Partitions() },
		Start:            func(topic string, part int32) int64 { return a.nextOffset(topic, part) },
		MaxPendingBytes:  pc.PendingBytes,
		QueueWait:        pc.QueueWait,
		Lease:            pc.claimLease(),
		Owner:            owner,
		KeysAnyPartition: a.cfg.KeyPartitioner == "any",
		Logger:           a.log.With("component", "publish"),
	})
	p.rates = limit.NewRates(float64(pc.Rate), pc.Burst, 100000)
	for _, t := range pc.Topics {
		p.open[t] = true
		p.stats[t] = &publishStats{}
	}
	return nil
}

// nextOffset is the offset after the last record of partition the pod has read (or knew at start).
func (a *App) nextOffset(topic string, partition int32) int64 {
	if o, ok := a.streamTopics[topic].Position().Offset(partition); ok {
		return o + 1
	}
	return 0
}

// close closes the producer and the store's own Redis client.
func (p *publisher) close() {
	if p == nil {
		return
	}
	p.producer.Close()
	if p.rdb != nil {
		_ = p.rdb.Close()
	}
}

// kafkaProducer produces through a franz-go client, synchronously.
type kafkaProducer struct{ cl *kgo.Client }

func (k kafkaProducer) Produce(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	// The client leaving must not cut a produce short: its result is what a retry will be answered.
	k.cl.Produce(context.WithoutCancel(ctx), r, done)
}

// handlePublish answers POST /topics/{topic}/records.
func (a *App) handlePublish(c *gin.Context) {
	name := c.Param("topic")
	p := a.publisher
	if p == nil || !p.open[name] {
		if a.feed.Topic(name) == nil {
			abort(c, errNotFound("topic "+name+" is not served by this gateway"))
			return
		}
		abort(c, &httpError{status: http.StatusForbidden, reason: "not_open", msg: "topic " + name + " is not open for publishing (publish-topics)"})
		return
	}
	st := p.stats[name]
	ctx, span := p.tracer.Start(c.Request.Context(), "publish", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("messaging.destination.name", name)))
	defer span.End()
	start := time.Now()
	recs, who, err := a.publishRequest(c, p, name)
	if err != nil {
		st.results[publishErrorResult(err)].Add(max(1, int64(len(recs))))
		span.SetStatus(codes.Error, err.Error())
		abort(c, err)
		return
	}
	span.SetAttributes(attribute.Int("messaging.batch.message_count", len(recs)))
	pctx, cancel := context.WithTimeout(ctx, a.cfg.Publish.claimLease())
	defer cancel()
	results, errs := p.Publish(pctx, name, who, recs)
	if p.duration != nil {
		p.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("topic", name)))
	}
	a.answerPublish(c, span, name, results, errs)
}

// publishRequest reads a publish request and returns its records and who publishes them (publisherName). The
// cheap checks come before the body is read: the token, the content type, the Idempotency-Key header, and
// one record of who's rate, so that a client over its rate costs no parse. Then the body, with a place among
// publish-max-body-reads, within publish-body-timeout and publish-max-body-bytes; then the records against
// publish-burst (more could never pass: 413), the token's keys and the rest of the rate. A refusal for the rate
// sets Retry-After. The records are returned with an error too, when they were parsed, for the counts.
func (a *App) publishRequest(c *gin.Context, p *publisher, topic string) ([]publish.Record, string, error) {
	gr, who, idem, err := a.publishHead(c, p, topic)
	if err != nil {
		// net/http would read the body before it answers, to keep the connection: the client may never send
		// it, and it is not wanted.
		if c.Request.ContentLength != 0 {
			c.Header("Connection", "close")
		}
		return nil, who, err
	}
	lim := a.cfg.Publish.limits()
	recs, err := a.readRecords(c, idem, lim)
	<-p.bodies
	if err != nil {
		return nil, who, err
	}
	if p.rates != nil && len(recs) > p.rates.Burst() {
		return recs, who, &httpError{
			status: http.StatusRequestEntityTooLarge, reason: "publish_burst",
			msg: fmt.Sprintf("%d records in one request can never pass publish-burst, %d records at once: send at most %d a request", len(recs), p.rates.Burst(), p.rates.Burst()),
		}
	}
	if gr.claims != nil {
		for i, r := range recs {
			if !gr.claims.Scope.AllowsPublishKey(r.Key) {
				return recs, who, &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: fmt.Sprintf("record %d: its key is not one the token may publish", i)}
			}
		}
	}
	return recs, who, a.takeRate(c, p, who, len(recs)-1)
}

// publishHead checks a publish request before its body is read (publishRequest) and takes its place to read the
// body; it returns the grant of its token, who publishes, and its Idempotency-Key header.
func (a *App) publishHead(c *gin.Context, p *publisher, topic string) (grant, string, string, error) {
	gr, err := a.gate.admitPublish(c.Request, topic, a.cfg.Publish.Anonymous)
	if err != nil {
		return gr, "", "", err
	}
	if ct := c.ContentType(); ct != "application/json" {
		return gr, "", "", &httpError{status: http.StatusUnsupportedMediaType, msg: "the body must be JSON (Content-Type: application/json), got " + strconv.Quote(ct)}
	}
	idem := c.GetHeader("Idempotency-Key")
	if err := publish.CheckIdemKey(idem, a.cfg.Publish.limits()); err != nil {
		return gr, "", "", err
	}
	who := a.publisherName(c.Request, gr)
	if err := a.takeRate(c, p, who, 1); err != nil {
		return gr, who, "", err
	}
	select {
	case p.bodies <- struct{}{}:
	default:
		c.Header("Retry-After", "1")
		return gr, who, "", &httpError{
			status: http.StatusServiceUnavailable, reason: "publish_busy",
			msg: fmt.Sprintf("this gateway is reading %d publish requests already (publish-max-body-reads); try again shortly", cap(p.bodies)),
		}
	}
	return gr, who, idem, nil
}

// readRecords reads and parses a publish request's body within publish-body-timeout (408) and
// publish-max-body-bytes (413).
func (a *App) readRecords(c *gin.Context, idem string, lim publish.Limits) ([]publish.Record, error) {
	rc := http.NewResponseController(c.Writer)
	timed := rc.SetReadDeadline(time.Now().Add(a.cfg.Publish.BodyTimeout)) == nil
	if timed {
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, a.cfg.Publish.maxBody())
	recs, err := publish.ParseRecords(body, idem, lim)
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case err == nil:
		return recs, nil
	case errors.As(err, &mbe):
		return nil, &httpError{
			status: http.StatusRequestEntityTooLarge, reason: "body_too_large",
			msg: fmt.Sprintf("the body is larger than %d bytes (publish-max-body-bytes)", mbe.Limit),
		}
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		c.Header("Connection", "close") // the rest of the body is still on its way
		return nil, &httpError{
			status: http.StatusRequestTimeout, reason: "body_timeout",
			msg: fmt.Sprintf("the body did not arrive within %s (publish-body-timeout)", a.cfg.Publish.BodyTimeout),
		}
	}
	var ie *publish.InputError
	if errors.As(err, &ie) {
		return nil, err
	}
	return nil, &httpError{status: http.StatusBadRequest, msg: "the body could not be read: " + err.Error()}
}

// takeRate takes n records of who's publish-rate; a refusal is 429 with Retry-After.
func (a *App) takeRate(c *gin.Context, p *publisher, who string, n int) error {
	if p.rates == nil || n <= 0 {
		return nil
	}
	if ok, wait := p.rates.Take(who, n, time.Now()); !ok {
		c.Header("Retry-After", strconv.Itoa(max(1, int(wait.Seconds()))))
		return &httpError{
			status: http.StatusTooManyRequests, reason: "publish_rate",
			msg: fmt.Sprintf("more records than publish-rate allows: %d a second, %d at once", a.cfg.Publish.Rate, p.rates.Burst()),
		}
	}
	return nil
}

// publishAllowed checks a WebSocket message's record against the token's scope, and the rate of who; a refusal
// for the rate comes with the wait until it would pass.
func (a *App) publishAllowed(p *publisher, who string, gr grant, rec publish.Record) (retryAfter time.Duration, err error) {
	if gr.claims != nil && !gr.claims.Scope.AllowsPublishKey(rec.Key) {
		return 0, &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: "its key is not one the token may publish"}
	}
	if p.rates == nil {
		return 0, nil
	}
	if ok, wait := p.rates.Take(who, 1, time.Now()); !ok {
		return wait, &httpError{
			status: http.StatusTooManyRequests, reason: "publish_rate",
			msg: fmt.Sprintf("more records than publish-rate allows: %d a second, %d at once", a.cfg.Publish.Rate, p.rates.Burst()),
		}
	}
	return 0, nil
}

// publisherName is who publish-rate counts a request's records for: its token's subject, else its client
// address (behind trusted proxies).
func (a *App) publisherName(r *http.Request, gr grant) string {
	if sub := gr.subject(); sub != "" {
		return "sub:" + sub
	}
	return "ip:" + limit.ClientIP(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), a.trusted).String()
}

// publishErrorResult is the result of a request refused before anything was produced.
func publishErrorResult(err error) int {
	var ae *auth.Error
	var he *httpError
	if errors.As(err, &ae) || (errors.As(err, &he) && (he.status == http.StatusForbidden || he.status == http.StatusTooManyRequests)) {
		return resultRefused
	}
	return resultRejected
}

// answerPublish answers with each record's place or error: one record as an object, a batch as
// {"records": [...]}; the status is 200 when every record is in Kafka, else the first failure's.
func (a *App) answerPublish(c *gin.Context, span trace.Span, topic string, results []publish.Result, errs []error) {
	status := http.StatusOK
	out := make([]gin.H, len(results))
	for i, res := range results {
		var s, retry int
		out[i], s, retry = a.publishOutcome(topic, res, errs[i])
		if s != http.StatusOK && status == http.StatusOK {
			status = s
			if retry > 0 {
				c.Header("Retry-After", strconv.Itoa(retry))
			}
			span.SetStatus(codes.Error, errs[i].Error())
		}
	}
	if len(out) == 1 {
		c.JSON(status, out[0])
		return
	}
	c.JSON(status, gin.H{"records": out})
}

// publishOutcome is a record's answer, its status and Retry-After seconds (0: none), and counts its result: its
// place and the id right after it, or its error, with a reason when the status alone does not tell it.
func (a *App) publishOutcome(topic string, res publish.Result, err error) (gin.H, int, int) {
	st := a.publisher.stats[topic]
	if err != nil {
		s, retry, result, reason := publishFailure(err)
		st.results[result].Add(1)
		out := gin.H{"error": err.Error(), "status": s}
		if reason != "" {
			out["reason"] = reason
		}
		var ce *publish.ConflictError
		if errors.As(err, &ce) {
			out["idempotency_key"] = ce.IdemKey
		}
		return out, s, retry
	}
	st.results[map[bool]int{false: resultPublished, true: resultDuplicate}[res.Duplicate]].Add(1)
	return gin.H{
		"topic": topic, "partition": res.Partition, "offset": res.Offset,
		"timestamp": res.Time.UTC().Format(time.RFC3339Nano), "duplicate": res.Duplicate,
		"id": a.streamTopics[topic].IDAfter(res.Partition, res.Offset),
	}, http.StatusOK, 0
}

// publishFailure is the status, Retry-After seconds, result and reason of a record Kafka did not take.
func publishFailure(err error) (status, retryAfter, result int, reason string) {
	var oe *publish.OrderError
	switch {
	case errors.Is(err, publish.ErrConflict):
		// Retrying cannot help: the key belongs to another record.
		return http.StatusConflict, 0, resultRejected, "idempotency_conflict"
	case errors.As(err, &oe):
		return http.StatusConflict, 0, resultRejected, "order"
	case errors.Is(err, publish.ErrBusy):
		return http.StatusServiceUnavailable, 1, resultBusy, ""
	case errors.Is(err, publish.ErrInFlight):
		return http.StatusConflict, 1, resultBusy, "in_flight"
	case errors.Is(err, publish.ErrLooking), errors.Is(err, publish.ErrEarlierFailed):
		return http.StatusServiceUnavailable, 1, resultBusy, ""
	default:
		return http.StatusServiceUnavailable, 2, resultFailed, ""
	}
}

// admitPublish checks a publish request's token against topic's mode: writing needs a token whose scope's
// publish covers the topic, or, with anonymous (publish-anonymous), no token on a topic whose mode is none or
// optional. A token on a topic of mode none is not looked at, as for reads.
func (g *gate) admitPublish(r *http.Request, topic string, anonymous bool) (grant, error) {
	if url := g.hookCfg.urlFor(topic); url != "" && g.hook != nil {
		return g.admitPublishHook(r, url, topic)
	}
	mode := g.modes[topic]
	tok := ""
	if mode != auth.ModeNone {
		var err error
		if tok, err = g.extract.Token(r); err != nil {
			return grant{}, err
		}
	}
	if tok == "" {
		if anonymous && mode != auth.ModeRequired {
			return grant{}, nil
		}
		if mode == auth.ModeNone {
			return grant{}, &httpError{
				status: http.StatusForbidden, reason: "anonymous",
				msg: "topic " + topic + " takes no tokens (auth mode none): publishing into it needs publish-anonymous",
			}
		}
		return grant{}, &auth.Error{Reason: auth.ReasonMissing, Detail: "publishing into " + topic + " needs a token whose scope's publish names it"}
	}
	claims, err := g.verifier.Verify(r.Context(), tok)
	if err != nil {
		return grant{}, err
	}
	if !claims.Scope.AllowsPublish(topic) {
		if anonymous && mode == auth.ModeOptional {
			return grant{}, nil
		}
		return grant{}, &auth.Error{Reason: auth.ReasonInsufficientScope, Detail: "publish " + topic}
	}
	return grant{claims: claims, topic: topic}, nil
}

// registerPublishMetrics adds the publishing side's metrics: records by result, request durations, bytes
// waiting for Kafka, and claims lost.
func (t *telemetry) registerPublishMetrics(p *publisher) error {
	if p == nil {
		return nil
	}
	m := t.provider.Meter("github.com/ssegate/ssegate/services/gateway")
	records, err1 := m.Int64ObservableCounter("ssegate.publish.records",
		metric.WithDescription("Records clients asked to publish, by result: published, duplicate (an idempotency key seen before), rejected (bad input), refused (token, scope, rate), busy, failed (Kafka or the idempotency store)"))
	pending, err2 := m.Int64ObservableGauge("ssegate.publish.pending.bytes",
		metric.WithDescription("Bytes of published records Kafka has not acknowledged yet: what publish-pending-bytes bounds"))
	lost, err3 := m.Int64ObservableCounter("ssegate.publish.claims.lost",
		metric.WithDescription("Records acknowledged after their idempotency claim had been taken over: keys that may have two records"))
	duration, err4 := m.Float64Histogram("ssegate.publish.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a publish request's arrival to Kafka's acknowledgement of all its records"),
		metric.WithExplicitBucketBoundaries(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	p.duration = duration
	attrs := map[string][numPublishResults]metric.MeasurementOption{}
	for topic := range p.stats {
		var a [numPublishResults]metric.MeasurementOption
		for i, name := range publishResultNames {
			a[i] = metric.WithAttributes(attribute.String("topic", topic), attribute.String("result", name))
		}
		attrs[topic] = a
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for topic, st := range p.stats {
			for i := range st.results {
				o.ObserveInt64(records, st.results[i].Load(), attrs[topic][i])
			}
		}
		o.ObserveInt64(pending, p.Pending())
		o.ObserveInt64(lost, p.LostClaims())
		return nil
	}, records, pending, lost)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}

// claimLease is how long a claim on an idempotency key is held, and a publish request may wait: the wait for
// room under publish-pending-bytes, the produce, and the store's round trips.
func (c PublishConfig) claimLease() time.Duration { return c.QueueWait + c.Timeout + producerSettle }
