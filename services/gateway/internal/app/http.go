package app

import (
	"errors"
	"html/template"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// httpError is an error with the HTTP status it answers with. Handlers return errors and abort turns them
// into a status and a JSON body, in one place.
type httpError struct {
	status int
	msg    string
	param  string
}

func (e *httpError) Error() string { return e.msg }

func errNotFound(msg string) error { return &httpError{status: http.StatusNotFound, msg: msg} }

// abort answers the request with err as JSON {"error": ..., "param": ...}.
func abort(c *gin.Context, err error) {
	status, body := http.StatusInternalServerError, gin.H{"error": err.Error()}
	var he *httpError
	var pe *stream.ParamError
	switch {
	case errors.As(err, &pe):
		status, body["param"] = http.StatusBadRequest, pe.Param
	case errors.As(err, &he):
		status = he.status
		if he.param != "" {
			body["param"] = he.param
		}
	}
	c.AbortWithStatusJSON(status, body)
}

func (a *App) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.HandleMethodNotAllowed = true
	r.GET("/streams/:topic", a.handleStream)
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", a.handleReady)
	r.GET("/metrics", gin.WrapH(a.telemetry.handler))
	r.GET("/", a.handleDashboard)
	r.NoRoute(func(c *gin.Context) { abort(c, errNotFound("no such path: "+c.Request.URL.Path)) })
	r.NoMethod(func(c *gin.Context) {
		abort(c, &httpError{status: http.StatusMethodNotAllowed, msg: "method " + c.Request.Method + " not allowed"})
	})
	return r
}

func (a *App) handleStream(c *gin.Context) {
	name := c.Param("topic")
	t := a.feed.Topic(name)
	if t == nil {
		abort(c, errNotFound("topic "+name+" is not served by this gateway"))
		return
	}
	p, err := stream.ParseParams(c.Request.URL.Query(), c.Request.Header, a.cfg.Heartbeat)
	if err != nil {
		abort(c, err)
		return
	}
	a.streams.Serve(c.Writer, c.Request, a.streamTopics[name], p, a.stats[name])
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

func (a *App) handleDashboard(c *gin.Context) {
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Header("Cache-Control", "no-cache")
	c.Status(http.StatusOK)
	page := struct{ Topic, ValueFormat string }{a.cfg.DemoTopic, a.streamTopics[a.cfg.DemoTopic].ValueFormat.String()}
	if err := dashboardTmpl.Execute(c.Writer, page); err != nil {
		a.log.Warn("dashboard render failed", "err", err)
	}
}
