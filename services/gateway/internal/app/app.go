package app

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
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
	// streamTopics are what streams read, per topic: the ring, and Kafka through the feed and replays.
	streamTopics map[string]*stream.Topic
	telemetry    *telemetry
	gate         *gate       // who may read which topic
	cors         *corsPolicy // which other origins' pages may
	refused      refusals    // streams refused before they start
	ln           net.Listener
	srv          *http.Server
	draining     atomic.Bool
}

// New builds the gateway from a validated configuration and binds its listener, so that a busy port fails
// here. It does not contact Kafka; Run does.
func New(cfg Config, log *slog.Logger) (*App, error) {
	kopts, err := cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	kopts = append(kopts, kgo.WithLogger(kafkaconn.Logger(log.With("component", "kafka"), kgo.LogLevelWarn)))
	formats, err := cfg.valueFormats()
	if err != nil {
		return nil, err
	}
	f, err := feed.New(feed.Config{
		Topics:           cfg.Topics,
		RingBytes:        int(cfg.RingBytes),
		MetadataInterval: cfg.MetadataInterval,
		Prefill:          cfg.Prefill,
		ValueFormats:     formats,
		Logger:           log,
	}, kopts...)
	if err != nil {
		return nil, err
	}
	replayLog, err := replay.NewKafkaLog(kopts...)
	if err != nil {
		return nil, err
	}
	a := &App{
		cfg:  cfg,
		log:  log,
		feed: f,
		streams: stream.NewServer(stream.Config{
			Retry:        cfg.Retry,
			WriteTimeout: cfg.WriteTimeout,
			Drain:        cfg.Drain,
			Writers:      cfg.Writers,
			Linger:       cfg.WriteLinger,
			Logger:       log,
		}),
		stats:        map[string]*stream.Stats{},
		replayLog:    replayLog,
		replays:      replay.NewPool(replay.Config{Readers: cfg.ReplayReaders}, replayLog),
		streamTopics: map[string]*stream.Topic{},
	}
	for _, name := range f.Topics() {
		a.stats[name] = new(stream.Stats)
		st := stream.NewTopic(f, name, a.replays, cfg.KeyPartitioner == "any")
		st.ValueFormat = formats[name]
		a.streamTopics[name] = st
	}
	if a.telemetry, err = newTelemetry(f, a.stats, a.replays); err != nil {
		a.streams.Close()
		a.replayLog.Close()
		return nil, err
	}
	a.refused = newRefusals(f.Topics())
	if err = a.telemetry.registerAuth(f.Topics(), a.stats, a.refused); err == nil {
		a.cors, err = newCORS(cfg.CORS)
	}
	if err == nil {
		a.gate, err = newGate(cfg, log)
	}
	if err != nil {
		a.streams.Close()
		a.replayLog.Close()
		return nil, err
	}
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(context.Background(), "tcp", cfg.Listen); err != nil {
		a.streams.Close()
		a.replayLog.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	a.srv = &http.Server{
		Handler:           a.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	return a, nil
}

// Addr returns the address the gateway listens on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Run serves until ctx ends, then shuts down gracefully: /readyz turns unready, the listener closes, open
// streams are closed spread over the drain window, and the Kafka client is closed last.
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
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.srv.Serve(a.ln) }()
	a.log.Info("gateway listening", "addr", a.ln.Addr().String(), "topics", a.cfg.Topics)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("http server: %w", err)
	}

	a.log.Info("gateway shutting down", "drain", a.cfg.Drain.String())
	a.draining.Store(true)
	a.streams.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Drain+a.cfg.WriteTimeout+time.Second)
	defer cancel()
	if serr := a.srv.Shutdown(sctx); serr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", serr)
		_ = a.srv.Close()
	}
	if werr := a.streams.Wait(sctx); werr != nil {
		a.log.Warn("streams still open after the drain window; closing them", "err", werr)
	}
	a.streams.Close()
	stopFeed()
	wg.Wait()
	a.replayLog.Close()
	if terr := a.telemetry.shutdown(sctx); terr != nil && !errors.Is(terr, context.DeadlineExceeded) {
		a.log.Warn("telemetry shutdown", "err", terr)
	}
	a.log.Info("gateway stopped")
	return err
}
