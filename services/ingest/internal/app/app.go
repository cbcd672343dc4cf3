package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
	"github.com/ssegate/ssegate/services/ingest/internal/txn"
)

// App is a running ingest service.
type App struct {
	cfg       Config
	log       *slog.Logger
	kopts     []kgo.Opt
	sources   []*source.Source
	owner     string
	telemetry *telemetry
	ln        net.Listener
	srv       *http.Server
	ready     atomic.Bool
	draining  atomic.Bool
}

// New builds the service from a validated configuration and binds its listener, so that a busy port
// fails here. It does not contact Kafka or any source; Run does.
func New(cfg Config, log *slog.Logger) (*App, error) {
	return NewWithOptions(cfg, log, nil)
}

// NewWithOptions is New with a hook that may change each source's options (tests use it to simulate
// crashes with source.Options.AbandonOnStop). Nil means none.
func NewWithOptions(cfg Config, log *slog.Logger, tweak func(*source.Options)) (*App, error) {
	kopts, err := cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	kopts = append(kopts, kgo.WithLogger(kafkaconn.Logger(log.With("component", "kafka"), kgo.LogLevelWarn)))
	host, _ := os.Hostname()
	a := &App{cfg: cfg, log: log, kopts: kopts, owner: host + "/" + strconv.Itoa(os.Getpid())}
	opt := source.Options{
		Kafka:              kopts,
		CheckpointTopic:    cfg.CheckpointTopic,
		DeadLetterTopic:    cfg.DeadLetterTopic,
		CommitInterval:     cfg.CommitInterval,
		CommitEvents:       cfg.CommitEvents,
		BufferEvents:       cfg.BufferEvents,
		MaxEventBytes:      int(cfg.MaxEventBytes),
		MaxLineBytes:       int(cfg.MaxLineBytes),
		IdleTimeout:        cfg.IdleTimeout,
		BackoffMin:         cfg.BackoffMin,
		BackoffMax:         cfg.BackoffMax,
		TransactionTimeout: cfg.TransactionTimeout,
		Logger:             log,
	}
	if tweak != nil {
		tweak(&opt)
	}
	for _, spec := range cfg.Sources {
		a.sources = append(a.sources, source.New(spec, opt))
	}
	if a.telemetry, err = newTelemetry(a.sources); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(context.Background(), "tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	a.srv = &http.Server{
		Handler:           a.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return a, nil
}

// Addr returns the address the HTTP endpoints listen on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Sources returns the sources, in configuration order.
func (a *App) Sources() []*source.Source { return a.sources }

// Run ensures the checkpoint topic exists, runs every source until ctx ends, then stops them (each
// commits or aborts its open transaction) and the HTTP server.
func (a *App) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.srv.Serve(a.ln) }()
	a.log.Info("ingest listening", "addr", a.ln.Addr().String(), "sources", len(a.sources))

	var wg sync.WaitGroup
	srcCtx, stopSources := context.WithCancel(ctx)
	defer stopSources()
	wg.Go(func() {
		if !a.ensureCheckpointTopic(srcCtx) {
			return
		}
		a.ready.Store(true)
		for _, s := range a.sources {
			wg.Go(func() {
				if err := s.Run(srcCtx); err != nil {
					a.log.Warn("source stopped", "source", s.Name(), "err", err)
				}
			})
		}
	})

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("http server: %w", err)
	}
	a.log.Info("ingest shutting down")
	a.draining.Store(true)
	stopSources()
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := a.srv.Shutdown(sctx); serr != nil {
		_ = a.srv.Close()
	}
	if terr := a.telemetry.shutdown(sctx); terr != nil && !errors.Is(terr, context.DeadlineExceeded) {
		a.log.Warn("telemetry shutdown", "err", terr)
	}
	a.log.Info("ingest stopped")
	return err
}

// ensureCheckpointTopic creates the checkpoint topic if missing, retrying until it succeeds or ctx ends.
func (a *App) ensureCheckpointTopic(ctx context.Context) bool {
	cl, err := kgo.NewClient(a.kopts...)
	if err != nil {
		a.log.Error("kafka client", "err", err)
		return false
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		err := txn.EnsureTopic(ctx, adm, a.cfg.CheckpointTopic)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		a.log.Warn("cannot create the checkpoint topic; retrying", "topic", a.cfg.CheckpointTopic, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}
