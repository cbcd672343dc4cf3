package source

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/ingest/internal/txn"
)

// Options are the settings every source of a process shares.
type Options struct {
	// Kafka are the connection options (brokers, TLS, SASL, logger). Required.
	Kafka []kgo.Opt
	// CheckpointTopic is the compacted topic of checkpoints. Required.
	CheckpointTopic string
	// Checkpoints reads the source's checkpoint at each start (after the fence): the process's shared
	// txn.Store. Nil means each start reads the whole checkpoint topic (txn.ReadCheckpoint).
	Checkpoints txn.CheckpointReader
	// TransactionalIDPrefix is put before the source name to make its transactional id. Default
	// "ssegate-ingest-".
	TransactionalIDPrefix string
	// DeadLetterTopic receives a record for each oversized event. Empty means oversized events are
	// dropped and only counted.
	DeadLetterTopic string
	// CreateDeadLetterTopic says whether and how DeadLetterTopic is created when it does not exist. The
	// zero value means it is not.
	CreateDeadLetterTopic TopicCreation
	// CommitInterval is the longest a transaction stays open once it holds something. Default 100ms.
	CommitInterval time.Duration
	// CommitEvents commits a transaction once it holds this many events. Default 1000.
	CommitEvents int
	// BufferEvents is how many parsed events wait between the HTTP reader and the producer; when it is
	// full the body is not read. Default 1000.
	BufferEvents int
	// BufferBytes bounds the bytes of the records between the HTTP reader and Kafka: those waiting for the
	// producer and those of the open transaction, until it commits. When it is reached the body is not
	// read, and the open transaction commits early so the reader can go on. A record larger than the
	// bound passes alone. Default 4 MiB.
	BufferBytes int64
	// MaxEventBytes and MaxLineBytes cap one event's data and one line. Zero means the pkg/sse defaults
	// (4 MiB and 1 MiB).
	MaxEventBytes, MaxLineBytes int
	// IdleTimeout ends a connection that delivers no bytes for this long. Zero means never.
	IdleTimeout time.Duration
	// BackoffMin and BackoffMax bound the reconnection delay. Defaults 1s and 30s.
	BackoffMin, BackoffMax time.Duration
	// TransactionTimeout is the Kafka transaction timeout. Default 10s.
	TransactionTimeout time.Duration
	// HTTPClient makes the requests. Nil means a client without an overall timeout (streams are long)
	// whose transport waits at most 30s for response headers. Each source uses a copy whose CheckRedirect
	// applies the source's RedirectPolicy first, then the client's own CheckRedirect, if any.
	HTTPClient *http.Client
	// Logger receives the source's logs. Nil means slog.Default().
	Logger *slog.Logger
	// Tracer starts the spans of connection attempts, checkpoint reads and commits (trace.go). Nil means a
	// no-op tracer: no spans.
	Tracer trace.Tracer
	// OnCommit, when set, is called after each committed transaction with the source's name and how long the
	// commit took (flushing the records and the checkpoint, and ending the transaction). It must not block.
	// Nil means none.
	OnCommit func(source string, d time.Duration)
	// AbandonOnStop makes Run return at shutdown without committing or aborting the open transaction,
	// exactly as if the process had crashed. For tests of crash recovery only.
	AbandonOnStop bool
}

func (o *Options) defaults() {
	if o.TransactionalIDPrefix == "" {
		o.TransactionalIDPrefix = "ssegate-ingest-"
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = 100 * time.Millisecond
	}
	if o.CommitEvents <= 0 {
		o.CommitEvents = 1000
	}
	if o.BufferEvents <= 0 {
		o.BufferEvents = 1000
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.TransactionTimeout <= 0 {
		o.TransactionTimeout = 10 * time.Second
	}
	if o.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 30 * time.Second
		o.HTTPClient = &http.Client{Transport: tr}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Tracer == nil {
		o.Tracer = noop.NewTracerProvider().Tracer("")
	}
}

// DefaultBufferBytes is the default of Options.BufferBytes.
const DefaultBufferBytes = 4 << 20

// Stats are a source's counters, read by the metrics at scrape time.
type Stats struct {
	Connects     atomic.Int64 // requests made
	Bytes        atomic.Int64 // body bytes read
	Events       atomic.Int64 // events parsed
	Filtered     atomic.Int64 // events skipped by the event-type filter
	Records      atomic.Int64 // records committed to the target topic
	Oversized    atomic.Int64 // events over the size limits
	DeadLettered atomic.Int64 // dead-letter records committed
	Commits      atomic.Int64 // transactions committed
	Aborts       atomic.Int64 // transactions given up (aborted, or outcome unknown)
	// CommittedAt is when this process last committed the source's checkpoint, in Unix nanoseconds; zero
	// before its first commit.
	CommittedAt atomic.Int64
	Reconnects  [numReasons]atomic.Int64
}

// The states a source reports in its Status.
const (
	StateStarting   = "starting"   // fencing earlier producers, reading the checkpoint
	StateConnecting = "connecting" // the request is out
	StateStreaming  = "streaming"  // events are flowing
	StateBackoff    = "backoff"    // waiting before reconnecting
	StateStopped    = "stopped"    // Run returned
	// StateTopicMissing: a topic the source writes to does not exist and was not created (see
	// TopicMissingError); the source waits with a growing backoff and checks again, without connecting.
	StateTopicMissing = "topic-missing"
)

// Status is a snapshot of a source for GET /sources.
type Status struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// LastID is the last event id committed to Kafka.
	LastID string `json:"last_id"`
	// HasCheckpoint is false until the source has committed (or read) a checkpoint.
	HasCheckpoint bool      `json:"has_checkpoint"`
	LastError     string    `json:"last_error,omitempty"`
	LastReason    string    `json:"last_reason,omitempty"`
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`
}

// Source follows one SSE stream and writes its events to Kafka exactly once.
type Source struct {
	spec   Spec
	opt    Options
	client *http.Client // opt.HTTPClient with the spec's redirect policy
	log    *slog.Logger
	stats  Stats

	mu     sync.Mutex
	status Status
}

// New returns a Source; Run starts it.
func New(spec Spec, opt Options) *Source {
	opt.defaults()
	s := &Source{
		spec:   spec,
		opt:    opt,
		log:    opt.Logger.With("source", spec.Name),
		status: Status{Name: spec.Name, State: StateStopped},
	}
	s.client = s.httpClient()
	return s
}

// Name returns the source name.
func (s *Source) Name() string { return s.spec.Name }

// Stats returns the source's counters.
func (s *Source) Stats() *Stats { return &s.stats }

// Status returns a snapshot of the source's state.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Source) setState(state string) {
	s.mu.Lock()
	s.status.State = state
	s.mu.Unlock()
}

func (s *Source) setCommitted(id string) {
	s.mu.Lock()
	s.status.LastID, s.status.HasCheckpoint = id, true
	s.mu.Unlock()
}

func (s *Source) report(r Reason, err error) {
	s.mu.Lock()
	s.status.LastReason = r.String()
	if err != nil {
		s.status.LastError, s.status.LastErrorAt = err.Error(), time.Now()
	}
	s.mu.Unlock()
}

// Run follows the source until ctx ends (it then returns nil) or the server answers 204 (ErrNoContent).
// Every other failure is retried: a connection failure by reconnecting from the last committed id, a
// Kafka failure by building a new transactional producer, which fences the old one and reads the
// committed checkpoint again. Each start first checks that the topics the source writes to exist
// (creating them if allowed); while one is missing the source does not connect, reports
// StateTopicMissing and checks again with a growing backoff.
func (s *Source) Run(ctx context.Context) error {
	defer s.setState(StateStopped)
	bo := &backoff{min: s.opt.BackoffMin, max: s.opt.BackoffMax}
	s.setState(StateStarting)
	for {
		err := s.start(ctx, bo)
		if errors.Is(err, ErrNoContent) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		var missing *TopicMissingError
		if !errors.As(err, &missing) && errors.Is(err, kerr.UnknownTopicOrPartition) {
			// A topic went away while the source ran: say which one (or create it again, if allowed).
			if terr := s.ensureTopics(ctx); terr != nil {
				err = terr
			}
		}
		reason, state, msg := ReasonKafka, StateBackoff, "kafka failed; starting over from the committed checkpoint"
		if errors.As(err, &missing) {
			reason, state, msg = ReasonTopicMissing, StateTopicMissing, "a topic the source writes to is missing; checking again"
		}
		s.stats.Reconnects[reason].Add(1)
		s.report(reason, err)
		d := bo.next()
		s.log.Warn(msg, "reason", reason.String(), "err", err, "delay", d.String())
		s.setState(state)
		if !sleep(ctx, d) {
			return nil
		}
	}
}

// start runs the source once: check its topics, open the producer (fencing earlier ones, reading the
// checkpoint) and follow the stream until something fails.
func (s *Source) start(ctx context.Context, bo *backoff) error {
	// The state changes only once the topics are there: a source that is topic-missing stays so while it
	// checks again, so /readyz does not flicker to ready during each check.
	if err := s.ensureTopics(ctx); err != nil {
		return err
	}
	s.setState(StateStarting)
	var p *txn.Producer
	var cp txn.Checkpoint
	err := s.traceCheckpoint(ctx, func(ctx context.Context) (bool, string, error) {
		var err error
		p, cp, err = txn.Open(ctx, txn.Config{
			TransactionalID:    s.opt.TransactionalIDPrefix + s.spec.Name,
			CheckpointTopic:    s.opt.CheckpointTopic,
			Key:                s.spec.Name,
			TransactionTimeout: s.opt.TransactionTimeout,
			Opts:               s.opt.Kafka,
			Checkpoints:        s.opt.Checkpoints,
		})
		return cp.Found, cp.ID, err
	})
	if err != nil {
		return err
	}
	defer p.Close()
	if cp.Found {
		s.setCommitted(cp.ID)
	}
	return s.follow(ctx, p, cp, bo)
}

// follow runs connections with one producer until Kafka fails (the error is returned), the server
// answers 204 (ErrNoContent) or ctx ends (nil).
func (s *Source) follow(ctx context.Context, p *txn.Producer, cp txn.Checkpoint, bo *backoff) error {
	lastID := cp.ID
	if !cp.Found && s.spec.StartSet {
		lastID = s.spec.StartID
	}
	for {
		o := s.session(ctx, p, lastID)
		lastID = o.lastID
		if o.hasRetry {
			bo.retry, bo.hasRetry = o.retry, true
		}
		if o.events > 0 {
			bo.reset()
		}
		switch o.reason {
		case ReasonShutdown:
			if ctx.Err() != nil {
				return nil
			}
			// The connection was canceled by something other than shutdown; reconnect.
			o.reason = ReasonReadError
		case ReasonKafka:
			return o.err
		case ReasonNoContent:
			s.stats.Reconnects[ReasonNoContent].Add(1)
			s.report(ReasonNoContent, o.err)
			s.log.Info("server answered 204 No Content; the source stops")
			return ErrNoContent
		}
		s.stats.Reconnects[o.reason].Add(1)
		s.report(o.reason, o.err)
		d := bo.delay(o)
		level := slog.LevelWarn
		if o.reason == ReasonEndOfStream {
			level = slog.LevelInfo
		}
		s.log.Log(ctx, level, "reconnecting", "reason", o.reason.String(), "err", o.err, "delay", d.String(),
			"last_event_id", lastID)
		s.setState(StateBackoff)
		if !sleep(ctx, d) {
			return nil
		}
	}
}

// outcome is how one connection ended.
type outcome struct {
	reason     Reason
	err        error
	lastID     string        // the last committed id after the connection
	events     int           // events and id-only blocks read on the connection
	retry      time.Duration // the server's last retry: value, valid when hasRetry
	hasRetry   bool          // the server sent a valid retry: field (0 ms is one)
	retryAfter time.Duration // the Retry-After of a 429 or 5xx; zero means none
}

// item is what the reader hands the batching loop: a record to produce (nil for an event that writes
// nothing, such as a filtered one or an id-only block) and the stream's last event id after it.
type item struct {
	rec  *kgo.Record
	id   string
	size int64 // what rec counts against the buffer's byte bound (recordSize)
}

// session runs one connection: a reader goroutine parses the body into a bounded buffer (events and
// bytes), and this goroutine batches what it receives into transactions. The reader is owned here: it
// stops when the connection's context is canceled (or the body ends) and is joined before session
// returns.
func (s *Source) session(ctx context.Context, p *txn.Producer, lastID string) outcome {
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.setState(StateConnecting)
	spanCtx, span := s.startConnect(connCtx, lastID)
	resp, o := s.connect(spanCtx, lastID)
	endConnect(span, o)
	if resp == nil {
		o.lastID = lastID
		return o
	}
	defer func() { _ = resp.Body.Close() }()
	s.setState(StateStreaming)
	s.log.Info("connected", "last_event_id", lastID)

	buf := newBuffer(s.opt.BufferEvents, s.opt.BufferBytes)
	var rd outcome
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(buf.items)
		rd = s.read(connCtx, resp.Body, buf, lastID, cancel)
	})
	// The commits' spans link to the connection's.
	o = s.batch(trace.ContextWithSpanContext(ctx, span.SpanContext()), p, buf, lastID)
	cancel()
	wg.Wait()
	o.events, o.retry, o.hasRetry = rd.events, rd.retry, rd.hasRetry
	// batch reports only its own endings (Kafka, shutdown); otherwise the reader's says why the
	// connection ended.
	if o.reason != ReasonKafka && o.reason != ReasonShutdown {
		o.reason, o.err = rd.reason, rd.err
	}
	return o
}

// read parses the body and puts one item per event into buf until the body ends or ctx is canceled.
// Blocking on a full buffer (events or bytes) stops the reading of the body, which is the backpressure on
// the server.
//
// lastID is the id the connection asked for with Last-Event-ID. The parser starts from it: the WHATWG
// last event id belongs to the event source and outlives a connection, so an event without an id on
// this connection carries it, as in a browser, and the checkpoint never falls back to empty (which would
// make the next connection ask for the whole stream again). Id-only blocks come back as items without a
// record, so the id they set reaches the checkpoint.
func (s *Source) read(ctx context.Context, body io.Reader, buf *buffer, lastID string, cancel context.CancelFunc) outcome {
	ir := newIdleReader(body, s.opt.IdleTimeout, &s.stats.Bytes, cancel)
	defer ir.stop()
	p := sse.NewParser(ir, sse.WithMaxEventBytes(s.opt.MaxEventBytes), sse.WithMaxLineBytes(s.opt.MaxLineBytes),
		sse.WithLastEventID(lastID), sse.WithIDOnlyBlocks())
	var o outcome
	for {
		ev, err := p.Next()
		if d, ok := p.Retry(); ok {
			o.retry, o.hasRetry = d, true
		}
		var it item
		switch {
		case err == nil && ev.IDOnly():
			// No record, but the position moved: committed like a filtered event.
			o.events++
			it.id = ev.ID
		case err == nil:
			s.stats.Events.Add(1)
			o.events++
			it.id = ev.ID
			if !wanted(&s.spec, ev.Type) {
				s.stats.Filtered.Add(1)
				break
			}
			rec, err := toRecord(&s.spec, ev)
			if err != nil {
				// Only a JSON encoder failure gets here; the event is skipped like an oversized one.
				s.log.Error("cannot encode event", "err", err, "id", ev.ID)
				continue
			}
			it.rec = rec
		case errors.Is(err, sse.ErrEventTooLarge), errors.Is(err, sse.ErrLineTooLong):
			s.stats.Oversized.Add(1)
			s.log.Warn("oversized event", "err", err, "after_id", p.LastEventID(), "dead_letter", s.opt.DeadLetterTopic != "")
			if s.opt.DeadLetterTopic == "" {
				continue
			}
			it = item{rec: s.deadLetter(p.LastEventID(), err), id: p.LastEventID()}
		default:
			switch {
			case errors.Is(err, errIdle):
				o.reason = ReasonIdleTimeout
			case ctx.Err() != nil:
				o.reason = ReasonShutdown
			case errors.Is(err, io.EOF):
				o.reason = ReasonEndOfStream
			default:
				o.reason = ReasonReadError
			}
			o.err = err
			return o
		}
		it.size = recordSize(it.rec)
		if !buf.put(ctx, it) {
			o.reason = ReasonShutdown
			if ir.fired.Load() {
				o.reason, o.err = ReasonIdleTimeout, errIdle
			}
			return o
		}
	}
}
