package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// The black-box tests of where a stream starts and what a snapshot holds, against the built gateway binary and
// a real broker: a from=earliest stream on a topic whose log starts above 0 names every partition's start, so
// a client that drops before it has seen every partition, or that a leaving gateway sends away, resumes on
// another gateway with every stored record; a filtered snapshot is the same state with and without a key
// index.

// sseStream reads a stream of addr's target (with Last-Event-ID lastID when not empty) as an EventSource would,
// id-only blocks included, until stop says so for an event or the stream ends; it returns what it read and
// whether the stream ended by itself.
func sseStream(t *testing.T, addr, target, lastID string, stop func(sse.Event) bool) (evs []sse.Event, ended bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+target, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", target, resp.Status)
	}
	p := sse.NewParser(resp.Body, sse.WithLastEventID(lastID), sse.WithIDOnlyBlocks())
	for {
		ev, err := p.Next()
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("GET %s (Last-Event-ID %q): no end within 30 s, after %d events", target, lastID, len(evs))
			}
			return evs, true
		}
		evs = append(evs, ev)
		if stop(ev) {
			return evs, false
		}
	}
}

// recordsOf returns the data of the records in evs, failing on any resync.
func recordsOf(t *testing.T, evs []sse.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		switch {
		case ev.Type == "resync":
			t.Fatalf("a resync: %s", ev.Data)
		case !ev.IDOnly() && ev.Type != "live":
			out = append(out, ev.Data)
		}
	}
	return out
}

// afterRecords is a stop condition: n records read.
func afterRecords(n int) func(sse.Event) bool {
	seen := 0
	return func(ev sse.Event) bool {
		if !ev.IDOnly() && ev.Type != "resync" && ev.Type != "live" {
			seen++
		}
		return seen >= n || ev.Type == "resync"
	}
}

// TestBlackBoxEarliestResumesEveryStoredRecord: a topic of 3 partitions of 20 records whose log start was moved
// to 3 (DeleteRecords, as retention does). A from=earliest stream opens with the id v1:0-2.1-2.2-2; dropped
// after its opening block, or after its first record, it resumes on another gateway with every stored record
// it had not had and no resync. A gateway that is shutting down answers a new from=earliest (or
// from=snapshot) stream with its retry line and no id, and the client's reconnect to the other gateway (with
// the id it was given, if any, as an EventSource does) gets every stored record. Before, the opening id was v1:, and each of these resumes was a retention resync that
// skipped every stored record of the partitions not seen yet.
func TestBlackBoxEarliestResumesEveryStoredRecord(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 3, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var stored []string
	for q := range int32(3) {
		for o := range 20 {
			v := fmt.Sprintf("p%d-%d", q, o)
			kafkatest.Produce(t, cl, &kgo.Record{Partition: q, Value: []byte(v)})
			if o >= 3 {
				stored = append(stored, v)
			}
		}
	}
	var starts kadm.Offsets
	for q := range int32(3) {
		starts.AddOffset(topic, q, 3, -1)
	}
	res, err := kafkatest.Admin(t).DeleteRecords(t.Context(), starts)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	leaving, leavingAdmin, leavingProc := gatewayProcess(t, brokers, "--topics", topic, "--endpoint-propagation", "30s", "--drain", "1s")
	other, _, _ := gatewayProcess(t, brokers, "--topics", topic)
	target := "/streams/" + topic + "?from=earliest"
	all := func(t *testing.T, lastID string, want int) {
		t.Helper()
		evs, _ := sseStream(t, other, target, lastID, afterRecords(want))
		got := recordsOf(t, evs)
		if len(got) != want {
			t.Fatalf("a resume from %q: %d records, want %d", lastID, len(got), want)
		}
		for _, r := range got {
			if !slices.Contains(stored, r) {
				t.Fatalf("a resume from %q: %q is not a stored record", lastID, r)
			}
		}
	}

	evs, _ := sseStream(t, leaving, target, "", afterRecords(1))
	if len(evs) < 2 || !evs[0].IDOnly() {
		t.Fatalf("from=earliest opened with %+v, want an id-only block, then a record", evs)
	}
	if evs[0].ID != "v1:0-2.1-2.2-2" {
		t.Errorf("from=earliest opened with the id %s, want v1:0-2.1-2.2-2", evs[0].ID)
	}
	first := evs[len(evs)-1]
	t.Run("dropped after the opening block", func(t *testing.T) { all(t, evs[0].ID, len(stored)) })
	t.Run("dropped after the first record", func(t *testing.T) { all(t, first.ID, len(stored)-1) })

	stopGateway(t, leavingProc, leavingAdmin)
	for _, from := range []string{"earliest", "snapshot"} {
		t.Run("sent away by a leaving gateway, from="+from, func(t *testing.T) {
			evs, ended := sseStream(t, leaving, "/streams/"+topic+"?from="+from, "", func(sse.Event) bool { return false })
			if !ended || len(recordsOf(t, evs)) != 0 {
				t.Fatalf("a leaving gateway: %+v, want the end of the stream and no record", evs)
			}
			// The client reconnects, to the other gateway, with the id it was given, if any (there is none).
			lastID := ""
			if len(evs) > 0 {
				lastID = evs[len(evs)-1].ID
			}
			evs, _ = sseStream(t, other, "/streams/"+topic+"?from="+from, lastID, afterRecords(len(stored)))
			if got := recordsOf(t, evs); len(got) != len(stored) || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(stored))) {
				t.Fatalf("the reconnect: %d records %v, want every stored record", len(got), got)
			}
		})
	}
}

// stopGateway sends SIGTERM to a gateway and waits until its admin port says it is shutting down (unready):
// from then on it answers new streams as a leaving gateway.
func stopGateway(t *testing.T, p *process, admin string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "the gateway to be unready", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
}

// gatewayProcess is blackBoxGateway that also returns the process, to signal it.
func gatewayProcess(t *testing.T, brokers string, args ...string) (clients, admin string, p *process) {
	t.Helper()
	clients, admin = proctest.FreeAddr(t), proctest.FreeAddr(t)
	p = startProcess(t, "gateway", gatewayBinary(t), brokers, append([]string{"--listen", clients, "--admin-listen", admin}, args...)...)
	waitReady(t, "gateway", "http://"+admin+"/readyz")
	return clients, admin, p
}

// TestBlackBoxFilteredSnapshotSameState: a filtered snapshot (filter=, event=) is the same state on a gateway
// with a key index (topic-snapshot-index) and on one without: the latest value of each key the stream may
// see, without keys whose tombstone or latest value the filters do not pass. Before, the gateway without an
// index kept deleted keys and values that had stopped matching.
func TestBlackBoxFilteredSnapshotSameState(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 2, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rec := func(q int32, key string, n int, typ string) *kgo.Record {
		r := &kgo.Record{Partition: q, Key: []byte(key), Headers: []kgo.RecordHeader{{Key: "event", Value: []byte(typ)}}}
		if n >= 0 {
			r.Value = fmt.Appendf(nil, `{"k":%q,"n":%d}`, key, n)
		}
		return r
	}
	kafkatest.Produce(t, cl,
		rec(0, "k1", 1, "created"), rec(0, "k1", 200, "updated"),
		rec(0, "k2", 150, "created"), rec(0, "k2", 5, "updated"),
		rec(1, "k3", 300, "created"), rec(1, "k3", -1, "deleted"),
		rec(1, "k4", 120, "created"), rec(1, "k4", 130, "archived"),
		rec(1, "k5", 500, "created"))
	plain, plainAdmin := blackBoxGateway(t, brokers, "--topics", topic)
	indexed, indexedAdmin := blackBoxGateway(t, brokers, "--topics", topic, "--topic-snapshot-index", topic+"=1MiB")
	waitReady(t, "gateway", "http://"+plainAdmin+"/readyz")
	waitReady(t, "gateway", "http://"+indexedAdmin+"/readyz")
	state := func(addr, query string) map[string]string {
		evs, _ := sseStream(t, addr, "/streams/"+topic+"?from=snapshot&"+query, "", func(ev sse.Event) bool { return ev.Type == "live" })
		out := map[string]string{}
		for _, ev := range evs {
			switch {
			case ev.IDOnly(), ev.Type == "live":
			case ev.Type == "delete":
				delete(out, ev.Data)
			default:
				var v struct{ K string }
				if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
					t.Fatalf("frame %+v: %v", ev, err)
				}
				out[v.K] = ev.Data
			}
		}
		return out
	}
	val := func(k string, n int) string { return fmt.Sprintf(`{"k":%q,"n":%d}`, k, n) }
	for _, tc := range []struct {
		query string
		want  map[string]string
	}{
		{"filter=" + url.QueryEscape("value.n > 100"), map[string]string{"k1": val("k1", 200), "k4": val("k4", 130), "k5": val("k5", 500)}},
		{"event=created&event=updated", map[string]string{"k1": val("k1", 200), "k2": val("k2", 5), "k5": val("k5", 500)}},
	} {
		for _, g := range []struct{ name, addr string }{{"without an index", plain}, {"with an index", indexed}} {
			if got := state(g.addr, tc.query); !maps.Equal(got, tc.want) {
				t.Errorf("%s, %s: %v, want %v", tc.query, g.name, got, tc.want)
			}
		}
	}
	if n := indexSnapshots(t, indexedAdmin); n != "2" {
		t.Fatalf("the gateway with an index built %v snapshots from it, want 2", n)
	}
}

// indexSnapshots returns the gateway's count of snapshots copied from a key index.
func indexSnapshots(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "ssegate_snapshots_total{") && strings.Contains(line, `source="index"`) {
			return line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	return "none"
}
