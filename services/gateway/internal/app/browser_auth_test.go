package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// crossOriginPage is a page of another origin than the gateway's (an app that uses it): it opens an
// EventSource with credentials on the gateway's stream, so that the browser sends the token cookie the app
// set, and when the stream says the token is expiring it asks its own origin for a new cookie.
var crossOriginPage = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>app</title></head><body>
<script>
const seen = window.ssegate = { opens: 0, events: [], lastEventId: "", closed: false, expiring: 0, expired: 0, refreshed: 0, errors: 0 };
const es = new EventSource({{.}}, { withCredentials: true });
es.onopen = () => { seen.opens++; };
es.onerror = () => { seen.errors++; if (es.readyState === EventSource.CLOSED) seen.closed = true; };
const onEvent = (e) => { seen.events.push({ type: e.type, id: e.lastEventId, data: e.data }); seen.lastEventId = e.lastEventId; };
es.onmessage = onEvent;
es.addEventListener("resync", onEvent);
es.addEventListener("token-expiring", async () => {
  seen.expiring++;
  const r = await fetch("/refresh", { method: "POST" });
  if (r.ok) seen.refreshed++;
});
es.addEventListener("token-expired", () => { seen.expired++; });
</script></body></html>`))

// appServer serves page executed with data, setting the token cookie tokenFor gives (the first visit's, and
// each refresh's, POST /refresh) as an HttpOnly cookie.
func appServer(t *testing.T, page *template.Template, data any, tokenFor func(refresh bool) string) *httptest.Server {
	t.Helper()
	setCookie := func(w http.ResponseWriter, refresh bool) {
		// No Domain: a host-only cookie for 127.0.0.1, which browsers send to every port of it (cookies do
		// not isolate ports), so the gateway's origin gets it too. Same site, so Lax is enough.
		http.SetCookie(w, &http.Cookie{Name: "ssegate_token", Value: tokenFor(refresh), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		setCookie(w, false)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, data)
	})
	mux.HandleFunc("POST /refresh", func(w http.ResponseWriter, _ *http.Request) {
		setCookie(w, true)
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// pageRun is page.mjs driving one page.
type pageRun struct {
	first string // "open" or "closed"
	lines *bufio.Scanner
}

func openPage(t *testing.T, url string, n int, timeout time.Duration) *pageRun {
	t.Helper()
	_, lines := startDriver(t, timeout+30*time.Second, nil, "page.mjs", url, fmt.Sprint(n), fmt.Sprint(timeout.Milliseconds()))
	if !lines.Scan() {
		t.Fatalf("the page did not start: %v", lines.Err())
	}
	return &pageRun{first: lines.Text(), lines: lines}
}

// crossOriginReport is what the page saw.
type crossOriginReport struct {
	Opens, Expiring, Expired, Refreshed, Errors int
	Closed                                      bool
	Events                                      []pageEvent
}

func (p *pageRun) report(t *testing.T) crossOriginReport {
	t.Helper()
	if !p.lines.Scan() {
		t.Fatalf("no report from the page: %v", p.lines.Err())
	}
	var r crossOriginReport
	if err := json.Unmarshal(p.lines.Bytes(), &r); err != nil {
		t.Fatalf("page report: %v", err)
	}
	return r
}

// userRecords produces n rounds of records: user-42's "user-42/<i>", and other users' in between.
func userRecords(t *testing.T, cl *kgo.Client, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte("user-42"), Value: fmt.Appendf(nil, "user-42/%d", i)})
		for _, other := range []string{"user-7", "user-9", "user-13"} {
			recs = append(recs, &kgo.Record{Key: []byte(other), Value: fmt.Appendf(nil, "%s/%d", other, i)})
		}
	}
	kafkatest.Produce(t, cl, recs...)
}

// checkUserEvents fails unless the page's events are exactly user-42's records 0 to n-1, in order.
func checkUserEvents(t *testing.T, evs []pageEvent, n int) {
	t.Helper()
	if len(evs) != n {
		t.Fatalf("the page saw %d events, want %d: %+v", len(evs), n, evs)
	}
	for i, ev := range evs {
		if ev.Type != "message" || ev.Data != fmt.Sprintf("user-42/%d", i) {
			t.Fatalf("event %d: %+v, want user-42's record %d", i, ev, i)
		}
	}
}

// TestBrowserCrossOriginCookie: in Chromium, a page of another origin (an app allowed by cors-origins) opens
// new EventSource(url, {withCredentials: true}) with the token cookie its origin set; it gets the per-user
// stream its token allows (user-42's records only) and keeps it across a gateway restart, resuming by itself
// with Last-Event-ID. A page of an origin that is not allowed is refused: its EventSource fails for good.
func TestBrowserCrossOriginCookie(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	addr := proctest.FreeAddr(t)
	gatewayURL := "http://" + addr + "/streams/" + topic
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{topic}, "keys": []string{"user-42"}}, nil)
	app := appServer(t, crossOriginPage, gatewayURL, func(bool) string { return tok })
	other := appServer(t, crossOriginPage, gatewayURL, func(bool) string { return tok })
	conf := withAuth(t, func(c *Config) {
		c.Listen, c.Retry, c.Drain = addr, 300*time.Millisecond, 0
		c.CORS.Origins = []string{app.URL}
		c.CORS.Credentials = true
	})
	g1 := startGateway(t, []string{topic}, conf)
	g1.waitReady(t)

	refused := openPage(t, other.URL+"/", 1, 30*time.Second)
	if refused.first != "closed" {
		t.Fatalf("the page of an origin that is not allowed: %s, want its EventSource closed", refused.first)
	}
	if r := refused.report(t); len(r.Events) != 0 || r.Opens != 0 {
		t.Fatalf("the refused page saw %+v", r)
	}
	if v := metricValue(t, g1, "ssegate_streams_refused_total", `topic="`+topic+`"`, `reason="origin"`); v != 1 {
		t.Errorf("refused for their origin: %v, want 1", v)
	}

	const n = 30
	page := openPage(t, app.URL+"/", n, 90*time.Second)
	if page.first != "open" {
		t.Fatalf("the allowed page: %s", page.first)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	userRecords(t, cl, 0, 10)
	kafkatest.WaitFor(t, 30*time.Second, "the page to get the first 10 events", func() bool {
		return metricValue(t, g1, "ssegate_frames_written_total", `topic="`+topic+`"`) >= 10
	})
	g1.stop()
	if err := <-g1.done; err != nil {
		t.Fatalf("first gateway: %v", err)
	}
	g1.done <- nil
	userRecords(t, cl, 10, 10) // while no gateway runs
	g2 := startGateway(t, []string{topic}, conf)
	g2.waitReady(t)
	userRecords(t, cl, 20, 10)
	r := page.report(t)
	if r.Opens < 2 {
		t.Errorf("the EventSource opened %d times, want a reconnect", r.Opens)
	}
	checkUserEvents(t, r.Events, n)
}

// TestBrowserTokenRefresh: in Chromium, a cross-origin page whose cookie token expires gets token-expiring,
// asks its own origin for a new cookie, and when the gateway ends the stream at the token's expiry, its
// EventSource reconnects by itself with the new cookie and resumes exactly: every record once, in order.
func TestBrowserTokenRefresh(t *testing.T) {
	tokenRefresh(t, false)
}

// tokenRefresh is TestBrowserTokenRefresh, with a page of its own (crossOriginPage) or one using the client
// module (clientPage, module: its renewToken asks for the new cookie, and the module opens the stream again
// itself after token-expired).
func tokenRefresh(t *testing.T, module bool) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	addr := proctest.FreeAddr(t)
	scope := map[string]any{"topics": []string{topic}, "keys": []string{"user-42"}}
	// The first token expires 4 to 5 s after the page first asks for one, not after the test began: a browser
	// slow to start on a busy machine must not find it expired already.
	var firstMu sync.Mutex
	var first time.Time
	var refreshes atomic.Int32
	tmpl, data := crossOriginPage, any("http://"+addr+"/streams/"+topic)
	if module {
		tmpl, data = clientPage, map[string]string{"Gateway": "http://" + addr, "Stream": "http://" + addr + "/streams/" + topic}
	}
	app := appServer(t, tmpl, data, func(refresh bool) string {
		if refresh {
			refreshes.Add(1)
			return token(t, testSecret, time.Now().Add(time.Hour), scope, nil)
		}
		firstMu.Lock()
		if first.IsZero() {
			first = time.Now().Add(5 * time.Second).Truncate(time.Second)
		}
		exp := first
		firstMu.Unlock()
		return token(t, testSecret, exp, scope, nil)
	})
	g := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.Listen, c.Retry = addr, 300*time.Millisecond
		c.Auth.ExpiryNotice = 3 * time.Second
		c.CORS.Origins = []string{app.URL}
		c.CORS.Credentials = true
	}))
	g.waitReady(t)
	const n = 30
	page := openPage(t, app.URL+"/", n, 90*time.Second)
	if page.first != "open" {
		t.Fatalf("the page: %s", page.first)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for i := 0; i < n; i += 3 {
		userRecords(t, cl, i, 3)
		time.Sleep(700 * time.Millisecond) // records before, around and after the expiry, 4 to 5 s from now
	}
	r := page.report(t)
	checkUserEvents(t, r.Events, n)
	if r.Expiring < 1 || r.Refreshed < 1 || r.Expired != 1 || r.Opens != 2 {
		t.Errorf("the page saw %d token-expiring, %d refreshes, %d token-expired, %d opens; want 1 or more, 1 or more, 1, 2 (the app refreshed %d times)",
			r.Expiring, r.Refreshed, r.Expired, r.Opens, refreshes.Load())
	}
	if v := metricValue(t, g, "ssegate_connections_closed_total", `topic="`+topic+`"`, `reason="token_expired"`); v != 1 {
		t.Errorf("streams ended by expiry: %v, want 1", v)
	}
	if strings.Contains(fmt.Sprint(r.Events), "user-7") {
		t.Error("another user's record reached the page")
	}
}
