package main

import (
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Stream shapes (--shape, steady only): what each connection asks the gateway for besides the topic.
//
//   - plain: every record. The ids alone check it (tracker).
//   - filter: connection i asks for filter=int(value.seq) % F == i mod F (F is --filter-mod, default the
//     connections: a distinct filter per connection). The ids skip the records passed over, so the values
//     check it: the client must get exactly the seqs of its class produced in the run, each once.
//   - conflate: conflate=D (--conflate). The ids skip superseded records and still reach the topic's end; the
//     values check that no key's final value is lost and that no key's values come twice or out of order.
//   - snapshot: from=snapshot. The snapshot (each key's latest record of what the topic held, --prefill-records
//     for instance) skips offsets until "live"; from there the ids judge it as a plain stream. The time from
//     the request to live is measured.
const (
	shapePlain    = "plain"
	shapeFilter   = "filter"
	shapeConflate = "conflate"
	shapeSnapshot = "snapshot"
)

// filterMod is F of the filter shape.
func (c config) filterMod() int {
	if c.FilterMod > 0 {
		return c.FilterMod
	}
	return c.Connections
}

// shapeQuery adds connection i's shape parameters to q.
func (c config) shapeQuery(q url.Values, i int) {
	switch c.Shape {
	case shapeFilter:
		q.Set("filter", fmt.Sprintf("int(value.seq) %% %d == %d", c.filterMod(), i%c.filterMod()))
	case shapeConflate:
		q.Set("conflate", c.Conflate.String())
	case shapeSnapshot:
		q.Set("from", "snapshot")
	}
}

// maxShapeSeqs bounds a filter client's bitmap (2 MiB): more records of its class than one run produces.
const maxShapeSeqs = 1 << 24

// shapeCheck checks one client's records by the seq in their values, for the shapes whose ids skip records on
// purpose. Its methods lock mu: the connection's goroutine records, the coordinator reads.
type shapeCheck struct {
	mu    sync.Mutex
	shape string
	// filter: the client's class (seq mod mod == rem); got marks the seqs received, by seq/mod, from first/mod.
	mod, rem int64
	got      []uint64
	// conflate: last is the highest seq received per key (k-<seq mod keys>), -1 for none.
	keys int64
	last []int64
	// The run's seqs are [first, end): end is set once producing has stopped (-1 before).
	first, end int64
	doneAt     time.Time // filter: when the client had every record it is owed (zero until then)
	openedAt   time.Time // snapshot: when the stream's opening block came
	liveAt     time.Time // snapshot: when "live" came (zero until then)
	state      int64     // snapshot: frames before live
	unique     int64     // filter: seqs of its class received, each counted once
	dup        int64     // a seq received again, or (conflate) a key's seq not above the one before
	wrong      int64     // filter: a seq of another class; either: a value without a seq, or one outside the run
}

func newShapeCheck(c config, i int) *shapeCheck {
	s := &shapeCheck{shape: c.Shape, end: -1}
	switch c.Shape {
	case shapeFilter:
		s.mod, s.rem = int64(c.filterMod()), int64(i%c.filterMod())
	case shapeSnapshot:
	case shapeConflate:
		s.keys = int64(c.Keys)
		s.last = make([]int64, c.Keys)
		for k := range s.last {
			s.last[k] = -1
		}
	default:
		return nil
	}
	return s
}

// record takes one record's value.
func (s *shapeCheck) record(data string) {
	if s.shape == shapeSnapshot {
		// Before live, the topic's state; after it, every record, judged by the ids: the run's, and records
		// written before it that the gateway read after the stream's cut (a prefill the tool just wrote).
		s.mu.Lock()
		if s.liveAt.IsZero() {
			s.state++
		}
		s.mu.Unlock()
		return
	}
	seq, ok := valueSeq(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || seq < s.first || (s.end >= 0 && seq >= s.end) {
		s.wrong++
		return
	}
	if s.shape == shapeConflate {
		k := seq % s.keys
		if seq <= s.last[k] {
			s.dup++
			return
		}
		s.last[k] = seq
		return
	}
	if seq%s.mod != s.rem {
		s.wrong++
		return
	}
	i := (seq - s.first) / s.mod
	if i >= maxShapeSeqs {
		s.wrong++ // not a seq this run could reach
		return
	}
	for int(i/64) >= len(s.got) {
		s.got = append(s.got, 0)
	}
	if s.got[i/64]&(1<<(i%64)) != 0 {
		s.dup++
		return
	}
	s.got[i/64] |= 1 << (i % 64)
	s.unique++
	s.stampDone()
}

// stampDone stamps doneAt when a filter client has everything it is owed. The caller holds mu.
func (s *shapeCheck) stampDone() {
	if s.doneAt.IsZero() && s.end >= 0 && s.unique >= s.owed() {
		s.doneAt = time.Now()
	}
}

// start sets the first seq of the run, before producing starts.
func (s *shapeCheck) start(first int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.first = first
}

// ended sets the end of the run's seqs, once producing has stopped.
func (s *shapeCheck) ended(end int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end = end
	if s.shape != shapeFilter {
		return
	}
	// Seqs past the end that came before it was known are not the run's: counted again without them.
	within := int64(0)
	for i := range min(s.owed(), int64(len(s.got))*64) {
		within += int64(s.got[i/64] >> (i % 64) & 1)
	}
	s.wrong += s.unique - within
	s.unique = within
	s.stampDone()
}

// skipsTail says whether the client's ids may stop short of the topic's end: a filter client's last id is
// that of the last record it passed, not of records passed over after it.
func (s *shapeCheck) skipsTail() bool { return s != nil && s.shape == shapeFilter }

// reachedAt is when a client had every record of the run it must get: for a filter client by the values, for
// the others by the ids (the tracker's target).
func (c *client) reachedAt() time.Time {
	if c.sc.skipsTail() {
		c.sc.mu.Lock()
		defer c.sc.mu.Unlock()
		return c.sc.doneAt
	}
	return c.tr.reached()
}

// caughtUp says whether a client has everything below ends it must get (see reachedAt).
func (c *client) caughtUp(ends []int64) bool {
	if c.sc.skipsTail() {
		return c.sc.complete()
	}
	return c.tr.caughtUp(ends)
}

// owed is how many records of the run a filter client must get: the seqs in [first, end) of its class.
func (s *shapeCheck) owed() int64 {
	n := int64(0)
	if lo := s.first + (s.rem-s.first%s.mod+s.mod)%s.mod; lo < s.end {
		n = (s.end-1-lo)/s.mod + 1
	}
	return n
}

// complete says whether a filter client has every record it is owed (always true for the other shapes, which
// the ids judge).
func (s *shapeCheck) complete() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shape != shapeFilter || (s.end >= 0 && s.unique >= s.owed())
}

// lost counts, once the client has stopped: for a filter, the records of its class it never got; for
// conflation, the keys whose final value of the run (their highest seq below end) it never got.
func (s *shapeCheck) lost() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.shape {
	case shapeFilter:
		return s.owed() - s.unique
	case shapeSnapshot:
		return 0 // the ids judge it (tracker)
	}
	var n int64
	for k, got := range s.last {
		final := s.end - 1 - ((s.end-1-int64(k))%s.keys+s.keys)%s.keys // the highest seq < end of key k
		if final >= s.first && got != final {
			n++
		}
	}
	return n
}

// counts returns dup and wrong.
func (s *shapeCheck) counts() (dup, wrong int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dup, s.wrong
}

// valueSeq extracts "seq" from a value the tool produced ({"ts":<n>,"seq":<n>,...}), without a JSON decoder.
func valueSeq(data string) (int64, bool) {
	const key = `,"seq":`
	if len(data) < len(valuePrefix) || data[:len(valuePrefix)] != valuePrefix {
		return 0, false
	}
	i := len(valuePrefix)
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	if len(data)-i < len(key) || data[i:i+len(key)] != key {
		return 0, false
	}
	i += len(key)
	j := i
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(data[i:j], 10, 64)
	return n, err == nil
}

// live marks that a snapshot stream's "live" came at now.
func (s *shapeCheck) live(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.liveAt.IsZero() {
		s.liveAt = now
	}
}

// snapshotAt returns when the stream opened, when live came and how many frames of state came before it.
func (s *shapeCheck) snapshotAt() (opened, live time.Time, state int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openedAt, s.liveAt, s.state
}

// opened marks that the stream's opening block came at now (the first one: steady streams do not reconnect).
func (s *shapeCheck) opened(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.openedAt.IsZero() {
		s.openedAt = now
	}
}

// shapeStats is what a shaped run's clients got, per client and second of producing.
type shapeStats struct {
	Shape             string  `json:"shape"`
	Query             string  `json:"query"` // connection 0's shape parameters, as sent
	FramesPerClientPS float64 `json:"frames_per_client_per_s"`
	BytesPerClientPS  float64 `json:"bytes_per_client_per_s"`
	Wrong             int64   `json:"wrong"`
	// Snapshot: the time from each stream's opening block to its live event, the frames of state before it (on
	// average), and the clients that never got live.
	ToLive      *latency `json:"to_live,omitempty"`
	StateFrames float64  `json:"state_frames_per_client,omitempty"`
	NoLive      int      `json:"no_live,omitempty"`
}

// shapeResult fills the run's shape statistics and adds the value checks' losses and duplicates to the result.
func (r *runner) shapeResult(elapsed time.Duration) {
	if r.cfg.Shape == shapePlain || r.cfg.Shape == "" {
		return
	}
	q := url.Values{}
	r.cfg.shapeQuery(q, 0)
	st := &shapeStats{Shape: r.cfg.Shape, Query: q.Encode()}
	if n := float64(len(r.clients)); n > 0 && elapsed > 0 {
		st.FramesPerClientPS = float64(r.sh.frames.Load()) / n / elapsed.Seconds()
		st.BytesPerClientPS = float64(r.sh.bodyBytes.Load()) / n / elapsed.Seconds()
	}
	var toLive *histogram
	var state int64
	if r.cfg.Shape == shapeSnapshot {
		toLive = new(histogram)
	}
	for _, c := range r.clients {
		if c.sc == nil {
			continue
		}
		if toLive != nil {
			opened, at, n := c.sc.snapshotAt()
			state += n
			if at.IsZero() {
				st.NoLive++
			} else {
				toLive.Record(at.Sub(opened))
			}
		}
		dup, wrong := c.sc.counts()
		lost := c.sc.lost()
		st.Wrong += wrong
		r.res.Lost += lost
		r.res.Dup += dup
		r.res.MaxLostPerConn = max(r.res.MaxLostPerConn, lost)
	}
	if toLive != nil && len(r.clients) > 0 {
		st.ToLive, st.StateFrames = latencyOf(toLive), float64(state)/float64(len(r.clients))
	}
	r.res.Shape = st
}
