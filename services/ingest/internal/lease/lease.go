package lease

import "context"

// Manager hands out leases on names (ingest's source names).
type Manager interface {
	// Acquire blocks until the caller holds name, and returns the lease. It returns ctx's error when ctx
	// ends first. Errors talking to the lease store are retried, not returned.
	Acquire(ctx context.Context, name string) (Lease, error)
	// Owner returns who holds name now, as given to the holder's Manager; empty when nobody does.
	Owner(ctx context.Context, name string) (string, error)
}

// Lease is one held name.
type Lease interface {
	// Lost is closed when the holder must stop: the lease could not be renewed in time or was taken, or
	// Release or Abandon was called.
	Lost() <-chan struct{}
	// Release stops renewing and gives the name back at once, if it is still held (ErrNotHeld otherwise).
	Release(ctx context.Context) error
	// Abandon stops renewing without giving the name back: another replica gets it once it expires, as
	// after a crash. For tests of fail-over.
	Abandon()
}
