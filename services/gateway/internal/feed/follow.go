package feed

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Reading from a follower in the client's rack (kafka-client-rack, KIP-392): the leader names, in its fetch
// answers, the replica in the client's rack, and franz-go fetches the partition from it until the leader or
// its epoch changes. A follower this pod cannot reach (a network path lost, a firewall) while the brokers
// still reach it stays in the in-sync replicas, so the leader keeps naming it: asking the leader again is no
// way out. The feed reads such a follower's partitions through a second client without a rack, which the
// leaders serve themselves, for a while (followAway, doubling up to followAwayMax while the follower keeps
// failing), then asks the follower a small request, and gives them back to the client with the rack once it
// answers (until then its time away doubles again, and no partition stalls on it meanwhile). Only a failure
// of a broker the feed follows (see followState.follows) moves partitions, and only that broker's.

// followAway is how long a lost follower's partitions are read from their leaders before the follower is
// tried again; followAwayMax bounds the doubling of that time while the follower keeps failing when tried.
// Variables for tests.
var (
	followAway    = 30 * time.Second
	followAwayMax = 10 * time.Minute
)

// followState is which brokers a client with a rack may be fetching partitions from as followers, which of
// them failed, and which partitions are read from their leaders meanwhile. Safe for concurrent use.
type followState struct {
	rack string
	now  func() time.Time

	mu sync.Mutex
	// racks are the brokers' racks from every metadata answer so far: a broker that stops leaves the answers,
	// not the replica lists.
	racks map[int32]string
	// follows is, per broker, the partitions it may serve the client as a follower: it is a replica in the
	// client's rack and the leader is not (the rack-aware selector then names the leader). followers is the
	// same, per partition.
	follows   map[int32]map[string][]int32
	followers map[string]map[int32][]int32
	failed    map[int32]bool             // brokers followed that failed since the last moves
	away      map[int32]*absence         // brokers lost, and lost before
	leaders   map[string]map[int32]int32 // partitions read from their leaders, with the broker lost
	moved     map[int32]*[2]int64        // partitions moved, per broker: to their leaders, back
}

// absence is a broker's time away.
type absence struct {
	until   time.Time     // when it is asked whether it answers again
	length  time.Duration // how long it is away
	probing bool          // it is being asked
	answers bool          // it answered: its partitions go back to it
	over    bool          // its partitions went back
}

// followMove is partitions to move between the clients.
type followMove struct {
	broker    int32
	toLeaders bool               // to their leaders (broker was lost), or back (its time away is over)
	parts     map[string][]int32 // sorted
	away      time.Duration      // with toLeaders: for how long
}

func newFollowState(rack string) *followState {
	return &followState{
		rack: rack, now: time.Now, racks: map[int32]string{}, follows: map[int32]map[string][]int32{},
		followers: map[string]map[int32][]int32{}, failed: map[int32]bool{}, away: map[int32]*absence{},
		leaders: map[string]map[int32]int32{}, moved: map[int32]*[2]int64{},
	}
}

// partitionReplicas is what the metadata says of a partition: its leader and replicas.
type partitionReplicas struct {
	leader   int32
	replicas []int32
}

// learn takes a metadata answer: the brokers' racks, and the leader and replicas of topics' partitions.
func (s *followState) learn(racks map[int32]string, topics map[string]map[int32]partitionReplicas) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.racks, racks)
	for topic, ps := range topics {
		delete(s.followers, topic)
		for node, parts := range s.follows {
			delete(parts, topic)
			if len(parts) == 0 {
				delete(s.follows, node)
			}
		}
		for p, pr := range ps {
			if s.racks[pr.leader] == s.rack {
				continue
			}
			for _, r := range pr.replicas {
				if r == pr.leader || s.racks[r] != s.rack {
					continue
				}
				if s.followers[topic] == nil {
					s.followers[topic] = map[int32][]int32{}
				}
				s.followers[topic][p] = append(s.followers[topic][p], r)
				if s.follows[r] == nil {
					s.follows[r] = map[string][]int32{}
				}
				s.follows[r][topic] = append(s.follows[r][topic], p)
			}
		}
	}
	for _, parts := range s.follows {
		for _, ps := range parts {
			slices.Sort(ps)
		}
	}
}

// fail notes that the client could not reach node. It reports whether that concerns the partitions it
// follows: node may serve some of them, and it is not away already.
func (s *followState) fail(node int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failLocked(node)
}

func (s *followState) failLocked(node int32) bool {
	if len(s.follows[node]) == 0 || s.isAway(node) || s.failed[node] {
		return false
	}
	s.failed[node] = true
	return true
}

func (s *followState) isAway(node int32) bool {
	a := s.away[node]
	return a != nil && !a.over
}

// stalled notes that parts have records to read and are not moving: the brokers that may serve them as
// followers count as failed. It reports whether one does that was not away already.
func (s *followState) stalled(parts map[string][]int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := false
	for topic, ps := range parts {
		for _, p := range ps {
			if _, ok := s.leaders[topic][p]; ok {
				continue // read from the leader already
			}
			for _, node := range s.followers[topic][p] {
				hit = s.failLocked(node) || hit
			}
		}
	}
	return hit
}

// moves returns what is to move now: the partitions of the brokers that failed, to their leaders; those of
// the brokers that answered again after their time away, back. probe are the brokers whose time away is over,
// to ask whether they answer (then probed).
func (s *followState) moves() (out []followMove, probe []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) == 0 && len(s.away) == 0 {
		return nil, nil
	}
	now := s.now()
	for _, node := range slices.Sorted(maps.Keys(s.failed)) {
		d := followAway
		if a := s.away[node]; a != nil && now.Sub(a.until) < followAwayMax {
			d = min(2*a.length, followAwayMax) // failing again soon after it was tried again
		}
		s.away[node] = &absence{until: now.Add(d), length: d}
		m := followMove{broker: node, toLeaders: true, parts: map[string][]int32{}, away: d}
		for topic, ps := range s.follows[node] {
			for _, p := range ps {
				if _, ok := s.leaders[topic][p]; !ok {
					s.setLeader(topic, p, node)
					m.parts[topic] = append(m.parts[topic], p)
				}
			}
		}
		out = append(out, s.count(m))
	}
	clear(s.failed)
	for _, node := range slices.Sorted(maps.Keys(s.away)) {
		a := s.away[node]
		if a.over || now.Before(a.until) || a.probing {
			continue
		}
		if !a.answers {
			a.probing = true
			probe = append(probe, node)
			continue
		}
		a.over, a.until = true, now
		m := followMove{broker: node, parts: map[string][]int32{}}
		for topic, ps := range s.leaders {
			for p, n := range ps {
				if n == node {
					delete(ps, p)
					m.parts[topic] = append(m.parts[topic], p)
				}
			}
			slices.Sort(m.parts[topic])
		}
		out = append(out, s.count(m))
	}
	return out, probe
}

// probed tells whether node answered when asked after its time away: if it did, its partitions go back to it
// at the next moves; if not, it stays away twice as long again.
func (s *followState) probed(node int32, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.away[node]
	if a == nil || a.over {
		return
	}
	a.probing, a.answers = false, ok
	if !ok {
		a.length = min(2*a.length, followAwayMax)
		a.until = s.now().Add(a.length)
	}
}

func (s *followState) setLeader(topic string, p, node int32) {
	if s.leaders[topic] == nil {
		s.leaders[topic] = map[int32]int32{}
	}
	s.leaders[topic][p] = node
}

// count adds m's partitions to the broker's moves and returns m.
func (s *followState) count(m followMove) followMove {
	c := s.moved[m.broker]
	if c == nil {
		c = new([2]int64)
		s.moved[m.broker] = c
	}
	for topic, ps := range m.parts {
		if len(ps) == 0 {
			delete(m.parts, topic)
		}
		if m.toLeaders {
			c[0] += int64(len(ps))
		} else {
			c[1] += int64(len(ps))
		}
	}
	return m
}

// toLeader says whether the partition is to be read from its leader: it was moved there, or a broker that
// may serve it as a follower is away (then it counts as moved there).
func (s *followState) toLeader(topic string, p int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leaders[topic][p]; ok {
		return true
	}
	for _, node := range s.followers[topic][p] {
		if s.isAway(node) {
			s.setLeader(topic, p, node)
			return true
		}
	}
	return false
}

// reading says whether some partition is read from its leader.
func (s *followState) reading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ps := range s.leaders {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}

// eachMoved calls fn with each broker's count of partitions moved to their leaders and back.
func (s *followState) eachMoved(fn func(broker int32, toLeaders, back int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, c := range s.moved {
		fn(node, c[0], c[1])
	}
}
