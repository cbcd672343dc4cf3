package source

import "errors"

// Sentinel errors of the source package.
var (
	// ErrNoContent is returned by Run when the server answered 204 No Content: the source stops for good,
	// as the SSE standard tells a client to.
	ErrNoContent = errors.New("source: server answered 204 No Content; source stopped")
	// ErrBadSpec wraps what is wrong with a Spec or Options, naming the setting.
	ErrBadSpec = errors.New("source: invalid setting")
)

// errIdle is returned by an idleReader whose connection delivered no bytes within the idle timeout.
var errIdle = errors.New("source: no bytes within the idle timeout")
