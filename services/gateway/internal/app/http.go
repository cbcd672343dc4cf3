package app

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/pkg/clientjs"
	"github.com/ssegate/ssegate/services/gateway/internal/auth"
	"github.com/ssegate/ssegate/services/gateway/internal/limit"
	"github.com/ssegate/ssegate/services/gateway/internal/publish"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// httpError is an error with the HTTP status it answers with. Handlers return errors and abort turns them
// into a status and a JSON body, in one place.
type httpError struct {
	status int
	msg    string
	param  string
	reason string // the JSON body's "reason"; empty means none
}

func (e *httpError) Error() string { return e.msg }

func errNotFound(msg string) error { return &httpError{status: http.StatusNotFound, msg: msg} }

// abort answers the request with err as JSON {"error": ..., "param": ...}; a stream refused by a limit gets
// 429 (503 when the quota store could not answer) with Retry-After, and "limit" naming the limit's kind.
func abort(c *gin.Context, err error) {
	status, body := http.StatusInternalServerError, gin.H{"error": err.Error()}
	var he *httpError
	var pe *stream.ParamError
	var lr *limit.Refusal
	var ae *auth.Error
	var ie *publish.InputError
	var hr *hookRefusal
	switch {
	case errors.As(err, &ie):
		status = ie.Status
	case errors.As(err, &hr):
		he := hr.httpError()
		status, body["reason"] = he.status, he.reason
		if he.status == http.StatusServiceUnavailable {
			c.Header("Retry-After", "1")
		}
	case errors.As(err, &pe):
		status, body["param"] = http.StatusBadRequest, pe.Param
	case errors.As(err, &ae):
		// RFC 6750 section 3: the challenge says what is wrong; the body says it again, for pages.
		status, body["reason"] = ae.Status(), ae.Reason.String()
		c.Header("WWW-Authenticate", ae.Challenge(realm))
	case errors.As(err, &lr):
		status, body["limit"] = http.StatusTooManyRequests, lr.Kind.String()
		if lr.Kind == limit.KindStore {
			status = http.StatusServiceUnavailable
		}
		c.Header("Retry-After", strconv.Itoa(max(1, int(lr.RetryAfter.Seconds()))))
	case errors.As(err, &he):
		status = he.status
		if he.param != "" {
			body["param"] = he.param
		}
		if he.reason != "" {
			body["reason"] = he.reason
		}
	}
	c.AbortWithStatusJSON(status, body)
}

// routes are the clients' port's: streams and the dashboard. Metrics, health and readiness are on the admin
// port (adminRoutes).
func (a *App) routes() *gin.Engine {
	r := newEngine(a.log)
	r.Use(a.httpClients.observe(a.tracing.Enabled()), a.checkHost) // every route, unknown paths included
	cors := a.cors.handler(a.refuseOrigin)
	r.GET("/streams/:topic", cors, a.handleStream)
	r.GET("/streams", cors, a.handleStream)
	r.OPTIONS("/streams/:topic", cors, handleOptions)
	r.OPTIONS("/streams", cors, handleOptions)
	r.GET("/ws/:topic", cors, a.handleWebSocket)
	r.GET("/asyncapi.json", cors, a.handleAsyncAPI)
	r.OPTIONS("/asyncapi.json", cors, handleOptions)
	r.GET("/", cors, a.handleDashboard)
	r.OPTIONS("/", cors, handleOptions)
	for name := range dashboardScripts {
		r.GET("/"+name, handleScript)
	}
	publishCORS := a.cors.handlerFor(publishCORSRoute, a.refuseOrigin)
	r.POST("/topics/:topic/records", publishCORS, a.handlePublish)
	r.OPTIONS("/topics/:topic/records", publishCORS, handlePublishOptions)
	return r
}

// newEngine returns a gin engine whose every error is JSON: unknown paths, wrong methods, and panics (logged
// to log with their stack).
func newEngine(log *slog.Logger) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, p any) {
		log.Error("handler panicked", "panic", fmt.Sprint(p), "path", c.Request.URL.Path, "stack", string(debug.Stack()))
		abort(c, errors.New("internal error"))
	}))
	r.HandleMethodNotAllowed = true
	r.NoRoute(func(c *gin.Context) { abort(c, errNotFound("no such path: "+c.Request.URL.Path)) })
	r.NoMethod(func(c *gin.Context) {
		abort(c, &httpError{status: http.StatusMethodNotAllowed, msg: "method " + c.Request.Method + " not allowed"})
	})
	return r
}

func (a *App) handleStream(c *gin.Context) {
	req, ok := a.streamRequest(c)
	if !ok {
		return
	}
	if len(req.topics) == 1 {
		a.streams.Serve(c.Writer, c.Request, a.streamTopics[req.topics[0]], req.params[0], a.stats[req.topics[0]])
		return
	}
	a.streams.ServeTopics(c.Writer, c.Request, req.streams(a), req.onEnd)
}

// streamReq is an admitted stream request: its topics, each topic's parameters (narrowed to its grant), and
// what gives the limits' slots back when the stream ends (also each topic's OnEnd for a stream of one).
type streamReq struct {
	topics []string
	params []stream.Params
	onEnd  func(stream.CloseReason)
}

// streams returns what a stream of several topics reads of each.
func (r streamReq) streams(a *App) []stream.TopicStream {
	ts := make([]stream.TopicStream, len(r.topics))
	for i, name := range r.topics {
		ts[i] = stream.TopicStream{Topic: a.streamTopics[name], Params: r.params[i], Stats: a.stats[name]}
	}
	return ts
}

// streamRequest admits a stream request, whatever its transport: the topics, the token and its scope on each,
// the parameters, the limits. It returns false when it answered the request with a refusal. A stream of
// several topics is refused as a whole when its token does not allow one of them.
func (a *App) streamRequest(c *gin.Context) (streamReq, bool) {
	q := c.Request.URL.Query()
	names, err := stream.TopicList(c.Param("topic"), q, a.cfg.Limits.MaxTopicsPerStream)
	if err != nil {
		abort(c, err)
		return streamReq{}, false
	}
	ts := make([]*stream.Topic, len(names))
	for i, name := range names {
		if a.feed.Topic(name) == nil {
			abort(c, errNotFound("topic "+name+" is not served by this gateway"))
			return streamReq{}, false
		}
		ts[i] = a.streamTopics[name]
	}
	if err := stream.CheckTopicsID(ts); err != nil {
		abort(c, err)
		return streamReq{}, false
	}
	grants := make([]grant, len(names))
	subject := ""
	cr := &credential{r: c.Request, topics: names, action: hookStream}
	if strings.HasPrefix(c.Request.URL.Path, "/ws/") {
		cr.action = hookWebSocket
	}
	for i, name := range names {
		if grants[i], err = a.gate.admit(cr, name); err != nil {
			a.refuse(c, name, err)
			return streamReq{}, false
		}
		subject = cmp.Or(subject, grants[i].subject())
	}
	params, err := stream.ParseTopicParams(q, c.Request.Header, a.cfg.Heartbeat, names)
	if err != nil {
		abort(c, err)
		return streamReq{}, false
	}
	for i, name := range names {
		if err := grants[i].apply(a.gate, &params[i]); err != nil {
			a.refuse(c, name, err)
			return streamReq{}, false
		}
	}
	lease, err := a.admit(c, subject)
	if err != nil {
		abort(c, err)
		return streamReq{}, false
	}
	// The slots come back when the stream really ends, also for a stream the writer pool serves (Serve
	// returns long before).
	letGo := a.gate.holdHooks(grants)
	onEnd := func(stream.CloseReason) {
		lease.Release()
		letGo()
	}
	params[0].OnEnd = onEnd
	return streamReq{topics: names, params: params, onEnd: onEnd}, true
}

// refuse answers a stream request its token does not allow, and counts it. The token itself is never logged.
func (a *App) refuse(c *gin.Context, topic string, err error) {
	if r, ok := auth.ReasonOf(err); ok {
		a.refused.add(topic, r.String())
		if a.log.Enabled(c.Request.Context(), slog.LevelDebug) {
			a.log.Debug("stream refused", "topic", topic, "reason", r.String(), "remote", c.Request.RemoteAddr, "err", err)
		}
	}
	abort(c, err)
}

// refuseOrigin answers a request from a page of an origin that is not allowed (cors-origins).
func (a *App) refuseOrigin(c *gin.Context, origin string) {
	if topic := c.Param("topic"); topic != "" {
		a.refused.add(topic, reasonOrigin)
	}
	abort(c, &httpError{status: http.StatusForbidden, reason: reasonOrigin, msg: "origin " + strconv.Quote(origin) + " is not allowed (cors-origins)"})
}

// handleOptions answers an OPTIONS request that is not a CORS preflight (the CORS handler answers those).
func handleOptions(c *gin.Context) {
	c.Header("Allow", "GET, OPTIONS")
	c.Status(http.StatusNoContent)
}

// handlePublishOptions answers an OPTIONS request of the records route that is not a CORS preflight.
func handlePublishOptions(c *gin.Context) {
	c.Header("Allow", "POST, OPTIONS")
	c.Status(http.StatusNoContent)
}

func (a *App) handleReady(c *gin.Context) {
	if a.draining.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": "shutting down"})
		return
	}
	if ok, why := a.feed.Ready(); !ok {
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": why})
		return
	}
	c.JSON(http.StatusOK, gin.H{"ready": true})
}

var dashboardTmpl = template.Must(template.ParseFS(dashboardFS, "dashboard/index.html"))

// dashboardScripts are the browser client (ssegate.js, pkg/clientjs), which the dashboard and pages of any
// origin import,
// and the dashboard's own scripts: public code, so any origin may load them (a module script is fetched with
// CORS).
var dashboardScripts = func() map[string][]byte {
	m := map[string][]byte{"ssegate.js": clientjs.Source}
	for _, name := range []string{"dashboard.js", "ws.js"} {
		b, err := dashboardFS.ReadFile("dashboard/" + name)
		if err != nil {
			panic(err) // embedded: only a broken build gets here
		}
		m[name] = b
	}
	return m
}()

// handleScript serves one of dashboardScripts, named by the route's path.
func handleScript(c *gin.Context) {
	c.Header("Access-Control-Allow-Origin", "*")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Data(http.StatusOK, "text/javascript; charset=utf-8", dashboardScripts[strings.TrimPrefix(c.FullPath(), "/")])
}

func (a *App) handleDashboard(c *gin.Context) {
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Header("Cache-Control", "no-cache")
	c.Status(http.StatusOK)
	// The value format of the topics the page offers, which it decodes values by: the demo topic and those
	// anyone may read. A topic that needs a token is not named to a page anyone may load (a stream of it
	// typed into the form decodes as auto).
	formats := make(map[string]string, len(a.streamTopics))
	for name, st := range a.streamTopics {
		if name == a.cfg.DemoTopic || a.gate.modes[name] != auth.ModeRequired {
			formats[name] = st.Format.Value.Data()
		}
	}
	b, err := json.Marshal(formats)
	if err != nil {
		panic(err) // a map of strings
	}
	page := struct{ Topic, Formats string }{a.cfg.DemoTopic, string(b)}
	if err := dashboardTmpl.Execute(c.Writer, page); err != nil {
		a.log.Warn("dashboard render failed", "err", err)
	}
}
