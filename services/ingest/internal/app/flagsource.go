package app

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"

	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// flagSource holds the flags of a single source given on the command line (--url and friends), for quick
// use without a sources file. The flags are flags only: no environment variable, no file key.
type flagSource struct {
	url, topic, name, format, key, bearerEnv string
	headers                                  headerList
}

// headerList is a repeatable "K: V" flag; each use adds one header (values may hold commas).
type headerList []string

func (h *headerList) String() string { return strings.Join(*h, "; ") }

func (h *headerList) Set(s string) error { *h = append(*h, s); return nil }

func (f *flagSource) settings() []settings.Setting {
	s := func(name, usage string, v *string) settings.Setting {
		return settings.Setting{Name: name, Usage: usage, Value: settings.String(v), FlagOnly: true}
	}
	return []settings.Setting{
		s("url", "SSE URL of a single source given by flags, instead of a sources file", &f.url),
		s("topic", "Kafka topic of the --url source", &f.topic),
		s("name", "name of the --url source (default: derived from the URL's host and path)", &f.name),
		s("format", "record format of the --url source: envelope, raw or cloudevents (default envelope)", &f.format),
		s("key", "record key of the --url source: id, event, json:<field> or none (default none)", &f.key),
		{Name: "header", Usage: "request header 'K: V' of the --url source (repeatable)", Value: &f.headers, FlagOnly: true},
		s("bearer-token-env", "environment variable holding a bearer token for the --url source", &f.bearerEnv),
	}
}

// set reports whether any of the source flags was given.
func (f *flagSource) set() bool {
	return f.url != "" || f.topic != "" || f.name != "" || f.format != "" || f.key != "" || f.bearerEnv != "" || len(f.headers) > 0
}

// flagError names the flag at fault.
func flagError(flag, format string, args ...any) error {
	return fmt.Errorf("invalid flag --%s: %s", flag, fmt.Sprintf(format, args...))
}

// spec validates the flags and builds the source. The bearer token is read from getenv now.
func (f *flagSource) spec(getenv func(string) string) (source.Spec, error) {
	u, err := url.Parse(f.url)
	if f.url == "" {
		return source.Spec{}, flagError("url", "required with the other source flags")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return source.Spec{}, flagError("url", "want an http or https URL, got %q", f.url)
	}
	spec := source.Spec{URL: f.url, Topic: f.topic, Name: f.name}
	if !validTopic(f.topic) {
		return source.Spec{}, flagError("topic", "want a valid Kafka topic name, got %q", f.topic)
	}
	if spec.Name == "" {
		spec.Name = nameFromURL(u)
	} else if !sourceName.MatchString(spec.Name) {
		return source.Spec{}, flagError("name", "use letters, digits, '.', '_' and '-' only (at most 200), got %q", spec.Name)
	}
	if spec.Format, err = source.ParseFormat(f.format); err != nil {
		return source.Spec{}, flagError("format", "%s", err.Error())
	}
	if spec.Key, err = source.ParseKey(f.key); err != nil {
		return source.Spec{}, flagError("key", "%s", err.Error())
	}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "" || strings.ContainsAny(k, " \t\r\n\x00"):
			return source.Spec{}, flagError("header", "want 'Name: value', got %q", h)
		case strings.ContainsAny(v, "\r\n\x00"):
			return source.Spec{}, flagError("header", "the value of %s holds CR, LF or NUL", k)
		}
		switch textproto.CanonicalMIMEHeaderKey(k) {
		case "Last-Event-Id":
			return source.Spec{}, flagError("header", "Last-Event-ID is set by ingest from its checkpoint")
		case "Authorization":
			if f.bearerEnv != "" {
				return source.Spec{}, flagError("header", "Authorization is set by --bearer-token-env; give one or the other")
			}
		}
		if spec.Header == nil {
			spec.Header = http.Header{}
		}
		spec.Header.Add(k, v)
	}
	if f.bearerEnv != "" {
		tok := getenv(f.bearerEnv)
		if tok == "" {
			return source.Spec{}, flagError("bearer-token-env", "the environment variable %s is empty or unset", f.bearerEnv)
		}
		spec.Auth = source.Auth{Kind: source.AuthBearer, Secret: source.SecretValue(tok)}
	}
	return spec, nil
}

// unsafeName matches the runs of characters a source name cannot hold.
var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// nameFromURL derives a source name from the URL's host and path: "https://api.example.com:8443/v1/feed"
// becomes "api.example.com-8443-v1-feed". Query and fragment are left out (they may hold secrets).
func nameFromURL(u *url.URL) string {
	n := unsafeName.ReplaceAllString(u.Host+u.EscapedPath(), "-")
	n = strings.Trim(n, "-.")
	if len(n) > 200 {
		n = strings.TrimRight(n[:200], "-.")
	}
	if n == "" {
		return "source"
	}
	return n
}

// errFlagAndFile is returned when a flag source and a file's sources are both given.
var errFlagAndFile = errors.New("invalid flag --url: give a source with --url or a sources file (--config with sources), not both")
