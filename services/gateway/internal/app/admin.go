package app

import (
	"net/http"
	"net/http/pprof" //nolint:gosec // served only on the admin port, and only with the pprof setting
	"strings"

	"github.com/gin-gonic/gin"
)

// adminRoutes are the admin port's: metrics, health, readiness (GET and HEAD) and, with the pprof setting,
// Go's profiles. The clients' port serves none of them.
func (a *App) adminRoutes() *gin.Engine {
	r := newEngine(a.log)
	r.Use(a.httpAdmin.observe(false))
	health := func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }
	r.GET("/healthz", health)
	r.HEAD("/healthz", health)
	r.GET("/readyz", a.handleReady)
	r.HEAD("/readyz", a.handleReady)
	r.GET("/metrics", gin.WrapH(a.telemetry.handler))
	if a.cfg.Pprof {
		r.GET("/debug/pprof/*name", handlePprof)
		r.POST("/debug/pprof/*name", handlePprof) // symbol lookups
	}
	return r
}

// handlePprof serves net/http/pprof's handlers under /debug/pprof/.
func handlePprof(c *gin.Context) {
	switch strings.TrimPrefix(c.Param("name"), "/") {
	case "cmdline":
		pprof.Cmdline(c.Writer, c.Request)
	case "profile":
		pprof.Profile(c.Writer, c.Request)
	case "symbol":
		pprof.Symbol(c.Writer, c.Request)
	case "trace":
		pprof.Trace(c.Writer, c.Request)
	default:
		pprof.Index(c.Writer, c.Request) // the index, and the named profiles (heap, goroutine, ...)
	}
}
