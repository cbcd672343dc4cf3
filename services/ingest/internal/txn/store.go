package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckpointReader returns a source's committed checkpoint as of the moment it is asked: Open calls it
// after fencing, so no transaction of the source can still commit a later one.
type CheckpointReader interface {
	// Get returns the last checkpoint committed for key, read_committed, up to the end offsets of the
	// checkpoint topic taken when Get is called.
	Get(ctx context.Context, key string) (Checkpoint, error)
}

// topicReader is the CheckpointReader of a Producer opened without one: every Get reads the whole
// checkpoint topic (ReadCheckpoint).
type topicReader struct {
	opts  []kgo.Opt
	topic string
}

// Get reads the topic from its start.
func (r topicReader) Get(ctx context.Context, key string) (Checkpoint, error) {
	return ReadCheckpoint(ctx, r.opts, r.topic, key)
}

// Store follows the checkpoint topic for a whole process, so that its sources get their checkpoints from
// one read of the topic instead of each reading it from the start at every start (a restart of many busy
// sources then read the topic, gigabytes before compaction, once per source).
//
// Run reads every partition from its start, read_committed, and then keeps following the topic, keeping
// the last value of each key it was asked to follow. Get lists the topic's end offsets at the moment it is
// called and waits until Run has read every partition up to them, then answers from memory. That is
// exactly what ReadCheckpoint answers, for the same reasons: Get is called after the source's producer
// fenced its predecessors (so nothing of theirs can commit later), the end offsets include every record and
// marker of their transactions, and a read_committed reader past those offsets has seen each committed
// checkpoint and none of the aborted ones. Because Get always asks for the current end offsets, a
// checkpoint is never stale, whether the source starts with the process, restarts after a Kafka failure
// (fenced and opened again), or acquires its lease long after the process started, from a replica that
// committed meanwhile: the store has followed the topic all along and only waits for what was appended
// since.
//
// Like ReadCheckpoint, Get waits for transactions that other sources hold open at the moment it is
// called, which takes at most their commit interval, or the transaction timeout for a crashed one.
//
// Concurrency: Run is called once, on a goroutine of its own, and returns when its context ends. Get may be
// called from any goroutine, before Run starts (it waits) and concurrently; it fails once Run has
// returned. The fields below mu are guarded by it; Run's client is set before started is closed and never
// changed after.
type Store struct {
	opts  []kgo.Opt
	topic string
	keys  map[string]bool // the keys to keep; nil keeps every key
	log   *slog.Logger

	started chan struct{} // closed once Run has made its client (or failed to)
	stopped chan struct{} // closed when Run returns
	cl      *kgo.Client   // Run's client, set before started is closed; nil if it could not be made

	mu     sync.Mutex
	vals   map[string]Checkpoint // the last committed checkpoint read per key; absent: none, or a tombstone
	bad    map[string]error      // keys whose last value was not a checkpoint
	next   map[int32]int64       // per partition: one past the last offset read, control records included
	moved  chan struct{}         // closed (and replaced) whenever Run has read more
	errSeq int                   // counts fetch errors, so that Get reports only those after it began
	err    error                 // the last fetch error, or why Run stopped
}

// storeFetchWait is the longest a fetch of the Store waits on the broker for new records.
const storeFetchWait = 500 * time.Millisecond

// NewStore returns a Store of the checkpoint topic that keeps the values of keys (nil: every key). opts are
// the connection options. It does not contact Kafka; Run does.
func NewStore(opts []kgo.Opt, topic string, keys []string, log *slog.Logger) *Store {
	s := &Store{
		opts: opts, topic: topic, log: log,
		started: make(chan struct{}), stopped: make(chan struct{}),
		vals: map[string]Checkpoint{}, bad: map[string]error{}, next: map[int32]int64{}, moved: make(chan struct{}),
	}
	if keys != nil {
		s.keys = make(map[string]bool, len(keys))
		for _, k := range keys {
			s.keys[k] = true
		}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Run reads the checkpoint topic from its start and follows it until ctx ends. It returns nil then, or the
// error that kept it from starting.
func (s *Store) Run(ctx context.Context) error {
	defer close(s.stopped)
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, s.opts...),
		kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers count as read, so that a partition whose log ends with one (a log written
		// by transactions always does) is known to be read to its end.
		kgo.KeepControlRecords(),
		// A partition whose start offset is resolved while a fetch is waiting on the broker joins the next
		// fetch only; with the default wait of 5s a Get could wait that long for a partition that has data.
		// An idle topic costs a fetch every FetchMaxWait.
		kgo.FetchMaxWait(storeFetchWait),
	)...)
	if err != nil {
		s.stop(fmt.Errorf("%w: new client: %w", ErrCheckpoint, err))
		close(s.started)
		return err
	}
	s.cl = cl
	close(s.started)
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			s.stop(fmt.Errorf("%w: the checkpoint store stopped", ErrCheckpoint))
			return nil
		}
		s.apply(fs)
	}
}

// stop records why Run ended and wakes every Get.
func (s *Store) stop(err error) {
	s.mu.Lock()
	s.err = err
	s.errSeq++
	s.wakeLocked()
	s.mu.Unlock()
}

// wakeLocked wakes the Gets waiting for progress. It must be called with mu held.
func (s *Store) wakeLocked() {
	close(s.moved)
	s.moved = make(chan struct{})
}

// apply takes in what one poll fetched.
func (s *Store) apply(fs kgo.Fetches) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		s.err = fmt.Errorf("%w: fetch %s/%d: %w", ErrCheckpoint, t, p, err)
		s.errSeq++
		s.log.Warn("reading the checkpoint topic failed; retrying", "topic", t, "partition", p, "err", err)
	})
	fs.EachRecord(func(r *kgo.Record) {
		if r.Offset+1 > s.next[r.Partition] {
			s.next[r.Partition] = r.Offset + 1
		}
		key := string(r.Key)
		if r.Attrs.IsControl() || s.keys != nil && !s.keys[key] {
			return
		}
		delete(s.bad, key)
		if r.Value == nil {
			delete(s.vals, key) // a tombstone resets the source
			return
		}
		var c Checkpoint
		if err := json.Unmarshal(r.Value, &c); err != nil {
			s.bad[key] = fmt.Errorf("%w: %s/%d@%d: %w", ErrCheckpoint, r.Topic, r.Partition, r.Offset, err)
			delete(s.vals, key)
			return
		}
		c.Found = true
		s.vals[key] = c
	})
	s.wakeLocked()
}

// Get returns the last checkpoint committed for key up to the end offsets of the topic at the time of the
// call, waiting until Run has read that far. It fails when ctx ends, when Run has stopped, when a fetch
// fails while it waits, and for a key the Store was not asked to keep.
func (s *Store) Get(ctx context.Context, key string) (Checkpoint, error) {
	if s.keys != nil && !s.keys[key] {
		return Checkpoint{}, fmt.Errorf("%w: the checkpoint store does not keep key %q", ErrCheckpoint, key)
	}
	select {
	case <-s.started:
	case <-ctx.Done():
		return Checkpoint{}, fmt.Errorf("%w: %w", ErrCheckpoint, ctx.Err())
	}
	if s.cl == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return Checkpoint{}, s.err
	}
	s.mu.Lock()
	seq := s.errSeq
	s.mu.Unlock()
	// kadm shares Run's client for this request; it must not be closed.
	ends, err := kadm.NewClient(s.cl).ListEndOffsets(ctx, s.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: end offsets of %s: %w", ErrCheckpoint, s.topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	refreshed := false
	for {
		s.mu.Lock()
		behind, unknown := false, false
		for p, end := range want {
			n, ok := s.next[p]
			behind = behind || n < end
			unknown = unknown || !ok
		}
		if !behind {
			cp, bad := s.vals[key], s.bad[key]
			s.mu.Unlock()
			return cp, bad
		}
		moved, errSeq, ferr := s.moved, s.errSeq, s.err
		s.mu.Unlock()
		select {
		case <-s.stopped:
			return Checkpoint{}, ferr
		default:
		}
		if errSeq != seq {
			return Checkpoint{}, ferr
		}
		if unknown && !refreshed {
			// A partition Run has read nothing of: it may have been added after Run's last metadata
			// refresh, which would otherwise pick it up only minutes later.
			s.cl.ForceMetadataRefresh()
			refreshed = true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return Checkpoint{}, fmt.Errorf("%w: reading %s: %w", ErrCheckpoint, s.topic, ctx.Err())
		}
	}
}
