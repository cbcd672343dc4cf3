package feed

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// How the feed finds a follower it cannot reach (see follow.go for what it then does): a connection to the
// broker, or a request on one, that fails (franz-go's connect and read hooks, at once), or a partition it may
// serve that has records to read but whose reading has not moved for replicaStall (a broker that drops
// packets, or one franz-go dropped from its metadata and no longer even dials). A failure of any other broker
// is franz-go's to handle, and moves nothing.

// replicaStall is how long a partition with records to read may go without reading any before it counts as
// stalled: well past a follower's usual delay in learning the high watermark (a replica fetch waits up to
// 500 ms).
var replicaStall = 5 * time.Second // a variable for tests (SetReplicaStall)

// replicaWatch is the kgo hook of the client with a rack: it notes a failed connection or request to a broker
// it follows, and wakes the poll under way so that the feed acts on it at once.
type replicaWatch struct {
	state *followState
	wake  atomic.Pointer[context.CancelFunc]
}

var (
	_ kgo.HookBrokerConnect = (*replicaWatch)(nil)
	_ kgo.HookBrokerRead    = (*replicaWatch)(nil)
)

// OnBrokerConnect implements kgo.HookBrokerConnect: a connection that could not be opened or initialized.
func (w *replicaWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.failed(meta.NodeID, err)
}

// OnBrokerRead implements kgo.HookBrokerRead: a request whose answer did not come (a time-out, a connection
// closed).
func (w *replicaWatch) OnBrokerRead(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	w.failed(meta.NodeID, err)
}

// failed notes a failure of node, unless err says the client, not the broker, ended it (a request given up,
// the client closed).
func (w *replicaWatch) failed(node int32, err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	if w.state.fail(node) {
		w.signal()
	}
}

// signal wakes the poll under way.
func (w *replicaWatch) signal() {
	if cancel := w.wake.Load(); cancel != nil {
		(*cancel)()
	}
}

// poll is PollFetches of the client with a rack, and of the one without (lead) while it reads some partitions,
// under a context the hook can end early. When either returns, the other is woken, and both results are
// returned: no fetch is taken from a client's buffer that the feed does not get.
func (w *replicaWatch) poll(ctx context.Context, cl, lead *kgo.Client) (kgo.Fetches, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.wake.Store(&cancel)
	defer w.wake.Store(nil)
	if !w.state.reading() {
		fs := cl.PollFetches(pctx)
		if fs.IsClientClosed() {
			return nil, ErrClosed
		}
		return fs, nil
	}
	res := make(chan kgo.Fetches, 2)
	for _, c := range []*kgo.Client{cl, lead} {
		go func() {
			fs := c.PollFetches(pctx)
			cancel()
			res <- fs
		}()
	}
	a, b := <-res, <-res
	if a.IsClientClosed() || b.IsClientClosed() {
		return nil, ErrClosed
	}
	return append(a, b...), nil
}

// replicaLoser is a Cluster that can read from followers and move partitions off the ones it loses.
type replicaLoser interface {
	// Following says the cluster may read from followers (it has a rack).
	Following() bool
	// Stalled tells the cluster that partitions have records to read and their reading has stopped moving.
	Stalled(parts map[string][]int32)
	// Moves returns the partitions to move now between the followers and the leaders (and starts asking
	// the followers whose time away is over whether they answer again).
	Moves() []followMove
	// Move reads parts again from the given offsets (AtLogStart: from the start), from their leaders
	// (toLeaders) or from the replicas their leaders name.
	Move(parts map[string]map[int32]int64, toLeaders bool)
	// Moved calls fn with each broker's count of partitions moved off it, and back.
	Moved(fn func(broker int32, toLeaders, back int64))
}

// Following implements replicaLoser.
func (k *kafkaCluster) Following() bool { return k.watch != nil }

// Stalled implements replicaLoser.
func (k *kafkaCluster) Stalled(parts map[string][]int32) {
	if k.watch != nil && k.watch.state.stalled(parts) {
		k.watch.signal()
	}
}

// Moves implements replicaLoser.
func (k *kafkaCluster) Moves() []followMove {
	if k.watch == nil {
		return nil
	}
	out, probe := k.watch.state.moves()
	for _, node := range probe {
		k.probes.Go(func() { k.probe(node) })
	}
	return out
}

// followProbe bounds the wait for a lost follower's answer when it is asked again.
const followProbe = 5 * time.Second

// probe asks node for its API versions through the client with a rack, which reads from it if it answers.
func (k *kafkaCluster) probe(node int32) {
	ctx, cancel := context.WithTimeout(k.ctx, followProbe)
	defer cancel()
	_, err := k.cl.Broker(int(node)).Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if k.ctx.Err() != nil {
		return
	}
	k.watch.state.probed(node, err == nil)
	if err == nil {
		k.watch.signal() // the partitions go back at the fetch loop's next turn
	}
}

// Move implements replicaLoser.
func (k *kafkaCluster) Move(parts map[string]map[int32]int64, toLeaders bool) {
	from, to := k.cl, k.lead
	if !toLeaders {
		from, to = k.lead, k.cl
	}
	rm := map[string][]int32{}
	for topic, ps := range parts {
		for p := range ps {
			rm[topic] = append(rm[topic], p)
		}
	}
	from.RemoveConsumePartitions(rm)
	to.AddConsumePartitions(kgoOffsets(parts))
}

// Moved implements replicaLoser.
func (k *kafkaCluster) Moved(fn func(broker int32, toLeaders, back int64)) {
	if k.watch != nil {
		k.watch.state.eachMoved(fn)
	}
}

// FollowerMoves calls fn with, per broker the feed has read from as a follower, how many partitions it moved
// off it to their leaders because it could not reach it, and how many it gave back to it. Nothing without
// kafka-client-rack.
func (f *Feed) FollowerMoves(fn func(broker int32, toLeaders, back int64)) {
	if rl, ok := f.kc.(replicaLoser); ok {
		rl.Moved(fn)
	}
}

// stall is where a partition's reading was when a metadata refresh last saw it move.
type stall struct {
	next  int64
	since time.Time
}

// checkStalls, after each metadata refresh, looks for partitions with records to read (the last stable offset
// past the next offset to read) whose next offset has not moved for replicaStall, and tells the cluster,
// which counts the followers that may serve them as lost. Only when reading from followers; called by the
// refresh goroutine, which owns f.stalls.
func (f *Feed) checkStalls() {
	rl, ok := f.kc.(replicaLoser)
	if !ok || !rl.Following() {
		return
	}
	now, seen, stalled := time.Now(), map[*partition]stall{}, map[string][]int32{}
	for name, t := range f.topics {
		t.mu.Lock()
		for p, ps := range t.parts {
			next, end := ps.next.Load(), ps.end.Load()
			s, ok := f.stalls[ps]
			if !ok || s.next != next || end <= max(next, 0) {
				s = stall{next: next, since: now}
			}
			seen[ps] = s
			if now.Sub(s.since) >= replicaStall {
				stalled[name] = append(stalled[name], p)
			}
		}
		t.mu.Unlock()
	}
	f.stalls = seen
	if len(stalled) > 0 {
		rl.Stalled(stalled)
	}
}

// follow moves the partitions the cluster says are to move, each from the offset after the last record or
// marker the feed has read (its start, when it has read none). Called by the fetch loop between polls, so
// that no fetch is being handled meanwhile.
func (f *Feed) follow(rl replicaLoser) {
	for _, m := range rl.Moves() {
		parts := map[string]map[int32]int64{}
		n := 0
		for name, ps := range m.parts {
			t := f.topics[name]
			if t == nil {
				continue
			}
			t.mu.Lock()
			for _, p := range ps {
				st := t.parts[p]
				if st == nil {
					continue // not read yet: read from where its follower says when it is assigned
				}
				if parts[name] == nil {
					parts[name] = map[int32]int64{}
				}
				next := st.next.Load()
				if next < 0 {
					next = AtLogStart
				}
				parts[name][p] = next
				n++
			}
			t.mu.Unlock()
		}
		if m.toLeaders {
			f.log.Warn("a follower the feed reads from cannot be reached; reading its partitions from their leaders for a while",
				"broker", m.broker, "partitions", n, "for", m.away.String())
		} else {
			f.log.Info("reading partitions from the follower in this rack again", "broker", m.broker, "partitions", n)
		}
		if n > 0 {
			rl.Move(parts, m.toLeaders)
		}
	}
}

// kgoOffsets turns the feed's offsets into franz-go's.
func kgoOffsets(parts map[string]map[int32]int64) map[string]map[int32]kgo.Offset {
	add := map[string]map[int32]kgo.Offset{}
	for topic, ps := range parts {
		add[topic] = map[int32]kgo.Offset{}
		for p, off := range ps {
			if off == AtLogStart {
				add[topic][p] = kgo.NewOffset().AtStart()
			} else {
				add[topic][p] = kgo.NewOffset().At(off)
			}
		}
	}
	return add
}
