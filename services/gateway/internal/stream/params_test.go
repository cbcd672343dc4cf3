package stream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestParseParamsFrom: the from parameter takes latest, earliest or an RFC 3339 time at or after the epoch;
// a time before it would reach Kafka as one of its special negative timestamps (-1 latest, -2 earliest), so it
// is a 400 naming from.
func TestParseParamsFrom(t *testing.T) {
	tests := []struct {
		name     string
		query    string
		wantFrom string
		wantTime time.Time
		wantErr  string // a substring of the error; empty means no error
	}{
		{name: "default", query: "", wantFrom: FromLatest},
		{name: "latest", query: "from=latest", wantFrom: FromLatest},
		{name: "earliest", query: "from=earliest", wantFrom: FromEarliest},
		{name: "time", query: "from=2026-01-02T15:04:05Z", wantFrom: "time", wantTime: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{
			name: "time with fraction and zone", query: "from=2026-01-02T16:04:05.25%2B01:00",
			wantFrom: "time", wantTime: time.Date(2026, 1, 2, 15, 4, 5, 250e6, time.UTC),
		},
		{name: "the epoch itself", query: "from=1970-01-01T00:00:00Z", wantFrom: "time", wantTime: time.Unix(0, 0)},
		{name: "the epoch in another zone", query: "from=1970-01-01T01:00:00%2B01:00", wantFrom: "time", wantTime: time.Unix(0, 0)},
		{name: "one second before the epoch", query: "from=1969-12-31T23:59:59Z", wantErr: "1970-01-01T00:00:00Z"},
		{name: "-1 ms, Kafka's latest", query: "from=1969-12-31T23:59:59.999Z", wantErr: "1970-01-01T00:00:00Z"},
		{name: "-2 ms, Kafka's earliest", query: "from=1969-12-31T23:59:59.998Z", wantErr: "1970-01-01T00:00:00Z"},
		{name: "rounds to -1 ms", query: "from=1969-12-31T23:59:59.9995Z", wantErr: "1970-01-01T00:00:00Z"},
		{name: "before the epoch by a zone", query: "from=1970-01-01T00:30:00%2B01:00", wantErr: "1970-01-01T00:00:00Z"},
		{name: "year one", query: "from=0001-01-01T00:00:00Z", wantErr: "1970-01-01T00:00:00Z"},
		{name: "not a time", query: "from=yesterday", wantErr: "RFC 3339"},
		{name: "no zone", query: "from=2026-01-02T15:04:05", wantErr: "RFC 3339"},
		{name: "empty", query: "from=", wantErr: "RFC 3339"},
		{name: "given twice", query: "from=latest&from=earliest", wantErr: "given more than once"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParseParams(q, nil, time.Second)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseParams(%q): %v", tc.query, err)
				}
				if p.From != tc.wantFrom || !p.FromTime.Equal(tc.wantTime) {
					t.Fatalf("ParseParams(%q) = from %q time %v, want %q %v", tc.query, p.From, p.FromTime, tc.wantFrom, tc.wantTime)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != "from" {
				t.Fatalf("ParseParams(%q) = %+v, %v; want a *ParamError for from", tc.query, p, err)
			}
			if !strings.Contains(err.Error(), `"from"`) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not name from or lacks %q", err, tc.wantErr)
			}
		})
	}
}

// TestNarrow: a token's keys and events narrow a stream's: without key= (event=) the stream gets the token's,
// with them the values both name; nothing in common is a *ScopeError naming the parameter; nil leaves the
// query's as they are.
func TestNarrow(t *testing.T) {
	set := func(vs ...string) map[string]bool {
		if vs == nil {
			return nil
		}
		m := map[string]bool{}
		for _, v := range vs {
			m[v] = true
		}
		return m
	}
	for _, tc := range []struct {
		name                 string
		query                string
		keys, events         []string
		wantKeys, wantEvents map[string]bool
		wantErr              string // the parameter of the *ScopeError; empty means none
	}{
		{name: "no scope", query: "key=a&event=x", wantKeys: set("a"), wantEvents: set("x")},
		{name: "forced keys", keys: []string{"user-42"}, wantKeys: set("user-42")},
		{name: "forced keys, query narrows", query: "key=user-42", keys: []string{"user-42", "user-7"}, wantKeys: set("user-42")},
		{name: "query cannot widen", query: "key=user-42&key=user-7", keys: []string{"user-42"}, wantKeys: set("user-42")},
		{name: "query outside the scope", query: "key=user-7", keys: []string{"user-42"}, wantErr: "key"},
		{name: "token allows no key", keys: []string{}, wantErr: "key"},
		{name: "forced events", query: "key=a", events: []string{"order.paid"}, wantKeys: set("a"), wantEvents: set("order.paid")},
		{name: "events outside the scope", query: "event=order.created", events: []string{"order.paid"}, wantErr: "event"},
		{name: "both", query: "event=order.paid&event=x", keys: []string{"k"}, events: []string{"order.paid"}, wantKeys: set("k"), wantEvents: set("order.paid")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			p, err := ParseParams(q, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Narrow(tc.keys, tc.events)
			if tc.wantErr != "" {
				var se *ScopeError
				if !errors.As(err, &se) || se.Param != tc.wantErr || !errors.Is(err, ErrOutOfScope) {
					t.Fatalf("Narrow = %v, want a *ScopeError for %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(p.Keys) != fmt.Sprint(tc.wantKeys) || fmt.Sprint(p.Events) != fmt.Sprint(tc.wantEvents) {
				t.Fatalf("keys %v events %v, want %v %v", p.Keys, p.Events, tc.wantKeys, tc.wantEvents)
			}
		})
	}
}

// TestParseParamsExplain: explain is a flag; anything else is a 400 naming it.
func TestParseParamsExplain(t *testing.T) {
	for query, want := range map[string]any{
		"": false, "explain": true, "explain=1": true, "explain=true": true, "explain=0": false, "explain=false": false,
		"explain=yes": "want 1, true, 0 or false", "explain=1&explain=1": "given more than once",
	} {
		q, _ := url.ParseQuery(query)
		p, err := ParseParams(q, http.Header{}, 0)
		if msg, isErr := want.(string); isErr {
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != "explain" || !strings.Contains(err.Error(), msg) {
				t.Errorf("%q: %v, want a ParamError naming explain: %s", query, err, msg)
			}
			continue
		}
		if err != nil || p.Explain != want {
			t.Errorf("%q: explain %v, %v; want %v", query, p.Explain, err, want)
		}
	}
}

// TestParseParamsFilterRegex: a filter whose regex is too large, or is not a regex, is a 400 naming filter
// that says why, before any stream starts.
func TestParseParamsFilterRegex(t *testing.T) {
	for expr, want := range map[string]string{
		`key.matches("[a-z]{1,1000}")`: "regex program size 2001 exceeds limit of 1000",
		`key.matches("(unclosed")`:     "invalid matches argument",
	} {
		_, err := ParseParams(url.Values{"filter": {expr}}, http.Header{}, 0)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != "filter" || !strings.Contains(err.Error(), want) {
			t.Errorf("filter %q: %v, want a ParamError naming filter: %s", expr, err, want)
		}
	}
}

// TestNarrowFilterLong: a token's filter of up to 1024 bytes narrows a query's filter of up to 1024 bytes;
// the two together are not one expression past the length bound (which refused the token, 401 bad_claim).
func TestNarrowFilterLong(t *testing.T) {
	long := `value.a == 1` + strings.Repeat(` || value.nothing == 0`, 45)
	p, err := ParseParams(url.Values{"filter": {long}}, http.Header{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.NarrowFilter(strings.Replace(long, "value.a", "value.b", 1)); err != nil {
		t.Fatalf("a token's filter of %d bytes on a query's of %d: %v", len(long), len(long), err)
	}
	if !p.Filter.Match([]byte(`{"a":1,"b":1}`), nil, "message") || p.Filter.Match([]byte(`{"a":1,"b":2}`), nil, "message") {
		t.Error("the narrowed filter does not match what both match")
	}
}
