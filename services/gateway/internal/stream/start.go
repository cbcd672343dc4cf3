package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// unknownPartitionRetry is how long a stream waits before it asks Kafka about an id's unknown partition again.
const unknownPartitionRetry = 300 * time.Millisecond

// start decides where a new stream begins: it waits for the topic to exist, takes the client's position from
// its id (or from the from parameter), joins the ring at its head, tells the client about anything it cannot
// have, writes the id-only block, and catches up to the head from the ring and Kafka.
func (c *conn) start(ctx context.Context, t *Topic, p Params) error {
	if err := c.awaitTopic(ctx, t, &p); err != nil {
		return err
	}
	c.p = p.kept(t)
	c.gen, c.epoch = t.generation(), t.epoch()
	if c.leaving {
		if own, err := ownID(p.LastEventID, t.Name); err == nil && position.IsCompact(own) {
			return c.redirectCompact(own)
		}
	}
	resuming, invalid, gone, err := c.clientPosition(ctx, t, p)
	if err != nil {
		return err
	}
	c.keyParts = keyPartitions(t, &c.p)
	if c.keyParts != nil && resuming {
		// A key's partition depends on the partition count: the id may list partitions of an earlier count
		// (producers that have not seen the new count still write there), and those stay the stream's. Only
		// those, though: an id never makes a key-filtered stream cover a partition its keys cannot be in
		// (records there would be filtered out all the same, but the stream's ids would follow that
		// partition).
		c.keyParts = unionParts(c.keyParts, keyPartitionsOf(t, &c.p, partitionsOf(c.pos)))
	}
	c0, head := c.join(t)
	if c.leaving && !resuming && fromStart(p.From) {
		return c.redirectFromStart()
	}
	if !resuming {
		if err := c.startPosition(ctx, t, p, head); err != nil {
			return err
		}
	}
	if c.keyParts != nil {
		c.pos = c.pos.Restrict(c.keyParts)
	}
	pre, err := c.tellLost(invalid, gone)
	if err != nil {
		return err
	}
	c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
	c.buf = sse.AppendID(c.buf, string(c.idBuf))
	if c.p.Opened {
		c.buf = sse.AppendEventBytes(c.buf, c.idBuf, []byte(OpenedEvent), fmt.Appendf(nil, `{"id":%q}`, c.idBuf))
	}
	if c.leaving {
		// The client reconnects from this position elsewhere: a fresh stream too, so that nothing between now
		// and its reconnect is lost.
		if err := c.flushBuf(); err != nil {
			return err
		}
		return errDrained
	}
	if err := c.awaitPlaced(); err != nil {
		return err
	}
	catchUp := func(ctx context.Context) error { return c.catchUp(ctx, t, &c.p, c0, head, resuming) }
	if p.From == FromSnapshot {
		c.startSnapshot(resuming)
		catchUp = func(ctx context.Context) error { return c.snapshotTo(ctx, t, c0, head, resuming) }
	}
	if !resuming && pre == nil {
		return catchUp(ctx)
	}
	return c.traceResume(ctx, false, c.began, pre, catchUp)
}

// clientPosition takes the client's position from its id, when it sent one: resuming says c.pos is it. An
// id that cannot be read is invalid; one whose checkpoint retention removed is gone; both are told as a
// resync and the stream starts as from= says. err is a failure to ask Kafka or to write, which ends the
// stream.
func (c *conn) clientPosition(ctx context.Context, t *Topic, p Params) (resuming bool, invalid, gone, err error) {
	if p.idErr != nil {
		return false, p.idErr, nil, nil
	}
	if p.LastEventID, err = ownID(p.LastEventID, t.Name); err != nil {
		return false, err, nil, nil
	}
	if p.LastEventID == "" {
		return false, nil, nil, nil
	}
	var v position.Vector
	if position.IsCompact(p.LastEventID) {
		// Resolving a compact id may read its checkpoint from Kafka, or wait for a turn to: the client gets
		// its answer first and keep-alives meanwhile.
		if werr := c.await(ctx, func(ctx context.Context) error {
			v, err = t.parseID(ctx, p.LastEventID, t.kafkaID())
			return nil
		}); werr != nil {
			return false, nil, nil, werr
		}
	} else {
		v, err = position.Parse(p.LastEventID)
	}
	if err == nil {
		err = c.checkPartitions(ctx, v, t)
	}
	switch {
	case err == nil:
		c.pos = v
		return true, nil, nil, nil
	case errors.Is(err, errReplay) || errors.Is(err, errWrite):
		return false, nil, nil, err
	case errors.Is(err, checkpoint.ErrGone):
		return false, nil, err, nil
	default:
		return false, err, nil, nil
	}
}

// startPosition sets c.pos where a stream without a position starts, as from= says: the head (latest),
// before each partition's log start (earliest, snapshot), or before the first record at or after a time.
func (c *conn) startPosition(ctx context.Context, t *Topic, p Params, head position.Vector) error {
	switch p.From {
	case FromEarliest, FromSnapshot:
		return c.logStarts(ctx, t)
	case "time":
		if t.OffsetsAfter == nil {
			return fmt.Errorf("%w: no offsets by time", errReplay)
		}
		var offs map[int32]int64
		err := c.await(ctx, func(ctx context.Context) (err error) {
			offs, err = t.OffsetsAfter(ctx, p.FromTime)
			return err
		})
		if err != nil {
			return err
		}
		c.pos = position.Vector{}
		for q, o := range offs {
			if o > 0 {
				c.pos.Set(q, o-1)
			}
		}
	default:
		c.pos = latest(t, head)
	}
	return nil
}

// fromStart says from= starts a stream at the topic's log start.
func fromStart(from string) bool { return from == FromEarliest || from == FromSnapshot }

// logStarts sets c.pos before each partition's log start (its low watermark less one; a partition whose log
// starts at 0 stays absent, which says the same), so that the stream's first id, and every id after it, names
// where each partition starts: a client that drops before it got a record of every partition resumes from
// there, not with a retention resync for records it never had (an absent partition is a resume from offset 0).
// The watermarks come from the feed's cache, the look-up the stream's catch-up makes next; the stream says
// nothing of its position until they came, and a stream they cannot come for ends as its catch-up would
// (replay_failed): its client reconnects without an id, as its URL says, which is the same start.
func (c *conn) logStarts(ctx context.Context, t *Topic) error {
	c.pos = position.Vector{}
	if t.Watermarks == nil {
		return nil // no Kafka: every partition starts at 0
	}
	var wm map[int32]feed.Watermarks
	if err := c.await(ctx, func(ctx context.Context) (err error) {
		wm, err = t.Watermarks(ctx, time.Second)
		return err
	}); err != nil {
		return err
	}
	for q, w := range wm {
		if w.Low > 0 {
			c.pos.Set(q, w.Low-1)
		}
	}
	return nil
}

// redirectFromStart ends a stream that started while the server is leaving and starts at the log start
// (from=earliest, from=snapshot, with no id it can use): it writes its retry line and no id. Where each
// partition's log starts is Kafka's answer, which a leaving pod does not wait for; a client without an id
// reconnects as its URL says, from the log start, so no id is the exact one. (An id naming no partition would
// be a resume from offset 0, and a retention resync where the log starts later.) An invalid id's resync is
// not told either: the client keeps that id, and the pod it reconnects to tells it.
func (c *conn) redirectFromStart() error {
	if err := c.flushBuf(); err != nil {
		return err
	}
	return errDrained
}

// tellLost writes the resync of an invalid id, or of a compact id whose checkpoint is gone, and returns the
// reasons told, for the resume's span (nil when none).
func (c *conn) tellLost(invalid, gone error) ([]string, error) {
	switch {
	case invalid != nil:
		c.stats.Resyncs[resyncInvalid].Add(1)
		err := c.writeResync(ResyncData{Reason: ResyncInvalidID, Error: invalid.Error(), Partitions: []ResyncPartition{}})
		return []string{ResyncInvalidID}, err
	case gone != nil:
		// The checkpoint a compact id names is past the position topic's retention: the records it led to
		// are, too, when that retention covers the data topic's (see docs/decisions.md). Which partitions,
		// nobody can say any more.
		c.stats.Resyncs[resyncRetention].Add(1)
		err := c.writeResync(ResyncData{Reason: ResyncRetention, Error: gone.Error(), Partitions: []ResyncPartition{}})
		return []string{ResyncRetention}, err
	}
	return nil, nil
}

// ownID is the topic's part of a stream's id: the id itself, or the topic's part of the id of a stream of
// several topics, this one among them or not ("" when it is not).
func ownID(id, topic string) (string, error) {
	if !position.IsTopics(id) {
		return id, nil
	}
	ids, err := SplitID(id, []string{topic})
	return ids[0], err
}

// redirectCompact ends a stream that started while the server is leaving with the client's own compact id,
// unresolved: resolving it would read Kafka for a stream that only says where it is, and the pod the client
// reconnects to resolves it. An id that is not even well-formed is not echoed: the client keeps it, and the
// next pod calls it invalid.
func (c *conn) redirectCompact(id string) error {
	if _, err := position.ParseCompact(id); err == nil {
		c.buf = sse.AppendID(c.buf, id)
	}
	if err := c.flushBuf(); err != nil {
		return err
	}
	return errDrained
}

// awaitTopic holds the stream of a configured topic that Kafka does not have (yet), or whose existence
// nobody knows yet (Kafka not reached since the gateway started), until it appears: the client gets its
// "retry:" line and keep-alives, not a 404 that would stop an EventSource for good. While Kafka says the
// topic does not exist, everything it will hold is new to this client: the stream then starts from the
// topic's start and says so with an empty id ("v1:"), so that a reconnect anywhere resumes from the start.
func (c *conn) awaitTopic(ctx context.Context, t *Topic, p *Params) error {
	if t.Feed == nil || t.Feed.Exists() {
		return nil
	}
	absent := false
	markAbsent := func() {
		if !absent && p.LastEventID == "" && t.Feed.Absent() {
			absent = true
			p.From = FromEarliest
			c.buf = sse.AppendID(c.buf, "v1:")
		}
	}
	markAbsent()
	if !absent && c.muxed && p.LastEventID != "" {
		// One topic of a stream of several: the client's position in it does not move while the topic is not
		// there, and saying it at once lets the other topics' frames go out (each of the stream's ids names
		// every topic) instead of waiting for this one.
		c.buf = sse.AppendID(c.buf, p.LastEventID)
	}
	if err := c.flushBuf(); err != nil {
		return err
	}
	if c.leaving {
		return errDrained
	}
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	var expired <-chan time.Time
	if c.tokEnd != 0 {
		// No position to end on yet (or only "v1:", already sent): the stream just ends, and the client keeps
		// the id it had.
		t := time.NewTimer(max(time.Duration(c.tokEnd-monoNow()), 0))
		defer t.Stop()
		expired = t.C
	}
	for {
		wait := time.Hour
		if c.p.Heartbeat > 0 {
			wait = time.Duration(c.hbDue - monoNow())
		}
		hb := time.NewTimer(max(wait, 0))
		select {
		case <-t.Feed.Appeared():
			hb.Stop()
			if !absent {
				// Kafka may have said "absent" a moment before the topic appeared.
				markAbsent()
			}
			return nil
		case <-check.C:
			markAbsent()
			if err := c.flushBuf(); err != nil {
				hb.Stop()
				return err
			}
		case <-hb.C:
			if err := c.keepAliveIfDue(); err != nil {
				return err
			}
		case <-ctx.Done():
			hb.Stop()
			return ctx.Err()
		case <-c.draining:
			hb.Stop()
			return errDrained
		case <-expired:
			hb.Stop()
			return errTokenExpired
		}
		hb.Stop()
	}
}

// latest is where a from=latest stream starts: the ring's head, but never before the partitions' last stable
// offsets when the pod first assigned them. A stream that comes while the pod still reads its prefill (or
// that waited for the topic while nobody knew whether it existed) gets no history, and no gap.
func latest(t *Topic, head position.Vector) position.Vector {
	pos := head.Clone()
	if t.Feed == nil {
		return pos
	}
	start := t.Feed.LatestAtStart()
	for i := range start.Len() {
		e := start.At(i)
		if have, ok := pos.Offset(e.Partition); !ok || have < e.Offset {
			pos.Set(e.Partition, e.Offset)
		}
	}
	return pos
}

// await runs fn (a call to Kafka) while the stream keeps its client alive: a keep-alive every heartbeat until
// fn returns. fn's error is returned wrapped in errReplay.
func (c *conn) await(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := c.open(); err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(fctx) }()
	var tick <-chan time.Time
	if c.p.Heartbeat > 0 {
		tk := time.NewTicker(c.p.Heartbeat)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%w: %w", errReplay, err)
			}
			return nil
		case <-tick:
			if err := c.keepAliveIfDue(); err != nil {
				return err
			}
		}
	}
}

// join returns the ring's head and the position that goes with it (only the stream's partitions, for a
// key-filtered stream).
func (c *conn) join(t *Topic) (uint64, position.Vector) {
	c0, id := t.Ring.Start(c.idBuf[:0])
	c.idBuf = id
	if len(id) == 0 {
		return c0, position.Vector{}
	}
	head, err := position.Parse(string(id))
	if err != nil {
		panic("stream: the ring holds a malformed head id: " + err.Error())
	}
	if c.keyParts != nil {
		head = head.Restrict(c.keyParts)
	}
	return c0, head
}

// checkPartitions rejects ids naming partitions the topic does not have. A partition this pod has not
// discovered yet (the seconds after partitions are added) is asked of Kafka: its watermarks know it.
func (c *conn) checkPartitions(ctx context.Context, v position.Vector, t *Topic) error {
	if t.Partitions == nil {
		return nil
	}
	parts := t.Partitions()
	var unknown []int32
	for i := range v.Len() {
		if p := v.At(i).Partition; !slices.Contains(parts, p) {
			unknown = append(unknown, p)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	if t.Watermarks == nil {
		return fmt.Errorf("the id names partition %d, which topic %s does not have", unknown[0], t.Name)
	}
	var wm map[int32]feed.Watermarks
	for try := range 2 {
		if try > 0 {
			// The Kafka client's metadata is up to a quarter of a second old: ask once more after that,
			// so a partition added a moment ago is not called unknown.
			if err := sleepCtx(ctx, unknownPartitionRetry); err != nil {
				return err
			}
		}
		if err := c.await(ctx, func(ctx context.Context) (err error) {
			wm, err = t.Watermarks(ctx, 0)
			return err
		}); err != nil {
			return err
		}
		if !slices.ContainsFunc(unknown, func(p int32) bool { _, ok := wm[p]; return !ok }) {
			return nil
		}
	}
	for _, p := range unknown {
		if _, ok := wm[p]; !ok {
			return fmt.Errorf("the id names partition %d, which topic %s does not have", p, t.Name)
		}
	}
	return nil
}

// sleepCtx waits d, or returns ctx's error when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
