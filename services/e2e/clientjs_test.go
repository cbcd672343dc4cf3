package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/browsertest"
	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// nodeClientRun is what pkg/browsertest/clientjs.mjs prints: the records the JavaScript client handed to
// onRecord, in order, and what happened on the way.
type nodeClientRun struct {
	Records []struct {
		ID        string `json:"id"`
		Topic     string `json:"topic"`
		Type      string `json:"type"`
		Text      string `json:"text"`
		Key       string `json:"key"`
		Partition *int   `json:"partition"`
		Offset    *int64 `json:"offset"`
	} `json:"records"`
	Opens  int               `json:"opens"`
	Errors []json.RawMessage `json:"errors"`
	Drops  []struct {
		How   string `json:"how"`
		At    string `json:"at"`
		After int    `json:"after"`
	} `json:"drops"`
	Positions []string `json:"positions"`
}

// TestNodeClient: the JavaScript client (pkg/clientjs, the module the gateway serves as /ssegate.js) in Node,
// with the eventsource package's EventSource and with the ws package's WebSocket, follows a stream of the
// gateway binary on a real broker: records produced before and while it reads come in order, each once, with
// their ids (and over a WebSocket their key, partition and offset), across a connection cut under it (the
// WebSocket transport reconnects by itself from the last id) and a close and new connect (the position kept
// in its storage resumes it).
func TestNodeClient(t *testing.T) {
	node, _ := browsertest.Node(t, "eventsource", "ws")
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	const n, dropAfter = 60, 15
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			kafkatest.Produce(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i%7), Value: fmt.Appendf(nil, "v-%03d", i)})
		}
	}
	produce(0, n/2)
	clients, _ := blackBoxGateway(t, brokers, "--topics", topic)
	script := filepath.Join("..", "..", "pkg", "browsertest", "clientjs.mjs")
	for _, c := range []struct{ transport, url string }{
		{"eventsource", "http://" + clients + "/streams/" + topic + "?from=earliest"},
		{"websocket", "ws://" + clients + "/ws/" + topic + "?from=earliest"},
	} {
		t.Run(c.transport, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), node, script, c.url, c.transport, fmt.Sprint(n), fmt.Sprint(dropAfter)) //nolint:gosec // node and the test's own script
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if c.transport == "eventsource" {
				produce(n/2, n) // the rest while the first client reads; the second finds them stored
			}
			err := cmd.Wait()
			var run nodeClientRun
			if jerr := json.Unmarshal(stdout.Bytes(), &run); err != nil || jerr != nil {
				t.Fatalf("clientjs.mjs: %v, %v\nstdout: %s\nstderr: %s", err, jerr, stdout.Bytes(), stderr.Bytes())
			}
			checkNodeRun(t, c.transport, run, n, dropAfter)
		})
	}
}

// checkNodeRun checks a run of clientjs.mjs: n records of offsets 0 to n-1 in order, each id the position
// after it, and the drops it made, each resumed.
func checkNodeRun(t *testing.T, transport string, run nodeClientRun, n, dropAfter int) {
	t.Helper()
	if len(run.Records) != n {
		t.Fatalf("%d records, want %d: %+v", len(run.Records), n, run)
	}
	for i, r := range run.Records {
		want := fmt.Sprintf("v-%03d", i)
		if r.Text != want || r.ID != fmt.Sprintf("v1:0-%d", i) || r.Type != "message" {
			t.Fatalf("record %d is %+v, want text %s and id v1:0-%d (a gap, a duplicate or a wrong order)", i, r, want, i)
		}
		if transport == "websocket" {
			if r.Key != fmt.Sprintf("k-%d", i%7) || r.Partition == nil || *r.Partition != 0 || r.Offset == nil || *r.Offset != int64(i) {
				t.Fatalf("record %d over the WebSocket is %+v, want key k-%d, partition 0, offset %d", i, r, i%7, i)
			}
		} else if r.Partition != nil || r.Offset != nil {
			t.Fatalf("record %d over the EventSource has a partition or offset: %+v", i, r)
		}
	}
	drops := 1
	if transport == "websocket" {
		drops = 2
		if len(run.Positions) == 0 {
			t.Errorf("no open message's position reached onPosition: %+v", run)
		}
	}
	if len(run.Drops) != drops || run.Opens != drops+1 {
		t.Fatalf("drops %+v and %d opens, want %d drops and %d opens (each drop resumed)", run.Drops, run.Opens, drops, drops+1)
	}
	for i, d := range run.Drops {
		if d.After < (i+1)*dropAfter || d.At != fmt.Sprintf("v1:0-%d", d.After-1) {
			t.Errorf("drop %d (%s) after %d records at %s, want at least %d records and the last one's id", i, d.How, d.After, d.At, (i+1)*dropAfter)
		}
	}
}
