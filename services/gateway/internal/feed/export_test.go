package feed

import "time"

// SetReplicaStall sets how long a partition may go without reading before it counts as stalled, for tests;
// it returns a function that restores it.
func SetReplicaStall(d time.Duration) (restore func()) {
	old := replicaStall
	replicaStall = d
	return func() { replicaStall = old }
}
