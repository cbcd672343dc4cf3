package app

import (
	"html/template"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// wsCrossOriginPage is a page of another origin than the gateway's that opens a WebSocket on a gateway stream:
// the browser sends the gateway's cookies with it (a WebSocket has no CORS and no withCredentials), here the
// token cookie the page's origin set. window.ssegate is what page.mjs reads.
var wsCrossOriginPage = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>app</title></head><body>
<script>
const seen = window.ssegate = { opens: 0, events: [], closed: false, closeCode: 0 };
const ws = new WebSocket({{.}});
ws.onopen = () => { seen.opens++; };
ws.onclose = (e) => { seen.closed = true; seen.closeCode = e.code; };
ws.onmessage = (e) => {
  const m = JSON.parse(e.data);
  if (m.event === "open") return;
  seen.events.push({ type: m.event, id: m.id, data: typeof m.data === "string" ? m.data : JSON.stringify(m.data) });
};
</script></body></html>`))

// TestBrowserWebSocketCookieOrigin: in Chromium, a page of another origin opens /ws with the user's token
// cookie (the browser sends it with any page's WebSocket). Under cors-origins=* the gateway refuses it (403
// before the upgrade: the socket fails and the page reads nothing), though * lets that page read public
// streams: otherwise any page of any site would read the user's private stream and write as the user. A page
// of an origin listed exactly, with cors-credentials, opens it and gets the user's stream.
func TestBrowserWebSocketCookieOrigin(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{topic}, "keys": []string{"user-42"}}, nil)
	cookie := func(bool) string { return tok }

	anyAddr := proctest.FreeAddr(t)
	evil := appServer(t, wsCrossOriginPage, "ws://"+anyAddr+"/ws/"+topic, cookie)
	wild := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.Listen = anyAddr
		c.CORS.Origins = []string{"*"}
	}))
	wild.waitReady(t)
	refused := openPage(t, evil.URL+"/", 1, 30*time.Second)
	if refused.first != "closed" {
		t.Fatalf("a page of any origin under cors-origins=*: its WebSocket is %s, want it refused", refused.first)
	}
	if r := refused.report(t); len(r.Events) != 0 || r.Opens != 0 {
		t.Fatalf("the refused page saw %+v", r)
	}
	if v := metricValue(t, wild, "ssegate_streams_refused_total", `topic="`+topic+`"`, `reason="origin"`); v != 1 {
		t.Errorf("refused for their origin: %v, want 1", v)
	}

	listedAddr := proctest.FreeAddr(t)
	app := appServer(t, wsCrossOriginPage, "ws://"+listedAddr+"/ws/"+topic, cookie)
	listed := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.Listen = listedAddr
		c.CORS.Origins = []string{app.URL}
		c.CORS.Credentials = true
	}))
	listed.waitReady(t)
	const n = 5
	page := openPage(t, app.URL+"/", n, 60*time.Second)
	if page.first != "open" {
		t.Fatalf("the page of the listed origin: its WebSocket is %s, want open", page.first)
	}
	userRecords(t, kafkatest.Client(t, kgo.DefaultProduceTopic(topic)), 0, n)
	checkUserEvents(t, page.report(t).Events, n)
}
