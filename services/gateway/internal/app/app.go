package app

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/position"
	tel "github.com/ssegate/ssegate/pkg/telemetry"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/limit"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

//go:embed dashboard
var dashboardFS embed.FS

// App is a running gateway: the Kafka feed, the HTTP server and the telemetry that watches them.
type App struct {
	cfg     Config
	log     *slog.Logger
	feed    *feed.Feed
	streams *stream.Server
	stats   map[string]*stream.Stats
	values  *valueStats
	replays *replay.Pool
	// replayLog is the Kafka client the replays read with.
	replayLog *replay.KafkaLog
	// fetched counts what the feed read, by broker.
	fetched brokerBytes
	// checkpoints writes the checkpoints of compact ids (nil with id-format v1).
	checkpoints *checkpoint.Writer
	// streamTopics are what streams read, per topic: the ring, and Kafka through the feed and replays.
	streamTopics map[string]*stream.Topic
	telemetry    *telemetry
	// tracing exports spans (a no-op provider without otlp-endpoint); httpClients and httpAdmin count each
	// port's answers.
	tracing     *tel.Tracing
	httpClients *httpMetrics
	httpAdmin   *httpMetrics
	// limits admit new streams; quota is their Redis store and rdb its client (nil without Redis).
	limits  *limit.Limiter
	quota   *limit.Redis
	rdb     *redis.Client
	trusted []netip.Prefix
	// ln and srv are the clients' port (streams, dashboard); adminLn and adminSrv the admin port. certs is the
	// clients' port's certificate with TLS (nil without).
	ln       net.Listener
	srv      *clientServer
	certs    *certStore
	adminLn  net.Listener
	adminSrv *http.Server
	// takeOver gives this process every new connection of a clients' port shared with SO_REUSEPORT (nil when
	// not shared); Run calls it once ready (socket.go).
	takeOver func() error
	draining atomic.Bool
	gate     *gate       // who may read which topic
	cors     *corsPolicy // which other origins' pages may
	hosts    *hostPolicy // which Host headers the clients' port answers (nil: any)
	refused  refusals    // streams refused before they start, for a token, scope, origin or host
	// publisher is the publishing side (publish.go); nil when no topic is open for it.
	publisher *publisher
	// asyncAPI makes the AsyncAPI documents of /asyncapi.json (asyncapi.go).
	asyncAPI *asyncAPIDocs
}

// maxHeaderBytes bounds a request's line and headers (a Last-Event-ID of many partitions is long).
const maxHeaderBytes = 64 << 10

// headerTimeout bounds how long a client may take to send a request's line and headers; a slower one is
// answered 408 Request Timeout.
const headerTimeout = 10 * time.Second

// New builds the gateway from a validated configuration and binds its listeners, so that a busy port fails
// here. It does not contact Kafka or Redis; Run does. When it fails, it has closed whatever it had made.
func New(cfg Config, log *slog.Logger) (*App, error) {
	a := &App{cfg: cfg, log: log, stats: map[string]*stream.Stats{}, streamTopics: map[string]*stream.Topic{}}
	if err := a.build(); err != nil {
		a.release()
		return nil, err
	}
	return a, nil
}

// build makes the gateway's parts, one concern after the other: the Kafka clients, tracing, the streams,
// the metrics, who may read what, the limits, the ports. Each part is set on a as soon as it exists, so that
// release closes exactly what was made when a later step fails.
func (a *App) build() error {
	kopts, err := a.cfg.Kafka.Opts()
	if err != nil {
		return err
	}
	kopts = append(kopts, kgo.WithLogger(kafkaconn.Logger(a.log.With("component", "kafka"), kgo.LogLevelWarn)))
	formats, err := a.formats()
	if err != nil {
		return err
	}
	resolver, err := a.newKafka(kopts, formats)
	if err != nil {
		return err
	}
	res, tracing, err := newTracing(a.cfg.OTLPEndpoint)
	if err != nil {
		return err
	}
	a.tracing = tracing
	obs := &observer{}
	a.newStreams(formats, resolver, obs)
	if err := a.newMetrics(res, obs); err != nil {
		return err
	}
	if err := a.newAccess(); err != nil {
		return err
	}
	limits, quota, rdb, err := newLimiter(a.cfg.Limits, a.log)
	if err != nil {
		return err
	}
	a.limits, a.quota, a.rdb = limits, quota, rdb
	if err := a.telemetry.registerLimitMetrics(a.limits, a.quota); err != nil {
		return err
	}
	if err := a.newPublisher(kopts, a.tracing.Provider.Tracer(instrumentation, trace.WithInstrumentationVersion(tel.Version()))); err != nil {
		return err
	}
	if err := a.telemetry.registerPublishMetrics(a.publisher); err != nil {
		return err
	}
	return a.bind()
}

// newKafka makes the Kafka clients: the feed's, the replays' log (which the resolver of compact ids reads
// through) and, with id-format v2, the checkpoint writer's. It returns the resolver.
func (a *App) newKafka(kopts []kgo.Opt, formats map[string]*feed.Format) (*checkpoint.Resolver, error) {
	fc := feed.Config{
		Topics:           a.cfg.Topics,
		MetadataInterval: a.cfg.MetadataInterval,
		Prefill:          a.cfg.Prefill,
		Formats:          formats,
		Logger:           a.log,
	}
	if err := a.cfg.ringFeed(&fc); err != nil {
		return nil, err
	}
	f, err := feed.New(fc, append(slices.Clone(kopts), kgo.WithHooks(&a.fetched))...)
	if err != nil {
		return nil, err
	}
	a.feed = f
	replayLog, err := replay.NewKafkaLog(kopts...)
	if err != nil {
		return nil, err
	}
	a.replayLog = replayLog
	// Without a position topic (id-format v1 and none given) the resolver answers every v2 id invalid-id
	// without reading Kafka.
	resolver, err := checkpoint.NewResolver(a.cfg.PositionTopic, replayLog, isOutOfRange, 0,
		checkpoint.WithReaders(a.cfg.CheckpointReaders))
	if err != nil {
		return nil, err
	}
	if a.cfg.IDFormat == "v2" {
		writer := a.cfg.CheckpointWriter
		if writer == "" {
			writer, _ = os.Hostname()
		}
		cpw, err := checkpoint.NewWriter(a.cfg.PositionTopic, writer, resolver, kopts...)
		if err != nil {
			return nil, err
		}
		a.checkpoints = cpw
		f.SetCheckpoints(cpw)
	}
	return resolver, nil
}

// newStreams makes the stream server (and its writers), the replay pool and what streams read of each topic.
func (a *App) newStreams(formats map[string]*feed.Format, resolver *checkpoint.Resolver, obs *observer) {
	cfg := a.cfg
	conflate, _ := cfg.topicConflate(cfg.TopicConflate) // valid: Validate checked them
	slow, _ := cfg.topicConflate(cfg.TopicSlowConflate)
	tracer := a.tracing.Provider.Tracer(instrumentation, trace.WithInstrumentationVersion(tel.Version()))
	a.streams = stream.NewServer(stream.Config{
		Retry:        cfg.Retry,
		WriteTimeout: cfg.WriteTimeout,
		Drain:        cfg.Drain,
		Writers:      cfg.Writers,
		PendingBytes: cfg.PendingWriteBytes,
		Linger:       cfg.WriteLinger,
		Logger:       a.log,
		Tracer:       tracer,
		Observer:     obs,
		WS:           stream.WSConfig{ReadLimit: cfg.WSMaxMessageBytes, Compression: cfg.WSCompression},
	})
	a.replays = replay.NewPool(replay.Config{Readers: cfg.ReplayReaders, CacheBytes: cfg.ReplayCacheBytes, Tracer: tracer}, a.replayLog)
	for _, name := range a.feed.Topics() {
		a.stats[name] = new(stream.Stats)
		st := stream.NewTopic(a.feed, name, a.replays, cfg.KeyPartitioner == "any")
		// The same formats and decoders as the feed's; only the feed counts what it could not decode, so that
		// the metric counts records, not the times replays read them again.
		sf := *formats[name]
		sf.Undecodable = nil
		st.Format = &sf
		st.Conflate, st.SlowConflate = conflate[name], slow[name]
		st.Resolve = func(ctx context.Context, id string, topicID [16]byte) (position.Vector, error) {
			return resolver.Resolve(ctx, id, name, topicID)
		}
		st.Cached = func(id string) (position.Vector, bool) { return resolver.Cached(id, name, [16]byte{}) }
		a.streamTopics[name] = st
	}
}

// newMetrics makes the meter provider that serves /metrics and registers the gateway's instruments with it
// (the limiter's are registered once it exists).
func (a *App) newMetrics(res *sdkresource.Resource, obs *observer) error {
	t, err := newTelemetry(res, a.feed, a.stats, a.replays, a.streams)
	if err != nil {
		return err
	}
	a.telemetry = t
	if err := t.registerFlow(a.feed, obs); err != nil {
		return err
	}
	if err := t.registerValueMetrics(a.values); err != nil {
		return err
	}
	if err := t.registerKafka(&a.fetched); err != nil {
		return err
	}
	if a.httpClients, a.httpAdmin, err = t.httpMetrics(); err != nil {
		return err
	}
	a.refused = newRefusals(a.feed.Topics())
	if err := t.registerSnapshots(a.feed, a.stats); err != nil {
		return err
	}
	if err := t.registerCompactIDs(a.feed); err != nil {
		return err
	}
	return t.registerAuth(a.feed.Topics(), a.stats, a.refused)
}

// newAccess makes who may read what: the hosts the clients' port answers for, the pages of which origins
// (CORS), with which tokens (the gate), and which proxies' X-Forwarded-For is believed.
func (a *App) newAccess() error {
	var err error
	if a.hosts, err = newHostPolicy(a.cfg.AllowedHosts); err != nil {
		return err
	}
	if a.cors, err = newCORS(a.cfg.CORS); err != nil {
		return err
	}
	if a.gate, err = newGate(a.cfg, a.log); err != nil {
		return err
	}
	if a.asyncAPI, err = newAsyncAPIDocs(a.cfg); err != nil {
		return err
	}
	a.trusted, err = limit.ParseTrusted(a.cfg.Limits.TrustedProxies)
	return err
}

// bind binds the clients' port and the admin port, and makes their servers.
func (a *App) bind() error {
	var err error
	if a.cfg.TLS.enabled() {
		if a.certs, err = newCertStore(a.cfg.TLS, a.log); err != nil {
			return err
		}
		if err := a.telemetry.registerTLSMetrics(a.certs); err != nil {
			return err
		}
	}
	if a.ln, a.takeOver, err = listenClients(a.cfg, a.log); err != nil {
		return err
	}
	if jl, ok := a.ln.(jsonErrorListener); ok && a.certs != nil {
		// Under TLS, net/http must see the *tls.Conn to offer HTTP/2, so nothing can stand between them to
		// rewrite its early errors: they stay plain text (listener.go).
		a.ln = jl.Listener
	}
	if a.adminLn, err = listen(a.cfg.AdminListen, headerTimeout); err != nil {
		return err
	}
	routes := a.routes()
	a.srv = newClientServer(a.ln, a.certs != nil, func() *http.Server {
		srv := newServer(routes, headerTimeout)
		srv.Protocols = a.cfg.TLS.protocols()
		if a.certs != nil {
			srv.TLSConfig = a.certs.serverConfig()
		}
		return srv
	})
	a.adminSrv = newServer(a.adminRoutes(), headerTimeout)
	return nil
}

// newServer returns the http.Server of a port: a request's line and headers must arrive within headerTimeout
// (the listener from listen answers one that is late with 408) and hold at most maxHeaderBytes.
func newServer(h http.Handler, headerTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// isOutOfRange says a replay.Log error is a read below the partition's low watermark.
func isOutOfRange(err error) bool {
	var oor *replay.OutOfRangeError
	return errors.As(err, &oor)
}

// listen binds addr; its connections answer net/http's early errors in JSON, and a request whose line and
// headers are not in after headerTimeout (the server's ReadHeaderTimeout) with 408.
func listen(addr string, headerTimeout time.Duration) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return jsonErrorListener{Listener: ln, maxHeaderBytes: maxHeaderBytes, headerTimeout: headerTimeout}, nil
}

// release closes what New made, when New fails: whichever of its parts exist.
func (a *App) release() {
	if a.streams != nil {
		a.streams.Close()
	}
	for _, ln := range []net.Listener{a.ln, a.adminLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	a.publisher.close()
	a.closeLimits()
	if a.feed != nil {
		a.feed.Close()
	}
	if a.checkpoints != nil {
		a.checkpoints.Close()
	}
	if a.replayLog != nil {
		a.replayLog.Close()
	}
	if a.telemetry != nil {
		_ = a.telemetry.shutdown(context.Background())
	}
	if a.tracing != nil {
		_ = a.tracing.Shutdown(context.Background())
	}
}

// closeLimits closes the limiter (which gives back the Redis slots it still holds) and its Redis client.
func (a *App) closeLimits() {
	if a.limits != nil {
		_ = a.limits.Close()
	}
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
}

// Addr returns the address of the clients' port: streams and the dashboard.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// AdminAddr returns the address of the admin port: metrics, health, readiness and pprof.
func (a *App) AdminAddr() net.Addr { return a.adminLn.Addr() }

// Run serves until ctx ends, then shuts down gracefully: /readyz turns unready, the clients' listener
// closes, open streams are closed spread over the drain window, the admin port closes, the Kafka clients
// close, and telemetry exports what it still holds, within a deadline of its own, last.
func (a *App) Run(ctx context.Context) error {
	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFeed()
	var wg sync.WaitGroup
	a.startWork(ctx, feedCtx, &wg)
	serveErr := make(chan error, 1)
	adminErr := make(chan error, 1)
	go func() { serveErr <- a.srv.Serve() }()
	go func() { adminErr <- a.adminSrv.Serve(a.adminLn) }()
	a.log.Info("gateway listening", "addr", a.ln.Addr().String(), "admin_addr", a.adminLn.Addr().String(), "topics", a.cfg.Topics,
		"open_files_limit", openFilesLimit())

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("http server: %w", err)
	case err = <-adminErr:
		err = fmt.Errorf("admin http server: %w", err)
	}

	// Unready at once; the listener stays open through the propagation window and the drain, and every new
	// stream meanwhile is told where it is and to come back soon, so that a proxy with no other endpoint left
	// never gets a refused connection (a 502, which an EventSource never retries).
	a.log.Info("gateway shutting down", "endpoint_propagation", a.cfg.Propagation.String(), "drain", a.cfg.Drain.String())
	a.draining.Store(true)
	a.streams.Leave()
	if a.cfg.Propagation > 0 {
		select {
		case <-time.After(a.cfg.Propagation):
		case err2 := <-serveErr:
			err = errors.Join(err, fmt.Errorf("http server: %w", err2))
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Drain+a.cfg.WriteTimeout+time.Second)
	defer cancel()
	// HTTP/2 connections get their GOAWAY before their streams end, so that their clients reconnect on new
	// connections; the port stays open (handover.go).
	a.srv.handOver(sctx)
	a.streams.Drain()
	if werr := a.waitStreams(sctx); werr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", werr)
	}
	if serr := a.srv.Shutdown(sctx); serr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", serr)
		a.srv.Close()
	}
	if werr := a.streams.Wait(sctx); werr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", werr)
	}
	a.streams.Close()
	// The block reads the streams started end with them: join them before their Kafka clients close.
	if rerr := a.replays.Wait(sctx); rerr != nil {
		a.log.Warn("replay reads still running after the drain window", "err", rerr)
	}
	// Every request has been answered: no record is published any more.
	a.publisher.close()
	// Every stream has ended and released its lease: give back what the pod still holds in Redis at once
	// rather than letting it expire.
	a.closeLimits()
	// The admin port served /readyz (503) and /metrics through the drain; it closes once the streams are gone.
	if aerr := a.adminSrv.Shutdown(sctx); aerr != nil {
		_ = a.adminSrv.Close()
	}
	stopFeed()
	wg.Wait()
	if a.checkpoints != nil {
		a.checkpoints.Close()
	}
	a.replayLog.Close()
	a.stopTelemetry()
	a.log.Info("gateway stopped")
	return err
}

// startWork starts, on wg, what runs beside the servers: the Kafka feed, the gate, the replay log's warm
// connections and the takeover of the writer pool (until feedCtx or ctx ends), and the position topic's
// creation.
func (a *App) startWork(ctx, feedCtx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() {
		if err := a.feed.Run(feedCtx); err != nil {
			a.log.Error("kafka feed stopped", "err", err)
		}
	})
	wg.Go(func() { a.gate.run(feedCtx) })
	wg.Go(func() {
		topics := a.feed.Topics()
		if a.cfg.PositionTopic != "" {
			topics = append(topics, a.cfg.PositionTopic)
		}
		a.replayLog.KeepWarm(feedCtx, func() []string { return topics })
	})
	wg.Go(func() { a.takeOverWhenReady(ctx) })
	if a.checkpoints != nil {
		wg.Go(func() { a.ensurePositionTopic(feedCtx) })
	}
}

// ensurePositionTopic creates the position topic if it is missing, and warns of each topic that keeps records
// longer than it keeps checkpoints. Until the topic exists, checkpoint writes fail and frames get v1 ids:
// exact all the same.
func (a *App) ensurePositionTopic(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	retention, longer, err := a.checkpoints.EnsureTopic(ctx, a.feed.Topics())
	switch {
	case errors.Is(err, checkpoint.ErrRetention):
		a.log.Warn("could not compare the position topic's retention with the topics' (the principal needs DescribeConfigs on them)", "topic", a.cfg.PositionTopic, "err", err)
	case err != nil:
		a.log.Warn("could not create the position topic; v2 ids need it", "topic", a.cfg.PositionTopic, "err", err)
	}
	for topic, r := range longer {
		a.log.Warn("the position topic keeps checkpoints for less time than this topic keeps records: v2 ids older than that get a retention resync, though their records are still there; raise the position topic's retention.ms",
			"position_topic", a.cfg.PositionTopic, "position_retention_ms", retention, "topic", topic, "topic_retention_ms", r)
	}
}

// telemetryShutdown bounds the export of the last spans at shutdown. The drain's deadline (drain + write
// timeout + 1 s) may be used up by then; the chart's grace period leaves 5 s beyond the drain and the write
// timeout, so this fits in it with the feed's close.
const telemetryShutdown = 3 * time.Second

// stopTelemetry exports what telemetry still holds (the spans of the streams' last moments) and stops it, with
// a deadline of its own: it comes after the drain, which may have used the whole of its window.
func (a *App) stopTelemetry() {
	ctx, cancel := context.WithTimeout(context.Background(), telemetryShutdown)
	defer cancel()
	if err := a.telemetry.shutdown(ctx); err != nil {
		a.log.Warn("telemetry shutdown", "err", err)
	}
	if err := a.tracing.Shutdown(ctx); err != nil {
		a.log.Warn("tracing shutdown", "err", err)
	}
}

// waitStreams waits, with the listener still open, until no stream of the drain is left: every stream open
// at the drain has ended (new ones end as soon as they have their position), or ctx ends.
func (a *App) waitStreams(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var open int64
		for _, st := range a.stats {
			open += st.Open.Load()
		}
		if open == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
