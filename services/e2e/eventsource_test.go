package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// eventSource is a client that connects and reconnects the way a browser's EventSource does (WHATWG HTML,
// "Server-sent events"): GET with Accept: text/event-stream and, when its last event id is not empty,
// Last-Event-ID; a 200 text/event-stream answer is read as a stream, whose end or network error makes it
// wait the reconnection time (the last retry: it saw) and connect again; an id-only block moves the last
// event id. Any other answer fails it for good, as it does a page. The network it runs on drops each
// connection a random 1 to 4 seconds after it opened, as mobile networks do, so that it reconnects all the
// time and not only when a gateway ends its stream.
type eventSource struct {
	url    string
	client *http.Client

	mu       sync.Mutex
	events   []sse.Event // dispatched events, in order
	lastID   string
	retry    time.Duration
	failure  string // why it failed for good; empty while it lives
	connects int    // 200 answers
	netErrs  int    // connections that failed before an answer
	empty    int    // 200 streams that ended without an event: redirects
}

// run connects until ctx ends or the client fails for good.
func (es *eventSource) run(ctx context.Context) {
	es.retry = 3 * time.Second // a browser's default until the stream says otherwise
	for ctx.Err() == nil {
		if !es.connect(ctx) {
			return
		}
		es.mu.Lock()
		wait := es.retry
		es.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// connect makes one request and reads its stream; it reports false when the client failed for good.
func (es *eventSource) connect(ctx context.Context) bool {
	cctx, cut := context.WithTimeout(ctx, time.Second+rand.N(3*time.Second))
	defer cut()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, es.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	es.mu.Lock()
	lastID := es.lastID
	es.mu.Unlock()
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := es.client.Do(req)
	if err != nil {
		es.mu.Lock()
		es.netErrs++
		es.mu.Unlock()
		return true
	}
	defer func() { _ = resp.Body.Close() }()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		es.mu.Lock()
		es.failure = fmt.Sprintf("%s: %s, Content-Type %q (Last-Event-ID %q)", time.Now().Format("15:04:05.000"), resp.Status, resp.Header.Get("Content-Type"), lastID)
		es.mu.Unlock()
		return false
	}
	es.mu.Lock()
	es.connects++
	es.mu.Unlock()
	p := sse.NewParser(resp.Body, sse.WithLastEventID(lastID), sse.WithIDOnlyBlocks())
	got := 0
	for {
		ev, err := p.Next()
		if err != nil {
			break
		}
		es.mu.Lock()
		es.lastID = p.LastEventID()
		if !ev.IDOnly() {
			es.events = append(es.events, ev)
			got++
		}
		if r, ok := p.Retry(); ok {
			es.retry = r
		}
		es.mu.Unlock()
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	// A retry field in a block that dispatched nothing still sets the reconnection time.
	if r, ok := p.Retry(); ok {
		es.retry = r
	}
	es.lastID = p.LastEventID()
	if got == 0 && cctx.Err() == nil {
		es.empty++
	}
	return true
}

// seen returns how many events the client has dispatched, and why it failed (empty while it lives).
func (es *eventSource) seen() (int, string) {
	es.mu.Lock()
	defer es.mu.Unlock()
	return len(es.events), es.failure
}

// opened returns how many 200 answers the client has had.
func (es *eventSource) opened() int {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.connects
}
