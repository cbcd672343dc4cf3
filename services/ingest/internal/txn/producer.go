package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is what Open needs for one source.
type Config struct {
	// TransactionalID identifies the source's producer across restarts and replicas; a new Open with the
	// same id fences the previous one. Required.
	TransactionalID string
	// CheckpointTopic is the compacted topic holding checkpoints. Required.
	CheckpointTopic string
	// Key is the checkpoint record key: the source name. Required.
	Key string
	// TransactionTimeout is how long the broker lets a transaction stay open before aborting it, which
	// also bounds how long a crashed producer can hold back read_committed consumers. Zero means 10s.
	TransactionTimeout time.Duration
	// Opts are the connection options (brokers, TLS, SASL, logger).
	Opts []kgo.Opt
	// Checkpoints reads the checkpoint after the fence, usually a Store shared by every source of the
	// process. Nil means Open reads the whole checkpoint topic itself (ReadCheckpoint).
	Checkpoints CheckpointReader
}

// Checkpoint is a source's committed position.
type Checkpoint struct {
	// ID is the last event id committed with the source's records. It may be empty.
	ID string `json:"id"`
	// Found is false when the source has never committed.
	Found bool `json:"-"`
}

// Producer is one source's transactional producer.
type Producer struct {
	cl    *kgo.Client
	cfg   Config
	inTxn bool
	n     int // records added in the open transaction

	mu       sync.Mutex
	firstErr error
	tooLarge []*kgo.Record // records of the open transaction refused as too large; guarded by mu
}

// Open creates the source's transactional client, fences earlier producers with the same transactional
// id, and only then reads the source's checkpoint (read_committed) through cfg.Checkpoints.
func Open(ctx context.Context, cfg Config) (*Producer, Checkpoint, error) {
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = 10 * time.Second
	}
	opts := append([]kgo.Opt{}, cfg.Opts...)
	opts = append(opts,
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		// A record that cannot be delivered within a transaction's lifetime cannot commit anyway.
		kgo.RecordDeliveryTimeout(cfg.TransactionTimeout),
		kgo.ProducerLinger(0),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, Checkpoint{}, fmt.Errorf("txn: new client: %w", err)
	}
	// InitProducerId: bumps the epoch for this transactional id, so an older producer (a crashed process,
	// a replica that lost its lease) can no longer commit, and aborts the transaction it left open. It
	// must happen before the checkpoint is read, or that open transaction could still commit afterwards.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, Checkpoint{}, fmt.Errorf("txn: init producer id %s: %w", cfg.TransactionalID, err)
	}
	checkpoints := cfg.Checkpoints
	if checkpoints == nil {
		checkpoints = topicReader{opts: cfg.Opts, topic: cfg.CheckpointTopic}
	}
	cp, err := checkpoints.Get(ctx, cfg.Key)
	if err != nil {
		cl.Close()
		return nil, Checkpoint{}, err
	}
	return &Producer{cl: cl, cfg: cfg}, cp, nil
}

// Add produces rec in the open transaction, beginning one if needed. It does not wait for the broker;
// Commit does.
func (p *Producer) Add(ctx context.Context, rec *kgo.Record) error {
	if err := p.begin(); err != nil {
		return err
	}
	p.n++
	p.cl.Produce(ctx, rec, p.promise)
	return nil
}

// Pending returns how many records the open transaction holds.
func (p *Producer) Pending() int { return p.n }

func (p *Producer) begin() error {
	if p.inTxn {
		return nil
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("txn: begin: %w", err)
	}
	p.inTxn = true
	p.n = 0
	p.mu.Lock()
	p.firstErr = nil
	p.tooLarge = nil
	p.mu.Unlock()
	return nil
}

func (p *Producer) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	if p.firstErr == nil {
		p.firstErr = err
	}
	if IsTooLarge(err) {
		p.tooLarge = append(p.tooLarge, r)
	}
	p.mu.Unlock()
}

// IsTooLarge reports whether err says a record (or the batch holding it) is over a size limit of the
// broker or topic (max.message.bytes): retrying the same record cannot succeed.
func IsTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// TooLarge returns the records of the open (failed) transaction that were refused as too large. The
// broker refuses a whole batch, so these are suspects: the culprit is among them, but small records sent
// in the same batch are refused with it. Send tells them apart.
func (p *Producer) TooLarge() []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*kgo.Record(nil), p.tooLarge...)
}

// Send produces rec in the open transaction alone in its batch and waits for it: it flushes what is
// buffered first, then rec. It returns the first produce error of the transaction so far (wrapped in
// ErrProduce), which after a refusal of rec alone says that rec itself is too large.
func (p *Producer) Send(ctx context.Context, rec *kgo.Record) error {
	if err := p.begin(); err != nil {
		return err
	}
	for _, r := range []*kgo.Record{nil, rec} {
		if r != nil {
			p.n++
			p.cl.Produce(ctx, r, p.promise)
		}
		if err := p.cl.Flush(ctx); err != nil {
			return fmt.Errorf("txn: flush: %w", err)
		}
		p.mu.Lock()
		perr := p.firstErr
		p.mu.Unlock()
		if perr != nil {
			return fmt.Errorf("%w: %w", ErrProduce, perr)
		}
	}
	return nil
}

// Commit writes the checkpoint id in the open transaction (beginning one if there is none, so an id that
// moved past filtered events is saved too), waits for every record and commits. On error the outcome is
// unknown: close the Producer and Open again.
func (p *Producer) Commit(ctx context.Context, id string) error {
	if err := p.begin(); err != nil {
		return err
	}
	val, err := json.Marshal(Checkpoint{ID: id})
	if err != nil {
		return fmt.Errorf("txn: encode checkpoint: %w", err)
	}
	p.cl.Produce(ctx, &kgo.Record{Topic: p.cfg.CheckpointTopic, Key: []byte(p.cfg.Key), Value: val}, p.promise)
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("txn: flush: %w", err)
	}
	p.mu.Lock()
	perr := p.firstErr
	p.mu.Unlock()
	if perr != nil {
		return fmt.Errorf("%w: %w", ErrProduce, perr)
	}
	p.inTxn = false
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("txn: commit: %w", err)
	}
	p.n = 0
	return nil
}

// Abort aborts the open transaction, if any, dropping records not yet sent.
func (p *Producer) Abort(ctx context.Context) error {
	if !p.inTxn {
		return nil
	}
	p.inTxn = false
	p.n = 0
	if err := p.cl.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("txn: abort buffered records: %w", err)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("txn: abort: %w", err)
	}
	return nil
}

// Close closes the client without ending an open transaction: the next Open with the same transactional
// id (or the broker's transaction timeout) aborts it. Call Abort first for a clean stop.
func (p *Producer) Close() { p.cl.Close() }
