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
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
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
	replays *replay.Pool
	// replayLog is the Kafka client the replays read with.
	replayLog *replay.KafkaLog
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
	// ln and srv are the clients' port (streams, dashboard); adminLn and adminSrv the admin port.
	ln       net.Listener
	srv      *http.Server
	adminLn  net.Listener
	adminSrv *http.Server
	draining atomic.Bool
	gate     *gate       // who may read which topic
	cors     *corsPolicy // which other origins' pages may
	refused  refusals    // streams refused before they start, for a token, scope or origin
}

// maxHeaderBytes bounds a request's line and headers (a Last-Event-ID of many partitions is long).
const maxHeaderBytes = 64 << 10

// headerTimeout bounds how long a client may take to send a request's line and headers; a slower one is
// answered 408 Request Timeout.
const headerTimeout = 10 * time.Second

// New builds the gateway from a validated configuration and binds its listeners, so that a busy port fails
// here. It does not contact Kafka or Redis; Run does.
func New(cfg Config, log *slog.Logger) (a *App, err error) {
	kopts, err := cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	kopts = append(kopts, kgo.WithLogger(kafkaconn.Logger(log.With("component", "kafka"), kgo.LogLevelWarn)))
	formats, err := cfg.valueFormats()
	if err != nil {
		return nil, err
	}
	fc := feed.Config{
		Topics:           cfg.Topics,
		MetadataInterval: cfg.MetadataInterval,
		Prefill:          cfg.Prefill,
		ValueFormats:     formats,
		Logger:           log,
	}
	if err := cfg.ringFeed(&fc); err != nil {
		return nil, err
	}
	f, err := feed.New(fc, kopts...)
	if err != nil {
		return nil, err
	}
	replayLog, err := replay.NewKafkaLog(kopts...)
	if err != nil {
		f.Close()
		return nil, err
	}
	// Without a position topic (id-format v1 and none given) the resolver answers every v2 id invalid-id
	// without reading Kafka.
	resolver, err := checkpoint.NewResolver(cfg.PositionTopic, replayLog, isOutOfRange, 0,
		checkpoint.WithReaders(cfg.CheckpointReaders))
	if err != nil {
		replayLog.Close()
		f.Close()
		return nil, err
	}
	var cpw *checkpoint.Writer
	if cfg.IDFormat == "v2" {
		writer := cfg.CheckpointWriter
		if writer == "" {
			writer, _ = os.Hostname()
		}
		if cpw, err = checkpoint.NewWriter(cfg.PositionTopic, writer, resolver, kopts...); err != nil {
			replayLog.Close()
			f.Close()
			return nil, err
		}
		f.SetCheckpoints(cpw)
	}
	res, tracing, err := newTracing(cfg.OTLPEndpoint)
	if err != nil {
		if cpw != nil {
			cpw.Close()
		}
		replayLog.Close()
		return nil, err
	}
	tracer := tracing.Provider.Tracer(instrumentation, trace.WithInstrumentationVersion(tel.Version()))
	obs := &observer{}
	a = &App{
		cfg:     cfg,
		tracing: tracing,
		log:     log,
		feed:    f,
		streams: stream.NewServer(stream.Config{
			Retry:        cfg.Retry,
			WriteTimeout: cfg.WriteTimeout,
			Drain:        cfg.Drain,
			Writers:      cfg.Writers,
			PendingBytes: cfg.PendingWriteBytes,
			Linger:       cfg.WriteLinger,
			Logger:       log,
			Tracer:       tracer,
			Observer:     obs,
		}),
		stats:        map[string]*stream.Stats{},
		replayLog:    replayLog,
		checkpoints:  cpw,
		replays:      replay.NewPool(replay.Config{Readers: cfg.ReplayReaders, CacheBytes: cfg.ReplayCacheBytes, Tracer: tracer}, replayLog),
		streamTopics: map[string]*stream.Topic{},
	}
	for _, name := range f.Topics() {
		a.stats[name] = new(stream.Stats)
		st := stream.NewTopic(f, name, a.replays, cfg.KeyPartitioner == "any")
		st.ValueFormat = formats[name]
		st.Resolve = func(ctx context.Context, id string, topicID [16]byte) (position.Vector, error) {
			return resolver.Resolve(ctx, id, name, topicID)
		}
		st.Cached = func(id string) (position.Vector, bool) { return resolver.Cached(id, name, [16]byte{}) }
		a.streamTopics[name] = st
	}
	// Every error below returns nil for a, so the release works on this copy.
	built := a
	defer func() {
		if err != nil {
			built.release()
		}
	}()
	if a.telemetry, err = newTelemetry(res, f, a.stats, a.replays, a.streams); err != nil {
		return nil, err
	}
	if err = a.telemetry.registerFlow(f, obs); err != nil {
		return nil, err
	}
	if a.httpClients, a.httpAdmin, err = a.telemetry.httpMetrics(); err != nil {
		return nil, err
	}
	a.refused = newRefusals(f.Topics())
	if err = a.telemetry.registerAuth(f.Topics(), a.stats, a.refused); err != nil {
		return nil, err
	}
	if a.cors, err = newCORS(cfg.CORS); err != nil {
		return nil, err
	}
	if a.gate, err = newGate(cfg, log); err != nil {
		return nil, err
	}
	if a.trusted, err = limit.ParseTrusted(cfg.Limits.TrustedProxies); err != nil {
		return nil, err
	}
	if a.limits, a.quota, a.rdb, err = newLimiter(cfg.Limits, log); err != nil {
		return nil, err
	}
	if err = a.telemetry.registerLimitMetrics(a.limits, a.quota); err != nil {
		return nil, err
	}
	if a.ln, err = listen(cfg.Listen, headerTimeout); err != nil {
		return nil, err
	}
	if a.adminLn, err = listen(cfg.AdminListen, headerTimeout); err != nil {
		return nil, err
	}
	a.srv = newServer(a.routes(), headerTimeout)
	a.adminSrv = newServer(a.adminRoutes(), headerTimeout)
	return a, nil
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

// release closes what New opened, when New fails.
func (a *App) release() {
	a.feed.Close()
	a.streams.Close()
	if a.checkpoints != nil {
		a.checkpoints.Close()
	}
	a.replayLog.Close()
	for _, ln := range []net.Listener{a.ln, a.adminLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	a.closeLimits()
	_ = a.tracing.Shutdown(context.Background())
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
// closes, open streams are closed spread over the drain window, the admin port closes, and the Kafka client
// is closed last.
func (a *App) Run(ctx context.Context) error {
	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFeed()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.feed.Run(feedCtx); err != nil {
			a.log.Error("kafka feed stopped", "err", err)
		}
	})
	wg.Go(func() { a.gate.run(feedCtx) })
	if a.checkpoints != nil {
		wg.Go(func() {
			// Until the position topic exists, checkpoint writes fail and frames get v1 ids: exact all the same.
			ectx, cancel := context.WithTimeout(feedCtx, 30*time.Second)
			defer cancel()
			if err := a.checkpoints.EnsureTopic(ectx); err != nil {
				a.log.Warn("could not create the position topic; v2 ids need it", "topic", a.cfg.PositionTopic, "err", err)
			}
		})
	}
	serveErr := make(chan error, 1)
	adminErr := make(chan error, 1)
	go func() { serveErr <- a.srv.Serve(a.ln) }()
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
	a.streams.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Drain+a.cfg.WriteTimeout+time.Second)
	defer cancel()
	if werr := a.waitStreams(sctx); werr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", werr)
	}
	if serr := a.srv.Shutdown(sctx); serr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", serr)
		_ = a.srv.Close()
	}
	if werr := a.streams.Wait(sctx); werr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", werr)
	}
	a.streams.Close()
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
	if terr := a.telemetry.shutdown(sctx); terr != nil && !errors.Is(terr, context.DeadlineExceeded) {
		a.log.Warn("telemetry shutdown", "err", terr)
	}
	if terr := a.tracing.Shutdown(sctx); terr != nil {
		a.log.Warn("tracing shutdown", "err", terr)
	}
	a.log.Info("gateway stopped")
	return err
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
