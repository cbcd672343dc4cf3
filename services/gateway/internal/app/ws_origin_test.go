package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// wsOriginCase is a /ws request of a page of origin ("" for none) for topic, with the token as how says:
// "cookie", "query" (and the cookie) or "own" (the cookie, from the gateway's own origin); and its answer.
type wsOriginCase struct {
	origin, topic, how string
	status             int
}

// TestWebSocketCookieOrigins: which pages of other origins may open /ws with the user's token cookie: only an
// origin listed exactly, with cors-credentials. One that * or a pattern lets in, or one listed without
// cors-credentials, is refused (403, reason origin) when its token would be the cookie; the same page with
// the token in the query, the gateway's own pages, clients that send no Origin, and topics that take no
// tokens (auth none) are not.
func TestWebSocketCookieOrigins(t *testing.T) {
	priv, public := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{priv, public}}, nil)
	const app, sub = "https://app.example.com", "https://shop.example.com"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, gc := range []struct {
		name        string
		origins     []string
		credentials bool
		cases       []wsOriginCase
	}{
		{"any origin", []string{"*"}, false, []wsOriginCase{
			{app, priv, "cookie", http.StatusForbidden},
			{app, priv, "query", http.StatusSwitchingProtocols},
			{app, public, "cookie", http.StatusSwitchingProtocols},
			{"", priv, "cookie", http.StatusSwitchingProtocols},
			{"", priv, "own", http.StatusSwitchingProtocols},
		}},
		{"pattern", []string{app, "https://*.example.com"}, true, []wsOriginCase{
			{sub, priv, "cookie", http.StatusForbidden},
			{sub, public + "," + priv, "cookie", http.StatusForbidden},
			{app, priv, "cookie", http.StatusSwitchingProtocols},
		}},
		{"listed without credentials", []string{app}, false, []wsOriginCase{
			{app, priv, "cookie", http.StatusForbidden},
			{app, priv, "query", http.StatusSwitchingProtocols},
		}},
	} {
		t.Run(gc.name, func(t *testing.T) {
			g := startGateway(t, []string{priv, public}, withAuth(t, func(c *Config) {
				c.CORS.Origins, c.CORS.Credentials = gc.origins, gc.credentials
				c.Auth.QueryToken = true
				c.Auth.TopicModes = map[string]string{public: "none"}
			}))
			g.waitReady(t)
			for _, tc := range gc.cases {
				h := http.Header{}
				path := "/ws/" + tc.topic
				switch tc.how {
				case "query": // the cookie too, as a browser sends it: the query's token is the one taken
					path += "?access_token=" + tok
					h.Set("Cookie", "ssegate_token="+tok)
				case "own":
					h.Set("Origin", g.url)
					fallthrough
				default:
					h.Set("Cookie", "ssegate_token="+tok)
				}
				if tc.origin != "" {
					h.Set("Origin", tc.origin)
				}
				ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+path, &websocket.DialOptions{HTTPHeader: h})
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				if status != tc.status {
					t.Errorf("%s of %q, token by %s: %d %v, want %d", tc.topic, tc.origin, tc.how, status, err, tc.status)
				}
				if ws != nil {
					_ = ws.CloseNow()
				}
			}
		})
	}
}
