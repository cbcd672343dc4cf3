package source

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// wantLog returns "event-from" .. "event-to".
func wantLog(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, "event-"+strconv.Itoa(i))
	}
	return out
}

func TestHeadersAndAuthOnEveryConnect(t *testing.T) {
	srv := ssetest.New(t,
		ssetest.Log(ssetest.LogConfig{Events: 2}),
		ssetest.Log(ssetest.LogConfig{Events: 4}),
		ssetest.Log(ssetest.LogConfig{Events: 4, Hold: true}),
	)
	opt := testOptions(t)
	topic := kafkatest.NewTopic(t, 1, nil)
	spec := Spec{
		Name: "auth", URL: srv.URL + "/stream", Topic: topic, Format: FormatRaw,
		Header:   http.Header{"X-Tenant": {"acme"}},
		Auth:     Auth{Kind: AuthBearer, Secret: SecretValue("s3cret")},
		StartID:  "0",
		StartSet: true,
	}
	start(t, spec, opt)
	checkFor(t, 30*time.Second, "three connections", func() bool { return srv.Connections() >= 3 })
	reqs := srv.Requests()
	wantLast := []string{"0", "2", "4"}
	for i, r := range reqs[:3] {
		if got := r.Header.Get("Authorization"); got != "Bearer s3cret" {
			t.Errorf("connection %d: Authorization %q", i, got)
		}
		if got := r.Header.Get("X-Tenant"); got != "acme" {
			t.Errorf("connection %d: X-Tenant %q", i, got)
		}
		if got := r.Header.Get("Accept"); got != "text/event-stream" {
			t.Errorf("connection %d: Accept %q", i, got)
		}
		if got := r.Header.Get("Last-Event-ID"); got != wantLast[i] {
			t.Errorf("connection %d: Last-Event-ID %q, want %q", i, got, wantLast[i])
		}
	}
	checkFor(t, 30*time.Second, "4 records", func() bool { return len(readCommitted(t, topic)) >= 4 })
	if got := values(readCommitted(t, topic)); !slices.Equal(got, wantLog(1, 4)) {
		t.Fatalf("records %q", got)
	}
}

func TestBasicAuthFromFileOnReconnect(t *testing.T) {
	srv := ssetest.New(t, ssetest.Script(false, "data: x\n\n"), ssetest.Script(true))
	opt := testOptions(t)
	file := t.TempDir() + "/pw"
	writeFile(t, file, "first\n")
	spec := Spec{
		Name: "basic", URL: srv.URL, Topic: kafkatest.NewTopic(t, 1, nil),
		Auth: Auth{Kind: AuthBasic, Username: "ann", Secret: SecretFile(file)},
	}
	r := start(t, spec, opt)
	checkFor(t, 30*time.Second, "first connection", func() bool { return srv.Connections() >= 1 })
	writeFile(t, file, "rotated\n")
	checkFor(t, 30*time.Second, "reconnection", func() bool { return srv.Connections() >= 2 })
	for i, want := range []string{"first", "rotated"} {
		u, p, ok := srv.Requests()[i].BasicAuth()
		if !ok || u != "ann" || p != want {
			t.Errorf("connection %d: basic auth %q %q %v, want ann %q", i, u, p, ok, want)
		}
	}
	if st := r.src.Status(); strings.Contains(fmt.Sprintf("%+v", spec), "rotated") || strings.Contains(st.LastError, "rotated") {
		t.Error("the secret leaked into a printed spec or status")
	}
}

func TestNoContentStopsTheSource(t *testing.T) {
	srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 3}), ssetest.Status(http.StatusNoContent))
	topic := kafkatest.NewTopic(t, 1, nil)
	r := start(t, Spec{Name: "nc", URL: srv.URL, Topic: topic, Format: FormatRaw}, testOptions(t))
	select {
	case err := <-r.done:
		close(r.done)
		if !errors.Is(err, ErrNoContent) {
			t.Fatalf("Run returned %v, want ErrNoContent", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after a 204")
	}
	if n := srv.Connections(); n != 2 {
		t.Fatalf("%d connections, want 2 (none after the 204)", n)
	}
	if got := values(readCommitted(t, topic)); !slices.Equal(got, wantLog(1, 3)) {
		t.Fatalf("records %q", got)
	}
	if st := r.src.Status(); st.State != StateStopped || st.LastReason != "no-content" || st.LastID != "3" {
		t.Fatalf("status %+v", st)
	}
}

func TestEveryFailureReconnectsWithoutLossOrDuplicate(t *testing.T) {
	srv := ssetest.New(t,
		ssetest.Status(http.StatusServiceUnavailable, "Retry-After", "0"),
		ssetest.Status(http.StatusTooManyRequests),
		ssetest.ContentType("application/json", `{"not":"sse"}`),
		ssetest.Status(http.StatusNotFound),
		// Reset in the middle of event 3: events 1 and 2 count, event 3 comes again.
		ssetest.Log(ssetest.LogConfig{Abort: true, Cut: func(i int, f string) int {
			if i == 3 {
				return len(f) / 2
			}
			return -1
		}}),
		// A clean end in the middle of event 4 (it comes again), after a retry: field.
		ssetest.Script(false, "retry: 30\n\n", ssetest.Frame("3", "", "event-3"), "id: 4\ndata: event-"),
		// A clean end after event 5.
		ssetest.Log(ssetest.LogConfig{Events: 5}),
		// Silent after event 7: the idle timeout reconnects.
		ssetest.Log(ssetest.LogConfig{Events: 7, Hold: true}),
		ssetest.Log(ssetest.LogConfig{Events: 10, Hold: true}),
	)
	opt := testOptions(t)
	opt.IdleTimeout = 300 * time.Millisecond
	topic := kafkatest.NewTopic(t, 1, nil)
	r := start(t, Spec{Name: "fail", URL: srv.URL, Topic: topic, Format: FormatRaw}, opt)
	checkFor(t, 60*time.Second, "10 records", func() bool { return len(readCommitted(t, topic)) >= 10 })
	if got := values(readCommitted(t, topic)); !slices.Equal(got, wantLog(1, 10)) {
		t.Fatalf("records %q", got)
	}
	reqs := srv.Requests()
	wantLast := []string{"", "", "", "", "", "2", "3", "5", "7"}
	for i, want := range wantLast {
		if got := reqs[i].Header.Get("Last-Event-ID"); got != want {
			t.Errorf("connection %d: Last-Event-ID %q, want %q", i, got, want)
		}
	}
	st := r.src.Stats()
	for _, reason := range []Reason{ReasonServerError, ReasonThrottled, ReasonContentType, ReasonBadStatus, ReasonReadError, ReasonEndOfStream, ReasonIdleTimeout} {
		if st.Reconnects[reason].Load() < 1 {
			t.Errorf("no reconnection counted for %s", reason)
		}
	}
}

func TestFilterAndIDOnlyProgress(t *testing.T) {
	srv := ssetest.New(t,
		ssetest.Script(false,
			ssetest.Frame("1", "keep", "a"),
			ssetest.Frame("2", "skip", "b"),
			ssetest.Frame("3", "keep", "c"),
			ssetest.Frame("4", "skip", "d"),
		),
		ssetest.Script(true),
	)
	topic := kafkatest.NewTopic(t, 1, nil)
	spec := Spec{Name: "filter", URL: srv.URL, Topic: topic, Format: FormatRaw, Events: []string{"keep"}}
	r := start(t, spec, testOptions(t))
	checkFor(t, 30*time.Second, "reconnection", func() bool { return srv.Connections() >= 2 })
	// The filtered event 4 still moved the checkpoint, so it is not asked for again.
	if got := srv.Requests()[1].Header.Get("Last-Event-ID"); got != "4" {
		t.Fatalf("Last-Event-ID after filtered events %q, want 4", got)
	}
	if got := values(readCommitted(t, topic)); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("records %q", got)
	}
	if n := r.src.Stats().Filtered.Load(); n != 2 {
		t.Fatalf("filtered %d, want 2", n)
	}
}

func TestOversizedEventGoesToDeadLetterTopic(t *testing.T) {
	big := strings.Repeat("x", 2000)
	srv := ssetest.New(t, ssetest.Script(true,
		ssetest.Frame("1", "", "small"),
		ssetest.Frame("2", "", big),
		ssetest.Frame("3", "", "after"),
	))
	opt := testOptions(t)
	opt.MaxEventBytes = 1000
	opt.DeadLetterTopic = kafkatest.NewTopic(t, 1, nil)
	topic := kafkatest.NewTopic(t, 1, nil)
	start(t, Spec{Name: "big", URL: srv.URL, Topic: topic, Format: FormatRaw}, opt)
	checkFor(t, 30*time.Second, "2 records", func() bool { return len(readCommitted(t, topic)) >= 2 })
	if got := values(readCommitted(t, topic)); !slices.Equal(got, []string{"small", "after"}) {
		t.Fatalf("records %q", got)
	}
	dl := readCommitted(t, opt.DeadLetterTopic)
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(dl))
	}
	if got := string(dl[0].Value); got != `{"after_id":"1","reason":"event-too-large","source":"big"}` {
		t.Fatalf("dead-letter value %s", got)
	}
}

// TestKafkaFailureReplaysFromCheckpoint makes a transaction fail (a record without a key for a compacted
// topic, which the broker refuses) and checks that ingest aborts, reconnects from the committed checkpoint
// and ends with every event once.
func TestKafkaFailureReplaysFromCheckpoint(t *testing.T) {
	data := func(i int) string { return fmt.Sprintf(`{"k":"x","i":%d}`, i) }
	srv := ssetest.New(t,
		// The first time, event 2 is not JSON, so it has no key; when replayed it has one.
		ssetest.Log(ssetest.LogConfig{Events: 3, Hold: true, Every: 30 * time.Millisecond, Data: func(i int) string {
			if i == 2 {
				return "not-json"
			}
			return data(i)
		}}),
		ssetest.Log(ssetest.LogConfig{Events: 3, Hold: true, Data: data}),
	)
	compact := "compact"
	topic := kafkatest.NewTopic(t, 1, map[string]*string{"cleanup.policy": &compact})
	r := start(t, Spec{Name: "kfail", URL: srv.URL, Topic: topic, Format: FormatRaw, Key: Key{Kind: KeyJSON, Field: "k"}}, testOptions(t))
	checkFor(t, 60*time.Second, "3 records", func() bool { return len(readCommitted(t, topic)) >= 3 })
	if got := values(readCommitted(t, topic)); !slices.Equal(got, []string{data(1), data(2), data(3)}) {
		t.Fatalf("records %q", got)
	}
	if n := r.src.Stats().Reconnects[ReasonKafka].Load(); n < 1 {
		t.Fatal("no kafka-error reconnection counted")
	}
	if n := r.src.Stats().Aborts.Load(); n < 1 {
		t.Fatal("no failed transaction counted")
	}
}
