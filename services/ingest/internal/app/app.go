package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	tel "github.com/ssegate/ssegate/pkg/telemetry"
	"github.com/ssegate/ssegate/services/ingest/internal/lease"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
	"github.com/ssegate/ssegate/services/ingest/internal/txn"
)

// App is a running ingest service.
type App struct {
	cfg       Config
	opts      Options
	log       *slog.Logger
	kopts     []kgo.Opt
	sources   []*source.Source
	held      []atomic.Bool // held[i]: this replica holds sources[i]'s lease and runs it
	owner     string
	leases    lease.Manager
	store     *txn.Store    // the checkpoint topic, read once for every source of the process
	shared    bool          // leases are in Redis, shared with other replicas
	rdb       *redis.Client // nil without Redis
	telemetry *telemetry
	// tracing exports spans (a no-op provider without otlp-endpoint); observeHTTP counts HTTP answers.
	tracing     *tel.Tracing
	observeHTTP gin.HandlerFunc
	ln          net.Listener
	srv         *http.Server
	ready       atomic.Bool
	draining    atomic.Bool
}

// Options are hooks for tests. The zero value is what New uses.
type Options struct {
	// Source may change each source's options (tests use it to simulate crashes with
	// source.Options.AbandonOnStop). Nil means none.
	Source func(*source.Options)
	// Owner names this replica in /sources and in its Redis lease values. Empty means "<hostname>/<pid>".
	Owner string
	// AbandonLeases makes Run return without releasing the leases it holds, as a crash would: other
	// replicas get the sources only once the leases expire.
	AbandonLeases bool
	// Kafka are client options added to every Kafka client of the service (tests add hooks that count
	// what is fetched). Nil means none.
	Kafka []kgo.Opt
}

// New builds the service from a validated configuration and binds its listener, so that a busy port
// fails here. It does not contact Kafka, Redis or any source; Run does.
func New(cfg Config, log *slog.Logger) (*App, error) {
	return NewWithOptions(cfg, log, Options{})
}

// NewWithOptions is New with test hooks.
func NewWithOptions(cfg Config, log *slog.Logger, o Options) (*App, error) {
	kopts, err := cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	kopts = append(kopts, kgo.WithLogger(kafkaconn.Logger(log.With("component", "kafka"), kgo.LogLevelWarn)))
	kopts = append(kopts, o.Kafka...)
	owner := o.Owner
	if owner == "" {
		host, _ := os.Hostname()
		owner = host + "/" + strconv.Itoa(os.Getpid())
	}
	a := &App{cfg: cfg, opts: o, log: log, kopts: kopts, owner: owner}
	if cfg.Redis.Addr == "" {
		a.leases = lease.NewLocal(owner)
	} else {
		a.shared = true
		a.rdb = redis.NewClient(&redis.Options{
			Addr: cfg.Redis.Addr, CredentialsProviderContext: cfg.Redis.Credentials(), DB: cfg.Redis.DB,
			// Renewals carry a deadline before the lease can expire; the client must honor it.
			ContextTimeoutEnabled: true,
		})
		a.leases, err = lease.NewRedis(a.rdb, lease.WithDuration(cfg.LeaseDuration), lease.WithPrefix(cfg.LeaseKeyPrefix),
			lease.WithOwner(owner), lease.WithLogger(log.With("component", "lease")))
		if err != nil {
			_ = a.rdb.Close()
			return nil, err
		}
	}
	names := make([]string, len(cfg.Sources))
	for i, spec := range cfg.Sources {
		names[i] = spec.Name
	}
	a.store = txn.NewStore(kopts, cfg.CheckpointTopic, names, log.With("component", "checkpoints"))
	res, err := tel.Resource(tel.Ingest)
	if err != nil {
		a.closeRedis()
		return nil, err
	}
	if a.tracing, err = tel.NewTracing(cfg.OTLPEndpoint, res); err != nil {
		a.closeRedis()
		return nil, err
	}
	// Set once the histograms exist, before any source runs.
	var onCommit func(string, time.Duration)
	opt := source.Options{
		Tracer:                a.tracing.Provider.Tracer(instrumentation, trace.WithInstrumentationVersion(tel.Version())),
		OnCommit:              func(src string, d time.Duration) { onCommit(src, d) },
		Kafka:                 kopts,
		Checkpoints:           a.store,
		CheckpointTopic:       cfg.CheckpointTopic,
		DeadLetterTopic:       cfg.DeadLetterTopic,
		CreateDeadLetterTopic: cfg.topicCreation(),
		CommitInterval:        cfg.CommitInterval,
		CommitEvents:          cfg.CommitEvents,
		BufferEvents:          cfg.BufferEvents,
		BufferBytes:           cfg.BufferBytes,
		MaxEventBytes:         int(cfg.MaxEventBytes),
		MaxLineBytes:          int(cfg.MaxLineBytes),
		IdleTimeout:           cfg.IdleTimeout,
		BackoffMin:            cfg.BackoffMin,
		BackoffMax:            cfg.BackoffMax,
		TransactionTimeout:    cfg.TransactionTimeout,
		Logger:                log,
	}
	if o.Source != nil {
		o.Source(&opt)
	}
	for _, spec := range cfg.Sources {
		a.sources = append(a.sources, source.New(spec, opt))
	}
	a.held = make([]atomic.Bool, len(a.sources))
	fail := func(err error) (*App, error) {
		a.closeRedis()
		_ = a.tracing.Shutdown(context.Background())
		return nil, err
	}
	if a.telemetry, err = newTelemetry(res, a.sources, a.held, a.shared); err != nil {
		return fail(err)
	}
	if onCommit, a.observeHTTP, err = a.telemetry.registerFlow(a.sources, cfg.Sources, cfg.DeadLetterTopic); err != nil {
		return fail(err)
	}
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(context.Background(), "tcp", cfg.Listen); err != nil {
		return fail(fmt.Errorf("listen on %s: %w", cfg.Listen, err))
	}
	a.srv = &http.Server{
		Handler:           a.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	if ap, err := netip.ParseAddrPort(a.ln.Addr().String()); cfg.httpToken().IsZero() && (err != nil || !ap.Addr().IsLoopback()) {
		log.Warn("the HTTP endpoints (/sources, /metrics) are open to the network without a token: set http-token, or listen on loopback",
			"addr", a.ln.Addr().String())
	}
	return a, nil
}

// Addr returns the address the HTTP endpoints listen on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Sources returns the sources, in configuration order.
func (a *App) Sources() []*source.Source { return a.sources }

// Owned reports, for each source in configuration order, whether this replica holds its lease and runs it.
func (a *App) Owned() []bool {
	out := make([]bool, len(a.held))
	for i := range a.held {
		out[i] = a.held[i].Load()
	}
	return out
}

// Run ensures the checkpoint topic exists, starts the checkpoint store, runs every source whose lease it
// holds until ctx ends, then
// stops them (each commits or aborts its open transaction), releases their leases, and stops the HTTP
// server.
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
		// One read of the checkpoint topic for every source; each source's start waits in Store.Get until
		// the store has read up to the end offsets of that moment.
		wg.Go(func() {
			if err := a.store.Run(srcCtx); err != nil {
				a.log.Error("cannot read the checkpoint topic", "err", err)
			}
		})
		a.ready.Store(true)
		for i, s := range a.sources {
			wg.Go(func() { a.runSource(srcCtx, i, s) })
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
	a.closeRedis()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := a.srv.Shutdown(sctx); serr != nil {
		_ = a.srv.Close()
	}
	if terr := a.telemetry.shutdown(sctx); terr != nil && !errors.Is(terr, context.DeadlineExceeded) {
		a.log.Warn("telemetry shutdown", "err", terr)
	}
	if terr := a.tracing.Shutdown(sctx); terr != nil {
		a.log.Warn("tracing shutdown", "err", terr)
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

// runSource runs s whenever this replica holds its lease, until ctx ends: acquire (at once without Redis),
// run until ctx ends or the lease is lost, and start over after a loss.
func (a *App) runSource(ctx context.Context, i int, s *source.Source) {
	log := a.log.With("source", s.Name())
	for {
		l, err := a.leases.Acquire(ctx, s.Name())
		if err != nil {
			return // ctx ended
		}
		if a.shared {
			log.Info("source lease acquired; running it", "owner", a.owner)
		}
		a.held[i].Store(true)
		a.runHeld(ctx, s, l, log)
		a.held[i].Store(false)
		if ctx.Err() != nil {
			// Shutdown: the source has ended its transaction, so the next owner can start at once.
			if a.opts.AbandonLeases {
				l.Abandon()
				return
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := l.Release(rctx); err != nil && a.shared {
				log.Warn("cannot release the source lease; it expires by itself", "err", err)
			}
			cancel()
			return
		}
		// Lost: the key may still be ours if Redis was only slow; giving it back helps the next owner.
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = l.Release(rctx)
		cancel()
		log.Warn("source lease lost; stopped the source and waiting to acquire it again")
	}
}

// runHeld runs s until ctx ends or l is lost. Losing the lease cancels the source at once; it then ends
// its transaction as at a shutdown (if another replica has fenced it already, that fails harmlessly).
func (a *App) runHeld(ctx context.Context, s *source.Source, l lease.Lease, log *slog.Logger) {
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		select {
		case <-l.Lost():
			cancel()
		case <-runCtx.Done():
		}
	})
	err := s.Run(runCtx)
	switch {
	case errors.Is(err, source.ErrNoContent):
		// Stopped for good: keep the lease, so that no other replica restarts the source, until shutdown
		// or until the lease is lost.
		log.Warn("source stopped", "err", err)
		<-runCtx.Done()
	case err != nil:
		log.Warn("source stopped", "err", err)
	}
}

// closeRedis closes the Redis client, if any.
func (a *App) closeRedis() {
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
}
