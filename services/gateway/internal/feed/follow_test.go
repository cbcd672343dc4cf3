package feed

import (
	"fmt"
	"testing"
	"time"
)

// followCluster is the metadata of a cluster of three brokers in racks a, b and c, read by a client in rack b:
// t/0 and t/1 are led by 1 with a replica on 2 (followed there), t/2 is led by 2 (read from its leader), u/0 is
// on 1 and 3 only (no replica in rack b: read from its leader).
func followCluster(now *time.Time) *followState {
	s := newFollowState("b")
	s.now = func() time.Time { return *now }
	s.learn(map[int32]string{1: "a", 2: "b", 3: "c"}, map[string]map[int32]partitionReplicas{
		"t": {0: {1, []int32{1, 2, 3}}, 1: {1, []int32{1, 2, 3}}, 2: {2, []int32{2, 1, 3}}},
		"u": {0: {1, []int32{1, 3}}},
	})
	return s
}

// TestFollowStateMovesOnlyTheLostFollowersPartitions: failures of the leader, of a broker serving nothing and
// of a seed (negative id) move nothing; a failure of the follower moves its partitions alone, once however
// often it fails while away, and a stall of a partition read from its leader moves nothing.
func TestFollowStateMovesOnlyTheLostFollowersPartitions(t *testing.T) {
	now := time.Unix(1000, 0)
	s := followCluster(&now)
	for _, node := range []int32{1, 3, -2147483648} {
		if s.fail(node) {
			t.Errorf("a failure of broker %d concerns the followed partitions", node)
		}
	}
	if s.stalled(map[string][]int32{"t": {2}, "u": {0}}) {
		t.Error("a stall of partitions read from their leaders concerns a follower")
	}
	if m, _ := s.moves(); len(m) != 0 {
		t.Fatalf("moves after failures of other brokers: %+v, want none", m)
	}
	if !s.fail(2) || s.fail(2) {
		t.Error("the first failure of the follower should count, the second not again")
	}
	m, _ := s.moves()
	if got := fmt.Sprint(m); got != "[{2 true map[t:[0 1]] 30000000000}]" {
		t.Fatalf("moves after the follower failed: %s", got)
	}
	if !s.toLeader("t", 0) || s.toLeader("t", 2) || s.toLeader("u", 0) {
		t.Error("t/0 should be read from its leader, t/2 and u/0 as before")
	}
	if s.fail(2) || s.stalled(map[string][]int32{"t": {0}}) {
		t.Error("a failure or stall of a follower away counts again")
	}
	if m, _ := s.moves(); len(m) != 0 {
		t.Fatalf("moves while away: %+v, want none", m)
	}
}

// TestFollowStateComesBackWhenTheFollowerAnswers: after its time away the follower is asked (once, however
// often moves runs meanwhile); while it does not answer its partitions stay with the leaders and its time
// away doubles; once it answers they go back, and a partition added meanwhile that it serves was read from
// its leader and goes back with them. Failing soon after coming back doubles the time away again.
func TestFollowStateComesBackWhenTheFollowerAnswers(t *testing.T) {
	now := time.Unix(1000, 0)
	s := followCluster(&now)
	s.fail(2)
	s.moves()
	s.learn(map[int32]string{1: "a", 2: "b", 3: "c"}, map[string]map[int32]partitionReplicas{
		"t": {0: {1, []int32{1, 2, 3}}, 1: {1, []int32{1, 2, 3}}, 2: {2, []int32{2, 1, 3}}, 3: {3, []int32{3, 2}}},
	})
	if !s.toLeader("t", 3) {
		t.Error("a partition added while its follower is away should be read from its leader")
	}
	now = now.Add(29 * time.Second)
	if m, p := s.moves(); len(m) != 0 || len(p) != 0 {
		t.Fatalf("before the time away ends: moves %+v, probes %v", m, p)
	}
	now = now.Add(time.Second)
	if m, p := s.moves(); len(m) != 0 || fmt.Sprint(p) != "[2]" {
		t.Fatalf("time away over: moves %+v, probes %v; want broker 2 asked", m, p)
	}
	if _, p := s.moves(); len(p) != 0 {
		t.Fatalf("asked again while being asked: %v", p)
	}
	s.probed(2, false)
	now = now.Add(59 * time.Second)
	if m, p := s.moves(); len(m) != 0 || len(p) != 0 {
		t.Fatalf("not answering: moves %+v, probes %v before its 60 s away", m, p)
	}
	now = now.Add(time.Second)
	if _, p := s.moves(); fmt.Sprint(p) != "[2]" {
		t.Fatalf("probes %v after 60 s away, want broker 2", p)
	}
	s.probed(2, true)
	m, _ := s.moves()
	if got := fmt.Sprint(m); got != "[{2 false map[t:[0 1 3]] 0}]" {
		t.Fatalf("moves once it answered: %s", got)
	}
	if s.toLeader("t", 0) || s.reading() {
		t.Error("partitions still read from their leaders after going back")
	}
	now = now.Add(time.Minute)
	s.fail(2)
	if m, _ := s.moves(); len(m) != 1 || m[0].away != 2*time.Minute {
		t.Fatalf("failing a minute after coming back: %+v, want 2 minutes away (twice the last)", m)
	}
	var moved []string
	s.eachMoved(func(broker int32, toLeaders, back int64) { moved = append(moved, fmt.Sprint(broker, toLeaders, back)) })
	if fmt.Sprint(moved) != "[2 5 3]" {
		t.Errorf("moved: %v, want broker 2: 5 partitions to their leaders, 3 back", moved)
	}
}
