package app

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// sourceStatus is one entry of GET /sources.
type sourceStatus struct {
	source.Status
	// Owner is the replica running the source: host/pid.
	Owner string `json:"owner"`
	// Topic is where the source's records go.
	Topic string `json:"topic"`
}

func (a *App) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.HandleMethodNotAllowed = true
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", a.handleReady)
	r.GET("/metrics", gin.WrapH(a.telemetry.handler))
	r.GET("/sources", a.handleSources)
	r.NoRoute(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": "no such path: " + c.Request.URL.Path})
	})
	r.NoMethod(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, gin.H{"error": "method " + c.Request.Method + " not allowed"})
	})
	return r
}

func (a *App) handleReady(c *gin.Context) {
	switch {
	case a.draining.Load():
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": "shutting down"})
	case !a.ready.Load():
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": "checkpoint topic not ready"})
	default:
		c.JSON(http.StatusOK, gin.H{"ready": true})
	}
}

func (a *App) handleSources(c *gin.Context) {
	out := make([]sourceStatus, len(a.sources))
	for i, s := range a.sources {
		out[i] = sourceStatus{Status: s.Status(), Owner: a.owner, Topic: a.cfg.Sources[i].Topic}
	}
	c.JSON(http.StatusOK, gin.H{"sources": out})
}
