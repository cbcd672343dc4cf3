package limit

import (
	"errors"
	"fmt"
	"time"
)

// ErrStoreUnavailable is what a StoreError matches with errors.Is: the store could not answer.
var ErrStoreUnavailable = errors.New("limit: quota store unavailable")

// errClosed is the error of a store used after Close.
var errClosed = errors.New("limit: store closed")

// Refusal is a stream refused by a limit. It is the error of Admit and Store.Acquire.
type Refusal struct {
	// Kind is the limit reached.
	Kind Kind
	// Max is that limit: the maximum of streams, or of new streams per second for KindRate.
	Max float64
	// RetryAfter is how long the client should wait before it tries again; zero from a Store (the Limiter
	// sets it).
	RetryAfter time.Duration
	// Err is, for KindStore, the *StoreError that made the limiter refuse; nil otherwise.
	Err error
}

func (r *Refusal) Error() string {
	switch r.Kind {
	case KindRate:
		return fmt.Sprintf("limit: too many new streams on this server (at most %g a second)", r.Max)
	case KindStreams:
		return fmt.Sprintf("limit: too many streams open on this server (at most %g)", r.Max)
	case KindIP:
		return fmt.Sprintf("limit: too many streams from this address (at most %g)", r.Max)
	case KindSubject:
		return fmt.Sprintf("limit: too many streams for this token subject (at most %g)", r.Max)
	case KindStore:
		return "limit: stream quota store unavailable; try again later"
	default:
		return "limit: refused"
	}
}

// Unwrap returns Err: a refusal of KindStore matches ErrStoreUnavailable.
func (r *Refusal) Unwrap() error { return r.Err }

// StoreError is a Store that could not answer: Redis unreachable, slow or failing. It matches
// ErrStoreUnavailable.
type StoreError struct {
	// Op is what failed: OpAcquire, OpRelease or OpRefresh.
	Op Op
	// Err is the underlying error.
	Err error
}

func (e *StoreError) Error() string { return fmt.Sprintf("limit: quota store %s: %v", e.Op, e.Err) }

// Unwrap returns the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// Is reports ErrStoreUnavailable.
func (e *StoreError) Is(target error) bool { return target == ErrStoreUnavailable }
