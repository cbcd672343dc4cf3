package app

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/pkg/secret"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// StateStandby is the state /sources reports for a source whose lease another replica holds (or nobody
// does yet): this replica does not run it.
const StateStandby = "standby"

// sourceStatus is one entry of GET /sources.
type sourceStatus struct {
	source.Status
	// Owner is the replica running the source (its host/pid, or the Owner option); empty when no replica
	// holds the lease.
	Owner string `json:"owner"`
	// OwnerError says why the owner could not be read from Redis; empty when it was.
	OwnerError string `json:"owner_error,omitempty"`
	// Topic is where the source's records go.
	Topic string `json:"topic"`
}

func (a *App) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), a.observeHTTP)
	r.HandleMethodNotAllowed = true
	health := func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }
	r.GET("/healthz", health)
	r.HEAD("/healthz", health)
	r.GET("/readyz", a.handleReady)
	r.HEAD("/readyz", a.handleReady)
	auth := bearer(a.cfg.httpToken())
	r.GET("/metrics", auth, gin.WrapH(a.telemetry.handler))
	r.GET("/sources", auth, a.handleSources)
	r.NoRoute(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": "no such path: " + c.Request.URL.Path})
	})
	r.NoMethod(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, gin.H{"error": "method " + c.Request.Method + " not allowed"})
	})
	return r
}

// bearer returns a handler that lets a request through only with "Authorization: Bearer <token>", and
// answers 401 JSON otherwise; with no token it lets everything through. A token from a file is the file as
// it is now (read again when it changes); a file that has become unreadable, empty or too short lets nothing
// through (503, naming the setting). The comparison takes the same time wherever the tokens differ (it
// compares their hashes, so their lengths do not show either).
func bearer(token secret.Value) gin.HandlerFunc {
	if token.IsZero() {
		return func(*gin.Context) {}
	}
	return func(c *gin.Context) {
		tok, err := token.Get()
		if err == nil {
			err = checkHTTPToken(tok)
		}
		if err != nil {
			c.AbortWithStatusJSON(http.StatusServiceUnavailable, gin.H{"error": "http-token-file cannot be used: see the file named by http-token-file"})
			return
		}
		want := sha256.Sum256([]byte(tok))
		// The scheme is case-insensitive (RFC 7235); the token is not.
		scheme, got, ok := strings.Cut(c.GetHeader("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		h := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if ok && subtle.ConstantTimeCompare(h[:], want[:]) == 1 {
			return
		}
		c.Header("WWW-Authenticate", `Bearer realm="ssegate-ingest"`)
		c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "this endpoint needs Authorization: Bearer <http-token>"})
	}
}

func (a *App) handleReady(c *gin.Context) {
	switch {
	case a.draining.Load():
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": "shutting down"})
	case !a.ready.Load():
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": "checkpoint topic not ready"})
	default:
		if problems := a.sourceProblems(); len(problems) > 0 {
			c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "reason": strings.Join(problems, "; ")})
			return
		}
		c.JSON(http.StatusOK, gin.H{"ready": true})
	}
}

// sourceProblems returns, for each source this replica runs that cannot make progress until someone acts
// (a topic it writes to is missing), a line naming the source and the problem.
func (a *App) sourceProblems() []string {
	var out []string
	for i, s := range a.sources {
		if !a.held[i].Load() {
			continue
		}
		if st := s.Status(); st.State == source.StateTopicMissing {
			out = append(out, fmt.Sprintf("source %s: %s", s.Name(), strings.TrimPrefix(st.LastError, "source: ")))
		}
	}
	return out
}

func (a *App) handleSources(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	out := make([]sourceStatus, len(a.sources))
	for i, s := range a.sources {
		st := sourceStatus{Status: s.Status(), Topic: a.cfg.Sources[i].Topic}
		if !a.held[i].Load() && a.shared {
			st.State = StateStandby
		}
		owner, err := a.leases.Owner(ctx, s.Name())
		if err != nil {
			st.OwnerError = err.Error()
		}
		st.Owner = owner
		out[i] = st
	}
	c.JSON(http.StatusOK, gin.H{"sources": out})
}
