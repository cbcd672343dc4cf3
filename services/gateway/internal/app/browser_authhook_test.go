package app

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// TestBrowserAuthHookCookie: in Chromium, a page of the site's own origin opens an EventSource with
// credentials; the browser sends the site's session cookie, the gateway asks the site's session store (the
// authorization hook), and the page gets the per-user stream the store's scope allows: user-42's records
// only, every one, in order.
func TestBrowserAuthHookCookie(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	addr := proctest.FreeAddr(t)
	store := newSessionStore(t)
	store.set(func(s *sessionStore) {
		s.cookie = "ssegate_token" // the cookie appServer sets: the site's session
		s.users["c-alice"] = "alice"
		s.scope["alice"] = map[string]any{"topics": []string{topic}, "keys": []string{"user-42"}}
	})
	app := appServer(t, crossOriginPage, "http://"+addr+"/streams/"+topic, func(bool) string { return "c-alice" })
	g := startGateway(t, []string{topic}, func(c *Config) {
		withHook(store, time.Minute)(c)
		c.Listen = addr
		c.CORS.Origins = []string{app.URL}
		c.CORS.Credentials = true
	})
	g.waitReady(t)
	const n = 10
	page := openPage(t, app.URL+"/", n, 60*time.Second)
	if page.first != "open" {
		t.Fatalf("the page's EventSource: %s, want open", page.first)
	}
	userRecords(t, kafkatest.Client(t, kgo.DefaultProduceTopic(topic)), 0, n)
	checkUserEvents(t, page.report(t).Events, n)
	if seen := store.last.Load(); seen == nil || seen.Cookie != "ssegate_token=c-alice" || seen.Origin != app.URL {
		t.Errorf("the hook was sent %+v, want the page's cookie and origin", seen)
	}
}
