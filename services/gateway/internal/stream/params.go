package stream

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Bounds of the heartbeat query parameter, in milliseconds (0 turns heartbeats off).
const (
	MinHeartbeatMs = 100
	MaxHeartbeatMs = 3_600_000
)

// Params are a stream request's query parameters.
type Params struct {
	// Heartbeat is the idle time after which a comment is written; zero means none.
	Heartbeat time.Duration
}

// ParamError is a malformed query parameter; it names the parameter.
type ParamError struct {
	Param string
	Msg   string
}

// Error returns a one-line message naming the parameter.
func (e *ParamError) Error() string { return fmt.Sprintf("query parameter %q: %s", e.Param, e.Msg) }

// ParseParams reads the stream parameters from q, with defaultHeartbeat when q has none. Parameters it does
// not know are ignored (cache-busting parameters are common). A malformed one is a *ParamError.
func ParseParams(q url.Values, defaultHeartbeat time.Duration) (Params, error) {
	p := Params{Heartbeat: defaultHeartbeat}
	if vs, ok := q["heartbeat"]; ok {
		if len(vs) != 1 {
			return p, &ParamError{Param: "heartbeat", Msg: "given more than once"}
		}
		ms, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil || (ms != 0 && (ms < MinHeartbeatMs || ms > MaxHeartbeatMs)) {
			return p, &ParamError{Param: "heartbeat", Msg: fmt.Sprintf(
				"want 0 (no heartbeat) or milliseconds from %d to %d, got %q", MinHeartbeatMs, MaxHeartbeatMs, vs[0])}
		}
		p.Heartbeat = time.Duration(ms) * time.Millisecond
	}
	return p, nil
}
