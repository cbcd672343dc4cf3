package feed

import "time"

// SetReplicaStall sets how long a partition may go without reading before it counts as stalled, for tests;
// it returns a function that restores it.
func SetReplicaStall(d time.Duration) (restore func()) {
	old := replicaStall
	replicaStall = d
	return func() { replicaStall = old }
}

// FollowMove is a move between a follower and the leaders, for fakes of a cluster that reads from followers.
type FollowMove = followMove

// ToLeaders is a move of parts off broker to their leaders.
func ToLeaders(broker int32, parts map[string][]int32) FollowMove {
	return followMove{broker: broker, toLeaders: true, parts: parts, away: followAway}
}
