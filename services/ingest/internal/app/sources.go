package app

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// sourceKeys and authKeys are the keys a source entry and its auth map may have.
var (
	sourceKeys = []string{
		"name", "url", "topic", "headers", "auth", "follow-redirects", "events", "key", "format", "start",
		"create-topics", "create-topics-partitions", "create-topics-replication-factor",
	}
	authKeys = []string{"type", "username", "password_env", "password_file", "token_env", "token_file"}
)

// sourceError names the source and setting at fault, on one line.
func sourceError(i int, name, setting, format string, args ...any) error {
	who := fmt.Sprintf("sources[%d]", i)
	if name != "" {
		who = fmt.Sprintf("%q (sources[%d])", name, i)
	}
	return fmt.Errorf("invalid source %s: setting %s: %s", who, setting, fmt.Sprintf(format, args...))
}

// parseSources turns the file's "sources" list into specs. Secrets named by *_env are read from getenv
// now; *_file secrets are checked now and read again at every connection. create is the global
// create-topics setting, which a source's own keys override.
func parseSources(raw any, create source.TopicCreation, getenv func(string) string) ([]source.Spec, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, errors.New("invalid setting sources (config file): want a list of sources")
	}
	specs := make([]source.Spec, 0, len(list))
	for i, e := range list {
		spec, err := parseSource(i, e, create, getenv)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func parseSource(i int, raw any, create source.TopicCreation, getenv func(string) string) (source.Spec, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return source.Spec{}, fmt.Errorf("invalid source sources[%d]: want a map with name, url and topic", i)
	}
	str := func(key string) (string, bool) {
		v, ok := m[key]
		if !ok || v == nil {
			return "", true
		}
		s, isStr := v.(string)
		return s, isStr
	}
	name, ok := str("name")
	if !ok || name == "" {
		return source.Spec{}, sourceError(i, "", "name", "required, a string")
	}
	if !sourceName.MatchString(name) {
		return source.Spec{}, sourceError(i, name, "name", "use letters, digits, '.', '_' and '-' only (at most 200)")
	}
	bad := func(setting, format string, args ...any) (source.Spec, error) {
		return source.Spec{}, sourceError(i, name, setting, format, args...)
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(sourceKeys, k) {
			return bad(k, "unknown setting (want one of %s)", strings.Join(sourceKeys, ", "))
		}
	}
	spec := source.Spec{Name: name}
	spec.URL, ok = str("url")
	if u, err := url.Parse(spec.URL); !ok || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", "want an http or https URL, got %q", spec.URL)
	}
	spec.Topic, ok = str("topic")
	if !ok || !validTopic(spec.Topic) {
		return bad("topic", "want a valid Kafka topic name, got %q", spec.Topic)
	}
	header, serr := parseHeaders(m)
	if serr != nil {
		return bad(serr.setting, "%s", serr.msg)
	}
	spec.Header = header
	if a, ok := m["auth"]; ok && a != nil {
		auth, err := parseAuth(a, getenv)
		if err != nil {
			return bad("auth", "%s", err.Error())
		}
		spec.Auth = auth
	}
	if ev, ok := m["events"]; ok && ev != nil {
		evs, ok := ev.([]any)
		if !ok {
			return bad("events", "want a list of event types")
		}
		for _, e := range evs {
			s, ok := e.(string)
			if !ok || s == "" {
				return bad("events", "want non-empty event type strings, got %v", e)
			}
			spec.Events = append(spec.Events, s)
		}
	}
	if serr = parseRules(m, &spec); serr != nil {
		return bad(serr.setting, "%s", serr.msg)
	}
	if spec.CreateTopic, serr = parseTopicCreation(m, create); serr != nil {
		return bad(serr.setting, "%s", serr.msg)
	}
	return spec, nil
}

// settingError is what is wrong with one key of a source.
type settingError struct{ setting, msg string }

// parseHeaders returns a source's headers setting; nil when it has none.
func parseHeaders(m map[string]any) (http.Header, *settingError) {
	h, ok := m["headers"]
	if !ok || h == nil {
		return nil, nil
	}
	hm, ok := h.(map[string]any)
	if !ok {
		return nil, &settingError{"headers", "want a map of header name to value"}
	}
	header := http.Header{}
	for _, k := range sortedKeys(hm) {
		v, ok := hm[k].(string)
		if !ok {
			v = fmt.Sprint(hm[k])
		}
		switch {
		case k == "" || strings.ContainsAny(k, " :\r\n\x00"):
			return nil, &settingError{"headers", fmt.Sprintf("%q is not a header name", k)}
		case strings.ContainsAny(v, "\r\n\x00"):
			return nil, &settingError{"headers", fmt.Sprintf("the value of %s holds CR, LF or NUL", k)}
		}
		switch textproto.CanonicalMIMEHeaderKey(k) {
		case "Last-Event-Id":
			return nil, &settingError{"headers", "Last-Event-ID is set by ingest from its checkpoint (use start: id:<id>)"}
		case "Authorization":
			if _, has := m["auth"]; has {
				return nil, &settingError{"headers", "Authorization is set by auth; give one or the other"}
			}
		}
		header.Set(k, v)
	}
	return header, nil
}

// parseRules sets the settings of spec that are one string each, parsed by package source: key, format,
// start and follow-redirects. An absent key means the empty string, each parser's default.
func parseRules(m map[string]any, spec *source.Spec) *settingError {
	rules := []struct {
		key string
		set func(string) error
	}{
		{"key", func(v string) (err error) { spec.Key, err = source.ParseKey(v); return err }},
		{"format", func(v string) (err error) { spec.Format, err = source.ParseFormat(v); return err }},
		{"start", func(v string) (err error) { spec.StartID, spec.StartSet, err = source.ParseStart(v); return err }},
		{"follow-redirects", func(v string) (err error) { spec.Redirects, err = source.ParseRedirectPolicy(v); return err }},
	}
	for _, r := range rules {
		raw := m[r.key]
		v, isStr := raw.(string)
		if raw != nil && !isStr {
			return &settingError{r.key, "want a string"}
		}
		if err := r.set(v); err != nil {
			return &settingError{r.key, err.Error()}
		}
	}
	return nil
}

// parseTopicCreation applies a source's create-topics keys over the global settings in c.
func parseTopicCreation(m map[string]any, c source.TopicCreation) (source.TopicCreation, *settingError) {
	if v, ok := m["create-topics"]; ok && v != nil {
		b, err := strconv.ParseBool(fmt.Sprint(v))
		if err != nil {
			return c, &settingError{"create-topics", fmt.Sprintf("want true or false, got %v", v)}
		}
		c.Enabled = b
	}
	num := func(key string, limit int) (int, *settingError) {
		n, err := strconv.Atoi(fmt.Sprint(m[key]))
		if err != nil || n < 0 || n > limit {
			return 0, &settingError{key, fmt.Sprintf("want zero (the broker's default) or a positive number up to %d, got %v", limit, m[key])}
		}
		return n, nil
	}
	if v, ok := m["create-topics-partitions"]; ok && v != nil {
		n, err := num("create-topics-partitions", maxPartitions)
		if err != nil {
			return c, err
		}
		c.Partitions = int32(n) //nolint:gosec // bounded by num
	}
	if v, ok := m["create-topics-replication-factor"]; ok && v != nil {
		n, err := num("create-topics-replication-factor", maxReplicationFactor)
		if err != nil {
			return c, err
		}
		c.ReplicationFactor = int16(n) //nolint:gosec // bounded by num
	}
	return c, nil
}

func parseAuth(raw any, getenv func(string) string) (source.Auth, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return source.Auth{}, errors.New("want a map with type basic or bearer")
	}
	get := func(k string) string { s, _ := m[k].(string); return s }
	for _, k := range sortedKeys(m) {
		if !slices.Contains(authKeys, k) {
			return source.Auth{}, fmt.Errorf("unknown key %q (want one of %s)", k, strings.Join(authKeys, ", "))
		}
		if _, isStr := m[k].(string); !isStr {
			return source.Auth{}, fmt.Errorf("%s: want a string", k)
		}
	}
	secret := func(prefix string) (source.Secret, error) {
		env, file := get(prefix+"_env"), get(prefix+"_file")
		switch {
		case env != "" && file != "":
			return source.Secret{}, fmt.Errorf("give %s_env or %s_file, not both", prefix, prefix)
		case env != "":
			v := getenv(env)
			if v == "" {
				return source.Secret{}, fmt.Errorf("%s_env: the environment variable %s is empty or unset", prefix, env)
			}
			return source.SecretValue(v), nil
		case file != "":
			s := source.SecretFile(file)
			v, err := s.Get()
			if err != nil {
				return source.Secret{}, fmt.Errorf("%s_file: %w", prefix, err)
			}
			if v == "" {
				return source.Secret{}, fmt.Errorf("%s_file: %s is empty", prefix, file)
			}
			return s, nil
		}
		return source.Secret{}, fmt.Errorf("%s_env or %s_file is required", prefix, prefix)
	}
	var a source.Auth
	var err error
	switch get("type") {
	case "basic":
		a.Kind, a.Username = source.AuthBasic, get("username")
		if a.Username == "" || strings.Contains(a.Username, ":") {
			return a, errors.New("username: required for basic auth, without ':'")
		}
		if get("token_env") != "" || get("token_file") != "" {
			return a, errors.New("basic auth takes password_env or password_file, not a token")
		}
		a.Secret, err = secret("password")
	case "bearer":
		a.Kind = source.AuthBearer
		if get("username") != "" || get("password_env") != "" || get("password_file") != "" {
			return a, errors.New("bearer auth takes token_env or token_file only")
		}
		a.Secret, err = secret("token")
	default:
		return a, fmt.Errorf("type: want basic or bearer, got %q", get("type"))
	}
	return a, err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
