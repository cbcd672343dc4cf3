package source

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// envelopes decodes FormatEnvelope records into "data@id" strings.
func envelopes(t *testing.T, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range readCommitted(t, topic) {
		var e envelope
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		out = append(out, e.Data+"@"+e.ID)
	}
	return out
}

// lastIDs returns the Last-Event-ID header of every request srv received.
func lastIDs(srv *ssetest.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		out = append(out, r.Header.Get("Last-Event-ID"))
	}
	return out
}

// TestLastEventIDSurvivesReconnection: an event without an id takes the stream's last event id, and
// that id outlives the connection (WHATWG: the last event id string belongs to the event source, not
// to one response). The upstream sends e1 and e2 with ids, ends, then answers the reconnection (with
// Last-Event-ID: 2) with e3 and no id. e3 must carry id 2, and the next reconnection must still ask for
// what follows 2; an empty id there would make the upstream start over.
func TestLastEventIDSurvivesReconnection(t *testing.T) {
	srv := ssetest.New(t,
		ssetest.Script(false, ssetest.Frame("1", "", "e1"), ssetest.Frame("2", "", "e2")),
		ssetest.Script(false, ssetest.Frame("", "", "e3")),
		ssetest.Script(true),
	)
	topic := kafkatest.NewTopic(t, 1, nil)
	r := start(t, Spec{Name: "lastid", URL: srv.URL, Topic: topic}, testOptions(t))
	checkFor(t, 30*time.Second, "three connections", func() bool { return srv.Connections() >= 3 })
	if got, want := lastIDs(srv)[:3], []string{"", "2", "2"}; !slices.Equal(got, want) {
		t.Errorf("Last-Event-ID per connection %q, want %q", got, want)
	}
	checkFor(t, 30*time.Second, "3 records", func() bool { return len(readCommitted(t, topic)) >= 3 })
	if got, want := envelopes(t, topic), []string{"e1@1", "e2@2", "e3@2"}; !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
	if st := r.src.Status(); st.LastID != "2" {
		t.Errorf("committed last id %q, want 2", st.LastID)
	}
}

// TestIDOnlyBlockMovesCheckpoint: a block with an id and no data fires no event but moves the last event
// id. Ingest must commit that id (a transaction with the checkpoint and no record), so that a restart
// asks for what follows it, and an event without an id after the restart carries it.
func TestIDOnlyBlockMovesCheckpoint(t *testing.T) {
	srv := ssetest.New(t,
		ssetest.Script(true, ssetest.Frame("1", "", "e1"), ssetest.IDBlock("2")),
		ssetest.Script(false, ssetest.Frame("", "", "e3")),
		ssetest.Script(true),
	)
	topic := kafkatest.NewTopic(t, 1, nil)
	spec := Spec{Name: "idonly", URL: srv.URL, Topic: topic}
	opt := testOptions(t)
	r := start(t, spec, opt)
	checkFor(t, 30*time.Second, "the id-only block to be committed", func() bool { return r.src.Status().LastID == "2" })
	if got, want := envelopes(t, topic), []string{"e1@1"}; !slices.Equal(got, want) {
		t.Fatalf("records %q, want %q (the id-only block writes no record)", got, want)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// The restart reads the checkpoint the id-only block wrote and seeds the parser with it.
	start(t, spec, opt)
	checkFor(t, 30*time.Second, "three connections", func() bool { return srv.Connections() >= 3 })
	if got, want := lastIDs(srv)[:3], []string{"", "2", "2"}; !slices.Equal(got, want) {
		t.Errorf("Last-Event-ID per connection %q, want %q", got, want)
	}
	checkFor(t, 30*time.Second, "2 records", func() bool { return len(readCommitted(t, topic)) >= 2 })
	if got, want := envelopes(t, topic), []string{"e1@1", "e3@2"}; !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
}

// TestRetryZeroReconnectsAtOnce: "retry: 0" is a valid reconnection time of 0 ms. With a backoff-min of
// 30s the reconnection after a clean end must not wait for it.
func TestRetryZeroReconnectsAtOnce(t *testing.T) {
	srv := ssetest.New(t,
		ssetest.Script(false, "retry: 0\n\n", ssetest.Frame("1", "", "a")),
		ssetest.Script(true),
	)
	opt := testOptions(t)
	opt.BackoffMin, opt.BackoffMax = 30*time.Second, time.Minute
	start(t, Spec{Name: "retry0", URL: srv.URL, Topic: kafkatest.NewTopic(t, 1, nil)}, opt)
	checkFor(t, 10*time.Second, "a reconnection without the 30s backoff-min", func() bool { return srv.Connections() >= 2 })
}
