package stream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/projection"
	"github.com/ssegate/ssegate/services/gateway/internal/valuefilter"
)

// Bounds of the heartbeat query parameter, in milliseconds (0 turns heartbeats off).
const (
	MinHeartbeatMs = 100
	MaxHeartbeatMs = 3_600_000
)

// Start positions for partitions without one (the from query parameter).
const (
	FromLatest   = "latest"
	FromEarliest = "earliest"
	// FromSnapshot starts with the latest record of each key, then "event: live", then every record (see
	// snapshot.go).
	FromSnapshot = "snapshot"
)

// Params are a stream request's parameters.
type Params struct {
	// Heartbeat is the idle time after which a comment is written; zero means none.
	Heartbeat time.Duration
	// Expires, when not zero, is when the client's token stops being accepted: the stream ends then, after an
	// "event: token-expired" frame whose id is the client's position, so that a reconnect with a new token
	// resumes exactly. Zero means the stream never expires. ParseParams leaves it zero; the caller sets it.
	Expires time.Time
	// ExpiryNotice is how long before Expires the stream gets an "event: token-expiring" frame (with the
	// client's position as its id), so that the page fetches a new token before the end. Zero means no
	// notice.
	ExpiryNotice time.Duration
	// Renewal, when not nil, may move Expires later while the stream runs (an authorization hook asked again):
	// at Expires the stream goes on to the Renewal's time if it is later. Nil means Expires is final.
	Renewal *Renewal
	// LastEventID is the position to resume from: the Last-Event-ID header, else the lastEventId or
	// last_event_id query parameter. Empty means a new stream. It is parsed when the stream starts, so that
	// a malformed one is answered in the stream (event: resync) rather than with an HTTP error that would
	// stop an EventSource for good.
	LastEventID string
	// From is where a new stream starts: FromLatest (the default), FromEarliest, or FromTime.
	From string
	// FromTime is the time a new stream starts at when From is "time".
	FromTime time.Time
	// Events, when not empty, keeps only frames of these event types.
	Events map[string]bool
	// Keys, when not empty, keeps only records with these keys; the stream's ids then list only the
	// partitions the keys are in (see Topic.KeysAnyPartition).
	Keys map[string]bool
	// Filter, when not nil, keeps only records it matches (the filter query parameter, combined by AND with
	// a token's filter, see NarrowFilter).
	Filter *valuefilter.Program
	// Fields, when not nil, sends of each record's JSON value only these fields (the fields query parameter);
	// values that are not JSON objects go as they are.
	Fields *projection.Fields
	// Conflate, when not zero, sends within each such interval only the latest record of each key (the
	// conflate query parameter, see conflate.go).
	Conflate time.Duration
	// Explain (the explain=1 query parameter) makes a resuming stream say where its resume comes from: an
	// "event: resumed" frame, with the client's position as its id and ResumedData as its data, before the
	// frames it missed. For dashboards and debugging; other clients never see the event.
	Explain bool
	// Opened (the opened=1 query parameter) follows the opening block with an "event: opened" frame of the
	// same id, whose data is {"id": that id}: an id-only block sets an EventSource's last event id without
	// firing an event, so a page (the browser client) learns where its stream started only from an event.
	Opened bool
	// OnEnd, when set, is called exactly once when the stream really ends, with the reason it ended: also
	// for a stream served by the writer pool, whose Serve returned a parked Outcome long before. It is called after
	// the end is counted in Stats and before the client can see the end, on whichever goroutine ends the
	// stream (a writer's, for a parked one), so it must not block. Nil means none. ParseParams leaves it
	// nil; the caller sets it.
	OnEnd func(CloseReason)

	// idErr is why the id of a stream of several topics could not be read (SplitID): each topic's stream
	// then tells it in a resync, as for an invalid id of its own.
	idErr error
}

// kept is what a started stream keeps of its Params: what its delivery, keep-alives, token and end need.
// Where the stream starts (LastEventID, From, FromTime) is read once, by the start; a parked connection
// carries only this.
type kept struct {
	Heartbeat time.Duration
	Events    map[string]bool
	Keys      map[string]bool
	Filter    *valuefilter.Program
	Fields    *projection.Fields
	Conflate  time.Duration
	OnEnd     func(CloseReason)
	Explain   bool
	Opened    bool
	expires   int64 // Params.Expires in Unix seconds (the token frames name it to the second); 0 for never
	renewal   *Renewal
}

// kept returns what a stream of t keeps of p: a topic conflated by its operator (Topic.Conflate) conflates
// every stream at least that much.
func (p *Params) kept(t *Topic) kept {
	k := kept{
		Heartbeat: p.Heartbeat, Events: p.Events, Keys: p.Keys, Filter: p.Filter, Fields: p.Fields,
		Conflate: max(p.Conflate, t.Conflate), OnEnd: p.OnEnd, Explain: p.Explain, Opened: p.Opened, renewal: p.Renewal,
	}
	if !p.Expires.IsZero() {
		k.expires = p.Expires.Unix()
	}
	return k
}

// ParamError is a malformed query parameter; it names the parameter.
type ParamError struct {
	Param string
	Msg   string
}

// Error returns a one-line message naming the parameter.
func (e *ParamError) Error() string { return fmt.Sprintf("query parameter %q: %s", e.Param, e.Msg) }

// flag reads a query parameter that is on or off: absent, 0 or false is off; given alone, 1 or true is on.
func flag(q url.Values, name string) (bool, error) {
	v, ok, err := single(q, name)
	if err != nil || !ok {
		return false, err
	}
	switch v {
	case "", "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, &ParamError{Param: name, Msg: fmt.Sprintf("want 1, true, 0 or false, got %q", v)}
}

func single(q url.Values, name string) (string, bool, error) {
	vs, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) != 1 {
		return "", true, &ParamError{Param: name, Msg: "given more than once"}
	}
	return vs[0], true, nil
}

// ParseParams reads the stream parameters from the request's query and headers, with defaultHeartbeat when
// the query has none. Parameters it does not know are ignored (cache-busting parameters are common). A
// malformed one is a *ParamError.
func ParseParams(q url.Values, h http.Header, defaultHeartbeat time.Duration) (Params, error) {
	p := Params{Heartbeat: defaultHeartbeat, From: FromLatest}
	v, ok, err := single(q, "heartbeat")
	if err != nil {
		return p, err
	}
	if ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (ms != 0 && (ms < MinHeartbeatMs || ms > MaxHeartbeatMs)) {
			return p, &ParamError{Param: "heartbeat", Msg: fmt.Sprintf(
				"want 0 (no heartbeat) or milliseconds from %d to %d, got %q", MinHeartbeatMs, MaxHeartbeatMs, v)}
		}
		p.Heartbeat = time.Duration(ms) * time.Millisecond
	}
	v, ok, err = single(q, "from")
	if err != nil {
		return p, err
	}
	if ok {
		switch v {
		case FromLatest, FromEarliest, FromSnapshot:
			p.From = v
		default:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return p, &ParamError{Param: "from", Msg: fmt.Sprintf(
					"want latest, earliest, snapshot or an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", v)}
			}
			// Kafka looks offsets up by milliseconds since the epoch, and negative ones are not times there
			// but special requests: 1969-12-31T23:59:59.999Z is -1, the end of the partition, and .998 is
			// -2, its start. So every time before the epoch is refused, not passed on.
			if t.Before(time.Unix(0, 0)) {
				return p, &ParamError{Param: "from", Msg: fmt.Sprintf(
					"want a time at or after 1970-01-01T00:00:00Z (Kafka timestamps start there), got %q", v)}
			}
			p.From, p.FromTime = "time", t
		}
	}
	if evs, ok := q["event"]; ok {
		p.Events = map[string]bool{}
		for _, e := range evs {
			if e == "" {
				return p, &ParamError{Param: "event", Msg: "empty event type"}
			}
			p.Events[e] = true
		}
	}
	if p.Explain, err = flag(q, "explain"); err != nil {
		return p, err
	}
	if p.Opened, err = flag(q, "opened"); err != nil {
		return p, err
	}
	if ks, ok := q["key"]; ok {
		p.Keys = map[string]bool{}
		for _, k := range ks {
			if k == "" {
				return p, &ParamError{Param: "key", Msg: "empty key"}
			}
			p.Keys[k] = true
		}
	}
	if v, ok, err := single(q, "filter"); err != nil {
		return p, err
	} else if ok {
		if p.Filter, err = valuefilter.Compile(v); err != nil {
			return p, &ParamError{Param: "filter", Msg: strings.TrimPrefix(err.Error(), "valuefilter: ")}
		}
	}
	if v, ok, err := single(q, "conflate"); err != nil {
		return p, err
	} else if ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinConflate || d > MaxConflate {
			return p, &ParamError{Param: "conflate", Msg: fmt.Sprintf("want a duration from %v to %v, such as 250ms, got %q", MinConflate, MaxConflate, v)}
		}
		p.Conflate = d
	}
	if v, ok, err := single(q, "fields"); err != nil {
		return p, err
	} else if ok {
		if p.Fields, err = projection.Parse(v); err != nil {
			return p, &ParamError{Param: "fields", Msg: strings.TrimPrefix(err.Error(), "projection: ")}
		}
	}
	// The header wins: EventSource sends it by itself on every reconnect, while the query parameter is what
	// the page was first opened with.
	if id := h.Get("Last-Event-ID"); id != "" {
		p.LastEventID = id
		return p, nil
	}
	for _, name := range []string{"lastEventId", "last_event_id"} {
		v, ok, err := single(q, name)
		if err != nil {
			return p, err
		}
		if ok && v != "" {
			p.LastEventID = v
			break
		}
	}
	return p, nil
}

// ErrOutOfScope is returned by Narrow when what a request asks for and what its token allows have nothing in
// common: a 403, rather than a stream that could never deliver anything.
var ErrOutOfScope = errors.New("stream: the request asks for nothing its token allows")

// ScopeError is a request that asks only for keys or event types its token does not allow; it names the
// query parameter.
type ScopeError struct {
	Param string
}

// Error says which parameter asks for nothing the token allows.
func (e *ScopeError) Error() string {
	return fmt.Sprintf("query parameter %q: none of the values is allowed by the token", e.Param)
}

// Unwrap returns ErrOutOfScope.
func (e *ScopeError) Unwrap() error { return ErrOutOfScope }

// Narrow applies what a client's token allows to p. keys and events, when not nil, are the only record keys
// and event types the token allows: without key= the stream gets exactly those keys; with key= it gets the
// keys both name (a query narrows a scope, it never widens it); the same for event=. An empty result (the
// query names only values outside the scope, or the token allows none) is a *ScopeError. Nil keeps p's own.
func (p *Params) Narrow(keys, events []string) error {
	var err error
	if keys != nil {
		if p.Keys, err = narrow(p.Keys, keys, "key"); err != nil {
			return err
		}
	}
	if events != nil {
		if p.Events, err = narrow(p.Events, events, "event"); err != nil {
			return err
		}
	}
	return nil
}

// NarrowFilter adds a token's filter expression to p's: the stream gets what both match. An expression that
// does not compile is an error (the token's issuer wrote it).
func (p *Params) NarrowFilter(expr string) error {
	if expr == "" {
		return nil
	}
	tf, err := valuefilter.Compile(expr)
	if err == nil {
		p.Filter, err = valuefilter.And(tf, p.Filter)
	}
	return err
}

// narrow returns the values of asked (all of allowed when asked is empty) that allowed has.
func narrow(asked map[string]bool, allowed []string, param string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, v := range allowed {
		if len(asked) == 0 || asked[v] {
			out[v] = true
		}
	}
	if len(out) == 0 {
		return nil, &ScopeError{Param: param}
	}
	return out, nil
}
