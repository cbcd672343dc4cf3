package feed

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Reading from a follower in the client's rack (kafka-client-rack, KIP-392): franz-go moves a partition's
// fetches to the replica the leader names, and back to the leader only when the leader or its epoch changes.
// A follower that stops is no such change, so its partitions would wait for it to come back. replicaWatch
// notices a broker the client cannot reach, and the feed then reads its partitions again from the leaders,
// from the exact offsets it has read up to (backToLeaders): a leader does not name a replica that has left the
// in-sync set. Two signs of such a broker: a connection to it that fails (at once), and a partition that has
// records to read but whose reading has not moved for replicaStall (once franz-go has dropped the broker from
// its metadata it no longer even dials it).

// replicaRecheck is how soon after one move back to the leaders another may follow: a leader may name the
// lost replica again until the controller has fenced it. replicaStall is how long a partition with records to
// read may go without reading any before it counts as stalled: well past a follower's usual delay in learning
// the high watermark (a replica fetch waits up to 500 ms).
const replicaRecheck = 3 * time.Second

var replicaStall = 5 * time.Second // a variable for tests (SetReplicaStall)

// replicaWatch is the kgo hook of a client with a rack: it notes a failed connection to a broker, and wakes the
// poll under way so that the feed acts on it at once.
type replicaWatch struct {
	lost  atomic.Bool
	wake  atomic.Pointer[context.CancelFunc]
	moved atomic.Int64 // unix nanoseconds of the last move back to the leaders
}

var _ kgo.HookBrokerConnect = (*replicaWatch)(nil)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (w *replicaWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	w.signal()
}

// signal notes a broker lost and wakes the poll under way.
func (w *replicaWatch) signal() {
	w.lost.Store(true)
	if cancel := w.wake.Load(); cancel != nil {
		(*cancel)()
	}
}

// poll is PollFetches under a context the hook can end early.
func (w *replicaWatch) poll(ctx context.Context, cl *kgo.Client) kgo.Fetches {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.wake.Store(&cancel)
	defer w.wake.Store(nil)
	return cl.PollFetches(pctx)
}

// take says a broker could not be reached since the last move back to the leaders, at most once every
// replicaRecheck.
func (w *replicaWatch) take() bool {
	now := time.Now().UnixNano()
	if !w.lost.Load() || now-w.moved.Load() < int64(replicaRecheck) {
		return false
	}
	w.lost.Store(false)
	w.moved.Store(now)
	return true
}

// replicaLoser is a Cluster that can read from followers and tell the feed when one it reads from is lost.
type replicaLoser interface {
	// Following says the cluster may read from followers (it has a rack).
	Following() bool
	// Stalled tells the cluster that a partition's reading has stopped moving.
	Stalled()
	// ReplicaLost says a broker could not be reached, or a partition stalled, since the last move back to the
	// leaders (at most once every replicaRecheck).
	ReplicaLost() bool
}

// Following implements replicaLoser.
func (k *kafkaCluster) Following() bool { return k.watch != nil }

// Stalled implements replicaLoser.
func (k *kafkaCluster) Stalled() {
	if k.watch != nil {
		k.watch.signal()
	}
}

// ReplicaLost implements replicaLoser.
func (k *kafkaCluster) ReplicaLost() bool { return k.watch != nil && k.watch.take() }

// stall is where a partition's reading was when a metadata refresh last saw it move.
type stall struct {
	next  int64
	since time.Time
}

// checkStalls, after each metadata refresh, looks for partitions with records to read (the last stable offset
// past the next offset to read) whose next offset has not moved for replicaStall, and tells the cluster,
// which wakes the fetch loop to read them from the leaders again. Only when reading from followers; called by
// the refresh goroutine, which owns f.stalls.
func (f *Feed) checkStalls() {
	rl, ok := f.kc.(replicaLoser)
	if !ok || !rl.Following() {
		return
	}
	now, seen, stalled := time.Now(), map[*partition]stall{}, false
	for _, t := range f.topics {
		t.mu.Lock()
		for _, ps := range t.parts {
			next, end := ps.next.Load(), ps.end.Load()
			s, ok := f.stalls[ps]
			if !ok || s.next != next || end <= max(next, 0) {
				s = stall{next: next, since: now}
			}
			seen[ps] = s
			stalled = stalled || now.Sub(s.since) >= replicaStall
		}
		t.mu.Unlock()
	}
	f.stalls = seen
	if stalled {
		rl.Stalled()
	}
}

// backToLeaders reads every assigned partition again from its leader, from the offset after the last record
// or marker the feed has read (its start, when it has read none). Called by the fetch loop between polls,
// so that no fetch is being handled meanwhile.
func (f *Feed) backToLeaders() {
	parts := map[string]map[int32]int64{}
	for name, t := range f.topics {
		t.mu.Lock()
		for p, ps := range t.parts {
			if parts[name] == nil {
				parts[name] = map[int32]int64{}
			}
			next := ps.next.Load()
			if next < 0 {
				next = AtLogStart
			}
			parts[name][p] = next
		}
		t.mu.Unlock()
	}
	if len(parts) == 0 {
		return
	}
	f.log.Warn("a broker the feed reads from cannot be reached; reading its partitions from their leaders again")
	f.kc.Reassign(parts)
}
