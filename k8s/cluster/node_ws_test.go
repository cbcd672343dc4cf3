//go:build kube

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// The rolling upgrade's other transports: WebSocket clients that acknowledge what they process and resume
// from the last id they acknowledged, and a publisher that writes records with idempotency keys, all through
// the client Service while both pods roll.

// wsClient streams the topic over WebSocket with acknowledgements, reconnecting through addr after every end.
type wsClient struct {
	name, topic, addr string

	mu      sync.Mutex
	seen    map[int32]map[int]bool // records processed (at least once), by partition and number
	acked   string                 // the last id acknowledged: where a reconnect resumes
	conns   int
	closes  map[string]int // close codes and errors that ended a connection
	ordered []string       // records that came out of order on one connection
}

func newWSClient(name, topic, addr string) *wsClient {
	return &wsClient{name: name, topic: topic, addr: addr, seen: map[int32]map[int]bool{}, closes: map[string]int{}}
}

// run streams until ctx ends.
func (w *wsClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := w.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		key := "clean end"
		if err != nil {
			key = fmt.Sprint(websocket.CloseStatus(err))
			if websocket.CloseStatus(err) == -1 {
				key = "network: " + strings.SplitN(err.Error(), ":", 2)[0]
			}
		}
		w.closes[key]++
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stream makes one connection from the last acknowledged id and processes its messages, acknowledging each.
func (w *wsClient) stream(ctx context.Context) error {
	w.mu.Lock()
	url := "ws://" + w.addr + "/ws/" + w.topic + "?from=earliest&ack=1&max_in_flight=20&heartbeat=1000"
	if w.acked != "" {
		url += "&last_event_id=" + w.acked
	}
	w.conns++
	w.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ws, _, err := websocket.Dial(dctx, url, nil)
	cancel()
	if err != nil {
		return err
	}
	defer func() { _ = ws.CloseNow() }()
	last := map[int32]int{}
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		var m struct {
			ID, Event string
			Data      json.RawMessage
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		if m.Event != "message" {
			continue // the opening message, a position
		}
		var v string
		_ = json.Unmarshal(m.Data, &v)
		p, n, ok := parseValue(v)
		if !ok {
			return fmt.Errorf("unexpected record %q", v)
		}
		w.mu.Lock()
		if prev, ok := last[p]; ok && n <= prev {
			w.ordered = append(w.ordered, fmt.Sprintf("partition %d: %d after %d", p, n, prev))
		}
		last[p] = n
		if w.seen[p] == nil {
			w.seen[p] = map[int]bool{}
		}
		w.seen[p][n] = true
		w.mu.Unlock()
		if err := ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"ack":%q}`, m.ID)); err != nil {
			return err
		}
		w.mu.Lock()
		w.acked = m.ID
		w.mu.Unlock()
	}
}

// missing returns how many of want's records the client has not processed yet.
func (w *wsClient) missing(want map[int32]int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for p, c := range want {
		for i := range c {
			if !w.seen[p][i] {
				n++
			}
		}
	}
	return n
}

// check asserts that every record reached the client, in order on each connection, and logs how its
// connections ended.
func (w *wsClient) check(t *testing.T, want map[int32]int) {
	t.Helper()
	if n := w.missing(want); n > 0 {
		t.Errorf("WebSocket client %s never processed %d records", w.name, n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.ordered {
		t.Errorf("WebSocket client %s: out of order on one connection: %s", w.name, o)
	}
	t.Logf("WebSocket client %s: %d connections, ended by %v", w.name, w.conns, w.closes)
}

// publisher publishes numbered records with idempotency keys through addr, retrying each until it is
// answered 200, one after the other, until stopped.
type publisher struct {
	addr, topic string
	stopc       chan struct{}
	done        chan struct{}

	mu       sync.Mutex
	answered int      // records answered
	retries  int      // requests retried after a failure
	failures []string // answers no retry may ever fix
}

func startPublisher(addr, topic string) *publisher {
	p := &publisher{addr: addr, topic: topic, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stopc:
				return
			default:
			}
			if !p.publish(i) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return p
}

// publish posts record i until it is answered; false when it got an answer no retry fixes.
func (p *publisher) publish(i int) bool {
	body := fmt.Sprintf(`{"key":"k%d","value":"r%d"}`, i%5, i)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			p.mu.Lock()
			p.retries++
			p.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/topics/"+p.topic+"/records", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("rec-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		switch {
		case resp.StatusCode == http.StatusOK:
			p.mu.Lock()
			p.answered++
			p.mu.Unlock()
			return true
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusConflict:
		default:
			p.mu.Lock()
			p.failures = append(p.failures, fmt.Sprintf("record %d: %s %s", i, resp.Status, b))
			p.mu.Unlock()
			return false
		}
	}
}

// stop stops publishing after the record under way, and checks that the topic holds every record answered,
// exactly once.
func (p *publisher) stop(t *testing.T) {
	t.Helper()
	close(p.stopc)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.failures {
		t.Errorf("publisher: %s", f)
	}
	seen := map[string]int{}
	for _, recs := range kafkatest.ReadAll(t, p.topic) {
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
	var errs []error
	for i := range p.answered {
		if n := seen[fmt.Sprintf("r%d", i)]; n != 1 {
			errs = append(errs, fmt.Errorf("record %d is in the topic %d times", i, n))
		}
	}
	if len(seen) != p.answered {
		errs = append(errs, fmt.Errorf("the topic holds %d records, %d were answered", len(seen), p.answered))
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
	t.Logf("publisher: %d records answered exactly once through the rollout, %d requests retried", p.answered, p.retries)
}
