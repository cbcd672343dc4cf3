package source

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
)

func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestToRecord(t *testing.T) {
	ev := sse.Event{Type: "update", ID: "42", Data: `{"user":"ann","n":7,"html":"<b>"}`}
	tests := []struct {
		name      string
		key       string
		format    string
		ev        sse.Event
		wantKey   string
		noKey     bool
		wantValue string
		wantCE    map[string]string
	}{
		{name: "envelope default", ev: ev, noKey: true, wantValue: `{"event":"update","id":"42","data":"{\"user\":\"ann\",\"n\":7,\"html\":\"<b>\"}"}`},
		{name: "envelope message type", format: "envelope", ev: sse.Event{Type: "message", Data: "a\nb"}, noKey: true, wantValue: `{"event":"message","id":"","data":"a\nb"}`},
		{name: "raw", format: "raw", ev: ev, wantValue: ev.Data, noKey: true},
		{name: "key id", key: "id", format: "raw", ev: ev, wantKey: "42", wantValue: ev.Data},
		{name: "key event", key: "event", format: "raw", ev: ev, wantKey: "update", wantValue: ev.Data},
		{name: "key json string field", key: "json:user", format: "raw", ev: ev, wantKey: "ann", wantValue: ev.Data},
		{name: "key json number field", key: "json:n", format: "raw", ev: ev, wantKey: "7", wantValue: ev.Data},
		{name: "key json missing field", key: "json:nope", format: "raw", ev: ev, noKey: true, wantValue: ev.Data},
		{name: "key json not json", key: "json:user", format: "raw", ev: sse.Event{Type: "message", Data: "plain"}, noKey: true, wantValue: "plain"},
		{name: "key none", key: "none", format: "raw", ev: ev, noKey: true, wantValue: ev.Data},
		{
			name: "cloudevents", format: "cloudevents", ev: ev, noKey: true, wantValue: ev.Data,
			wantCE: map[string]string{"ce_specversion": "1.0", "ce_id": "42", "ce_source": "http://up/stream", "ce_type": "update"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey(tt.key)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ParseFormat(tt.format)
			if err != nil {
				t.Fatal(err)
			}
			spec := &Spec{Name: "src", URL: "http://up/stream", Topic: "out", Key: k, Format: f}
			rec, err := toRecord(spec, tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Topic != "out" {
				t.Errorf("topic %q", rec.Topic)
			}
			if tt.noKey != (rec.Key == nil) || (!tt.noKey && string(rec.Key) != tt.wantKey) {
				t.Errorf("key %q (nil %v), want %q (nil %v)", rec.Key, rec.Key == nil, tt.wantKey, tt.noKey)
			}
			if string(rec.Value) != tt.wantValue {
				t.Errorf("value\n got %s\nwant %s", rec.Value, tt.wantValue)
			}
			for k, want := range map[string]string{HeaderEvent: tt.ev.Type, HeaderID: tt.ev.ID, HeaderSource: "src"} {
				if got, _ := header(rec, k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			for k, want := range tt.wantCE {
				if got, _ := header(rec, k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if tt.wantCE == nil {
				if _, ok := header(rec, "ce_id"); ok {
					t.Error("ce_ headers on a non-CloudEvents record")
				}
			}
		})
	}
}

func TestCloudEventsWithoutIDGetsUniqueID(t *testing.T) {
	spec := &Spec{Name: "src", URL: "http://up", Topic: "out", Format: FormatCloudEvents}
	a, _ := toRecord(spec, sse.Event{Type: "message", Data: "x"})
	b, _ := toRecord(spec, sse.Event{Type: "message", Data: "x"})
	ida, _ := header(a, "ce_id")
	idb, _ := header(b, "ce_id")
	if ida == "" || ida == idb {
		t.Fatalf("ce_id %q and %q: want two different non-empty ids", ida, idb)
	}
}

func TestParseRules(t *testing.T) {
	tests := []struct {
		name string
		fn   func() error
		bad  bool
	}{
		{"key empty", func() error { _, err := ParseKey(""); return err }, false},
		{"key json without field", func() error { _, err := ParseKey("json:"); return err }, true},
		{"key unknown", func() error { _, err := ParseKey("offset"); return err }, true},
		{"format unknown", func() error { _, err := ParseFormat("avro"); return err }, true},
		{"start latest", func() error { _, _, err := ParseStart("latest"); return err }, false},
		{"start id", func() error { _, _, err := ParseStart("id:17"); return err }, false},
		{"start id with LF", func() error { _, _, err := ParseStart("id:1\n2"); return err }, true},
		{"start unknown", func() error { _, _, err := ParseStart("earliest"); return err }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.fn(); (err != nil) != tt.bad {
				t.Fatalf("err = %v, want error %v", err, tt.bad)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	spec := &Spec{Events: []string{"a", "b"}}
	for typ, want := range map[string]bool{"a": true, "b": true, "message": false, "": false} {
		if got := wanted(spec, typ); got != want {
			t.Errorf("wanted(%q) = %v", typ, got)
		}
	}
	if !wanted(&Spec{}, "anything") {
		t.Error("an empty filter must pass every type")
	}
}

func TestBackoff(t *testing.T) {
	b := &backoff{min: 100 * time.Millisecond, max: time.Second}
	var got []time.Duration
	for range 6 {
		got = append(got, b.next())
	}
	bases := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, d := range got {
		base := bases[i] * time.Millisecond
		if d < base || d > base+base/4 {
			t.Errorf("delay %d = %v, want in [%v, %v]", i, d, base, base+base/4)
		}
	}
	b.reset()
	b.retry, b.hasRetry = 3*time.Second, true // a server retry: above the cap is honored
	if d := b.next(); d < 3*time.Second {
		t.Errorf("delay with retry: 3s = %v", d)
	}
}

func TestBackoffRetryZero(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		retry time.Duration
		set   bool
		want  []time.Duration // bases; each delay is in [base, base+base/4]
	}{
		{"no retry: field", 0, false, []time.Duration{100 * ms, 200 * ms, 400 * ms}},
		{"retry: 0 reconnects at once, then backs off from the minimum", 0, true, []time.Duration{0, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"retry: 30", 30 * ms, true, []time.Duration{30 * ms, 60 * ms, 120 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backoff{min: 100 * ms, max: time.Second, retry: tt.retry, hasRetry: tt.set}
			for i, base := range tt.want {
				if d := b.next(); d < base || d > base+base/4 {
					t.Errorf("delay %d = %v, want in [%v, %v]", i, d, base, base+base/4)
				}
			}
			b.reset()
			if d := b.next(); d > tt.want[0]+tt.want[0]/4 {
				t.Errorf("delay after reset = %v, want about %v", d, tt.want[0])
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name, v string
		want    time.Duration
	}{
		{"empty", "", 0},
		{"seconds", "7", 7 * time.Second},
		{"date", now.Add(90 * time.Second).Format(timeFormat), 90 * time.Second},
		{"past date", now.Add(-time.Minute).Format(timeFormat), 0},
		{"garbage", "soon", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.v, now); got != tt.want {
				t.Fatalf("retryAfter(%q) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

const timeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		s := r.String()
		if s == "" || s == "unknown" || seen[s] || strings.ContainsAny(s, " _") {
			t.Errorf("reason %d has a bad or repeated label %q", r, s)
		}
		seen[s] = true
	}
}
