package replay

// CachePeak returns the most memory the pool's cached blocks and blocks being read have held together, for
// the tests of package replay_test.
func CachePeak(p *Pool) int64 { return p.cache.peakBytes() }

// SetBeforeLaunch makes f run between a connection's look at p's cache and its look at p's flights.
func SetBeforeLaunch(p *Pool, f func()) { p.beforeLaunch = f }
