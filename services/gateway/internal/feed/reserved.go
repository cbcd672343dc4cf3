package feed

import (
	"slices"
	"strings"
)

// The gateway's own event types. A client tells the gateway's frames from records by their type alone: an
// EventSource hands each type to its own listeners, the browser client ssegate.js reopens the stream at
// token-expired, a WebSocket client switches on a message's event. So no record reaches a client under one of
// these types: publishing refuses them (see ReservedType), and a record read from Kafka that carries one gets
// it with RenamedPrefix before it (see AppendFrame). Inside the gateway its own frames are known by what they
// are (ring.Frame.Own, the stream's typed writes), never by this text.
const (
	// EventResync: a stream's position moved past offsets the client will never get.
	EventResync = "resync"
	// EventResumed: with explain=1, where a resume is served from.
	EventResumed = "resumed"
	// EventLive: a from=snapshot stream's snapshot is complete.
	EventLive = "live"
	// EventOpened: with opened=1, the opening block's id again, as an event a page is handed.
	EventOpened = "opened"
	// EventTokenExpiring: the stream's token expires soon.
	EventTokenExpiring = "token-expiring" //nolint:gosec // an event type, not a credential
	// EventTokenExpired: the stream's token expired; the stream ends.
	EventTokenExpired = "token-expired"
	// EventOpen, EventPosition and EventDrain are the WebSocket messages of a stream's start, of a position
	// with no record, and of a drain.
	EventOpen     = "open"
	EventPosition = "position"
	EventDrain    = "drain"
	// EventPublished and EventPublishError answer a WebSocket client's message to publish.
	EventPublished    = "published"
	EventPublishError = "publish-error"
	// EventError is EventSource's own: a frame of this type would call a page's onerror.
	EventError = "error"
)

// RenamedPrefix is put before the type of a record read from Kafka whose type is reserved: a record with the
// header "event: resync" reaches clients as "record.resync", and the event query parameter (a token's event
// scope too) matches it under that name only.
const RenamedPrefix = "record."

// reservedTypes are the types no record carries to a client, ascending.
var reservedTypes = []string{
	DeleteEvent, EventDrain, EventError, EventLive, EventOpen, EventOpened, EventPosition, EventPublishError,
	EventPublished, EventResumed, EventResync, EventTokenExpired, EventTokenExpiring,
}

// ReservedTypes returns the reserved event types (see RenamedPrefix), ascending.
func ReservedTypes() []string { return slices.Clone(reservedTypes) }

// Reserved says t, an event type as a client reads it, is one of the gateway's own (or EventSource's, or the
// tombstone's "delete"): a record does not reach a client under it.
func Reserved(t string) bool { return reserved([]byte(t)) }

// reserved is Reserved without a conversion: it runs for every record framed.
func reserved(t []byte) bool {
	switch string(t) {
	case DeleteEvent, EventDrain, EventError, EventLive, EventOpen, EventOpened, EventPosition, EventPublishError,
		EventPublished, EventResumed, EventResync, EventTokenExpired, EventTokenExpiring:
		return true
	}
	return false
}

// ReservedType says an event type header's value (event, ce_type) would reach a client as a reserved type,
// and returns that type: what publishing refuses.
func ReservedType(headerValue []byte) (string, bool) {
	t := clientType(headerValue)
	return string(t), reserved(t)
}

// ReservedRule is the sentence an answer refusing a reserved type gives.
var ReservedRule = "the event types " + strings.Join(reservedTypes, ", ") + " are the gateway's own; " +
	"a record cannot carry one (a record read from Kafka with one reaches clients as " + RenamedPrefix + "<type>)"

// recordType returns the type a client sees of a record whose event type header holds t: t as clientType
// gives it, with RenamedPrefix before it when that is reserved.
func recordType(t []byte) []byte {
	t = clientType(t)
	if reserved(t) {
		return append([]byte(RenamedPrefix), t...)
	}
	return t
}
