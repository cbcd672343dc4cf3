package app

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// streamsState is what streams.mjs reports once the page's streams are open, or as many as will open.
type streamsState struct {
	Open, Connecting int
}

// streamsReport is what streams.mjs reports at the end: the protocol the page came over, and each stream as
// the page saw it (readyState 0 connecting, 1 open) and as Chromium's network stack fetched it.
type streamsReport struct {
	PageProtocol string
	Streams      []struct {
		ReadyState, Opens, Errors int
		Events                    []pageEvent
		Requested                 bool
		Status                    int
		Protocol                  string
		Connection                float64
	}
}

// pageStreams opens a page of g's origin with n EventSources on the topic's stream and produces events
// records once as many as will open are open. It returns the page's account of the streams then, and at the
// end (once every open stream has the records, and settle more for the others to get them), with the
// records as the topic holds them. Both times the gateway must count as many streams open as the page. The
// page is a 404 of the clients' port, which opens no stream itself (the dashboard would open one more).
func pageStreams(t *testing.T, g *gateway, topic string, n, events int, settle time.Duration) (streamsState, streamsReport, map[int32]map[int64]*kgo.Record) {
	t.Helper()
	in, lines := startDriver(t, 90*time.Second, nil, "streams.mjs", g.url+"/no-stream-here", g.url+"/streams/"+topic,
		fmt.Sprint(n), fmt.Sprint(events), fmt.Sprint(settle.Milliseconds()), "30000")
	var state streamsState
	if !lines.Scan() {
		t.Fatalf("the page did not open its streams: %v", lines.Err())
	}
	if err := json.Unmarshal(lines.Bytes(), &state); err != nil {
		t.Fatalf("page state %q: %v", lines.Text(), err)
	}
	t.Logf("%d EventSources on one page of %s: %d open, %d connecting", n, g.url, state.Open, state.Connecting)
	if v := metricValue(t, g, "ssegate_connections_open", `topic="`+topic+`"`); v != float64(state.Open) {
		t.Errorf("the gateway has %v streams open, the page %d", v, state.Open)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for i := range events {
		kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"seq":%d}`, i)})
	}
	if !lines.Scan() {
		t.Fatalf("no report from the page: %v", lines.Err())
	}
	var rep streamsReport
	if err := json.Unmarshal(lines.Bytes(), &rep); err != nil {
		t.Fatalf("page report: %v", err)
	}
	if len(rep.Streams) != n {
		t.Fatalf("the page reports %d streams, want %d", len(rep.Streams), n)
	}
	open := 0
	for _, s := range rep.Streams {
		if s.ReadyState == 1 {
			open++
		}
	}
	if v := metricValue(t, g, "ssegate_connections_open", `topic="`+topic+`"`); v != float64(open) {
		t.Errorf("at the end the gateway has %v streams open, the page %d", v, open)
	}
	_ = in.Close() // the driver closes the page
	return state, rep, byOffset(kafkatest.ReadAll(t, topic))
}

// checkStreamEvents fails unless the page's stream got exactly the topic's records, in order, with exact ids.
func checkStreamEvents(t *testing.T, i int, got []pageEvent, records map[int32]map[int64]*kgo.Record, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("stream %d got %d events, want %d: %+v", i, len(got), n, got)
	}
	evs := make([]sse.Event, len(got))
	for j, e := range got {
		evs[j] = sse.Event{Type: e.Type, ID: e.ID, Data: e.Data}
	}
	checkEvents(t, "v1:", evs, records) // the topic was empty when the gateway started
}

// TestBrowserHTTP2StreamsPerPage: Chromium holds at most six HTTP/1.1 connections to an origin, so a page
// (or all the tabs of a site) gets six EventSources on it and the seventh waits; over TLS the clients' port
// speaks HTTP/2, which carries every stream of the page on one connection.
func TestBrowserHTTP2StreamsPerPage(t *testing.T) {
	browserTools(t)
	const n, events = 10, 3
	const settle = 2 * time.Second // how long the page waits, once the open streams are served, for the others

	// Over HTTPS, ten EventSources of one page open and get every record, all ten over HTTP/2 on one
	// connection, as the browser's network stack reports them (and the page itself came over h2).
	t.Run("h2", func(t *testing.T) {
		topic := kafkatest.NewTopic(t, 1, nil)
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		newTestPair(t, "gateway").install(t, certFile, keyFile)
		g := startGateway(t, []string{topic}, func(c *Config) { c.TLS = TLSConfig{CertFile: certFile, KeyFile: keyFile} })
		g.waitReady(t)

		state, rep, records := pageStreams(t, g, topic, n, events, settle)
		if state.Open != n || state.Connecting != 0 {
			t.Errorf("over HTTP/2, %d of %d EventSources opened (%d connecting), want all", state.Open, n, state.Connecting)
		}
		if rep.PageProtocol != "h2" {
			t.Errorf("the page came over %q, want h2", rep.PageProtocol)
		}
		connections := map[float64]bool{}
		for i, s := range rep.Streams {
			if s.ReadyState != 1 || s.Opens != 1 || s.Status != 200 || s.Protocol != "h2" {
				t.Errorf("stream %d: readyState %d, opened %d times, status %d over %q; want open once, 200 over h2",
					i, s.ReadyState, s.Opens, s.Status, s.Protocol)
			}
			connections[s.Connection] = true
			checkStreamEvents(t, i, s.Events, records, events)
		}
		if len(connections) != 1 {
			t.Errorf("%d streams came over %d connections, want 1", n, len(connections))
		}
	})

	// The same page over plain HTTP (HTTP/1.1 only): six EventSources open and get every record, each on a
	// connection of its own; the other four stay connecting, never sent to the gateway, while the six are
	// served and for the settle time after. This is the limit the subtest above shows HTTP/2 lifts.
	t.Run("http1.1", func(t *testing.T) {
		topic := kafkatest.NewTopic(t, 1, nil)
		g := startGateway(t, []string{topic}, nil)
		g.waitReady(t)

		state, rep, records := pageStreams(t, g, topic, n, events, settle)
		const limit = 6 // Chromium's connections per origin (per proxy server and per "group") over HTTP/1.1
		if state.Open != limit || state.Connecting != n-limit {
			t.Errorf("over HTTP/1.1, %d of %d EventSources opened (%d connecting), want %d (%d connecting)",
				state.Open, n, state.Connecting, limit, n-limit)
		}
		if rep.PageProtocol != "http/1.1" {
			t.Errorf("the page came over %q, want http/1.1", rep.PageProtocol)
		}
		open, connections := 0, map[float64]bool{}
		for i, s := range rep.Streams {
			switch s.ReadyState {
			case 1:
				open++
				if s.Opens != 1 || s.Status != 200 || s.Protocol != "http/1.1" {
					t.Errorf("stream %d: opened %d times, status %d over %q; want open once, 200 over http/1.1", i, s.Opens, s.Status, s.Protocol)
				}
				connections[s.Connection] = true
				checkStreamEvents(t, i, s.Events, records, events)
			case 0:
				if s.Opens != 0 || s.Status != 0 || len(s.Events) != 0 {
					t.Errorf("stream %d, connecting: opened %d times, status %d, %d events; want none", i, s.Opens, s.Status, len(s.Events))
				}
			default:
				t.Errorf("stream %d: readyState %d (closed), errors %d", i, s.ReadyState, s.Errors)
			}
		}
		if open != limit {
			t.Errorf("%d streams open at the end, want %d", open, limit)
		}
		if len(connections) != open {
			t.Errorf("%d streams came over %d connections, want one each", open, len(connections))
		}
	})
}
