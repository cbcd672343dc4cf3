//go:build !linux

package stream

// hangups is the Linux watcher of peers that left (hangup_linux.go); elsewhere the writer pool relies on its
// probes (probeEvery and the heartbeats) and on failed writes.
type hangups struct{}

func newHangups() *hangups { return nil }

func (*hangups) add(*conn)    {}
func (*hangups) remove(*conn) {}

func (*hangups) rebind(c *conn, fd int32) { c.fd = fd }
func (*hangups) close()                   {}
