package lease

import (
	"context"
	"sync"
)

// Local is the Manager of a process that shares nothing: every name is always free and held by this
// process.
type Local struct {
	owner string
}

// NewLocal returns a Local whose Owner answers owner for every name.
func NewLocal(owner string) *Local { return &Local{owner: owner} }

// Acquire returns a lease at once, unless ctx has already ended.
func (l *Local) Acquire(ctx context.Context, _ string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &localLease{lost: make(chan struct{})}, nil
}

// Owner returns this process's owner name.
func (l *Local) Owner(context.Context, string) (string, error) { return l.owner, nil }

// localLease is never lost until it is released.
type localLease struct {
	lost chan struct{}
	once sync.Once
}

func (l *localLease) Lost() <-chan struct{} { return l.lost }

func (l *localLease) Release(context.Context) error {
	l.Abandon()
	return nil
}

func (l *localLease) Abandon() { l.once.Do(func() { close(l.lost) }) }
