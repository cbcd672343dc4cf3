package source

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
)

// Spec is one source: where to read events and how to turn them into records.
type Spec struct {
	// Name identifies the source: the checkpoint key, the "source" record header, part of the
	// transactional id. Required.
	Name string
	// URL is the SSE endpoint, http or https. Required.
	URL string
	// Topic is the Kafka topic the records go to. Required.
	Topic string
	// Header holds request headers sent on every connection. Nil means none.
	Header http.Header
	// Auth is sent on every connection. The zero value means none.
	Auth Auth
	// Redirects says which redirects are followed; whatever it says, Header and Auth are sent only to the
	// origin of URL. The zero value is RedirectSameOrigin.
	Redirects RedirectPolicy
	// Events is the set of event types written; nil or empty means every type.
	Events []string
	// Key says what becomes the record key. The zero value is KeyNone.
	Key Key
	// Format says what becomes the record value and headers. The zero value is FormatEnvelope.
	Format Format
	// StartID, when StartSet is true, is the Last-Event-ID of the first connection of a source that has
	// no checkpoint yet. StartSet false means start at the server's live point ("latest").
	StartID  string
	StartSet bool
	// CreateTopic says whether and how Topic is created when it does not exist. The zero value means it is
	// not: the source reports it missing and retries.
	CreateTopic TopicCreation
}

// AuthKind is the kind of authentication sent with each request.
type AuthKind int

// The authentication kinds.
const (
	AuthNone AuthKind = iota
	AuthBasic
	AuthBearer
)

// Auth is a source's authentication.
type Auth struct {
	Kind AuthKind
	// Username is the basic auth user name.
	Username string
	// Secret is the basic auth password or the bearer token.
	Secret Secret
}

// Secret is a password or token: a value (taken from the environment at start-up) or a file read at
// every connection, so a rotated token is picked up on the next reconnect. It never prints its value.
type Secret struct {
	value string
	file  string
}

// SecretValue returns a Secret holding v.
func SecretValue(v string) Secret { return Secret{value: v} }

// SecretFile returns a Secret read from path at every use.
func SecretFile(path string) Secret { return Secret{file: path} }

// Get returns the secret, reading its file if it has one.
func (s Secret) Get() (string, error) {
	if s.file == "" {
		return s.value, nil
	}
	b, err := os.ReadFile(s.file)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// String hides the value.
func (s Secret) String() string { return "[redacted]" }

// GoString hides the value from %#v.
func (s Secret) GoString() string { return "source.Secret{[redacted]}" }

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// KeyKind says where a record key comes from.
type KeyKind int

// The key kinds.
const (
	KeyNone  KeyKind = iota // no key
	KeyID                   // the event's id (the stream's last event id after it)
	KeyEvent                // the event type
	KeyJSON                 // a top-level field of the event's JSON data
)

// Key is a key rule.
type Key struct {
	Kind KeyKind
	// Field is the JSON field for KeyJSON.
	Field string
}

// ParseKey parses a key rule: "id", "event", "json:<field>" or "none"; empty means "none".
func ParseKey(s string) (Key, error) {
	switch {
	case s == "" || s == "none":
		return Key{Kind: KeyNone}, nil
	case s == "id":
		return Key{Kind: KeyID}, nil
	case s == "event":
		return Key{Kind: KeyEvent}, nil
	case strings.HasPrefix(s, "json:") && len(s) > len("json:"):
		return Key{Kind: KeyJSON, Field: s[len("json:"):]}, nil
	}
	return Key{}, fmt.Errorf("%q: want id, event, json:<field> or none", s)
}

// Format says how an event becomes a record.
type Format int

// The record formats.
const (
	// FormatEnvelope writes the JSON object {"event","id","data"}, all strings.
	FormatEnvelope Format = iota
	// FormatRaw writes the event data as the value.
	FormatRaw
	// FormatCloudEvents writes a binary-mode CloudEvent: ce_* headers and the data as the value.
	FormatCloudEvents
)

// ParseFormat parses "envelope", "raw" or "cloudevents"; empty means "envelope".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "envelope":
		return FormatEnvelope, nil
	case "raw":
		return FormatRaw, nil
	case "cloudevents":
		return FormatCloudEvents, nil
	}
	return 0, fmt.Errorf("%q: want envelope, raw or cloudevents", s)
}

// ParseStart parses "latest" (or empty) or "id:<last-event-id>" and returns the id and whether one was
// given.
func ParseStart(s string) (string, bool, error) {
	switch {
	case s == "" || s == "latest":
		return "", false, nil
	case strings.HasPrefix(s, "id:"):
		id := s[len("id:"):]
		if strings.ContainsAny(id, "\x00\r\n") {
			return "", false, fmt.Errorf("%q: an event id cannot hold NUL, CR or LF", s)
		}
		return id, true, nil
	}
	return "", false, fmt.Errorf("%q: want latest or id:<last-event-id>", s)
}
