package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/services/gateway/internal/auth"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/publish"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// handleWebSocket serves GET /ws/{topic}: the stream of /streams/{topic}, with the same parameters, tokens,
// scopes, origins and limits, on a WebSocket (stream.ServeWebSocket); with publish=1 the client's messages
// are published into the topic too, with the rights of POST /topics/{topic}/records.
func (a *App) handleWebSocket(c *gin.Context) {
	o, err := stream.ParseWSOptions(c.Request.URL.Query())
	if err != nil {
		abort(c, err)
		return
	}
	name := c.Param("topic")
	if a.wsCookieRefused(c, strings.Split(name, ",")) {
		return
	}
	if o.Publish && strings.Contains(name, ",") {
		abort(c, &stream.ParamError{Param: "publish", Msg: "a stream of several topics cannot publish: open one per topic"})
		return
	}
	var pub grant
	if o.Publish && a.feed.Topic(name) != nil {
		inbound, gr, err := a.wsInbound(c, name)
		if err != nil {
			if _, ok := auth.ReasonOf(err); ok {
				a.refuse(c, name, err)
			} else {
				abort(c, err)
			}
			return
		}
		o.Inbound, pub = inbound, gr
	}
	req, ok := a.streamRequest(c)
	if !ok {
		return
	}
	if pub.claims != nil {
		// The socket publishes with its token's rights until the token expires, also where it reads without
		// one (an optional topic, a token that may publish and not read): the stream ends then, as a reading
		// token's does (token-expiring, token-expired, 4001).
		p := &req.params[0]
		if exp := pub.claims.Expires.Add(a.gate.leeway); p.Expires.IsZero() || exp.Before(p.Expires) {
			p.Expires, p.ExpiryNotice = exp, a.gate.notice
		}
	}
	a.streams.ServeWebSocket(c.Writer, c.Request, req.streams(a), req.onEnd, o)
}

// wsCookieRefused refuses (403, reason origin) a WebSocket request of a page of another origin whose token
// would be the user's cookie, unless cors-origins lists that origin exactly and cors-credentials is on
// (corsPolicy.cookiesFrom): a WebSocket has no CORS, so the browser sends the cookie and lets the page read
// and write whatever origin the page is of, and the CORS handler's answer (which lets * and patterns through,
// for what they may read without cookies) does not protect it. Topics that take no tokens (auth none) never
// look at the cookie, so requests for them go on.
func (a *App) wsCookieRefused(c *gin.Context, names []string) bool {
	origin := c.Request.Header.Get("Origin")
	if origin == "" || sameOrigin(c.Request, origin) || a.cors.cookiesFrom(origin) || !a.gate.extract.FromCookie(c.Request) {
		return false
	}
	var tokened []string
	for _, n := range names {
		if a.gate.modes[n] != auth.ModeNone {
			tokened = append(tokened, n)
		}
	}
	if len(tokened) == 0 {
		return false
	}
	for _, n := range tokened {
		a.refused.add(n, reasonOrigin)
	}
	abort(c, &httpError{status: http.StatusForbidden, reason: reasonOrigin, msg: "origin " + strconv.Quote(origin) +
		" may not open a WebSocket with the cookie token: only an origin listed exactly in cors-origins (not * or a pattern), " +
		"with cors-credentials, may (a WebSocket carries the user's cookies from any page)"})
	return true
}

// wsInbound checks that the request may publish into topic and returns what publishes its client's messages
// (publish.FromMessage), answering each with {"event":"published","data":{...}} (the place and id, as a POST
// answers) or {"event":"publish-error","data":{"error","status"}}, and the grant it publishes with.
func (a *App) wsInbound(c *gin.Context, topic string) (func(context.Context, []byte) ([]byte, int), grant, error) {
	p := a.publisher
	if p == nil || !p.open[topic] {
		return nil, grant{}, &httpError{status: http.StatusForbidden, reason: "not_open", msg: "topic " + topic + " is not open for publishing (publish-topics)"}
	}
	gr, err := a.gate.admitPublish(c.Request, topic, a.cfg.Publish.Anonymous)
	if err != nil {
		return nil, grant{}, err
	}
	who := a.publisherName(c.Request, gr)
	lim := a.cfg.Publish.limits()
	source := "/ws/" + topic
	return func(ctx context.Context, msg []byte) ([]byte, int) {
		rec, err := publish.FromMessage(msg, source, lim)
		if err == nil {
			_, err = a.publishAllowed(p, who, gr, rec)
		}
		if err != nil {
			p.stats[topic].results[publishErrorResult(err)].Add(1)
			status := inputStatus(err)
			return wsReply(feed.EventPublishError, gin.H{"error": err.Error(), "status": status}), status
		}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.Publish.claimLease())
		defer cancel()
		results, errs := p.Publish(pctx, topic, who, []publish.Record{rec})
		out, status, _ := a.publishOutcome(topic, results[0], errs[0])
		if status != http.StatusOK {
			return wsReply(feed.EventPublishError, out), status
		}
		return wsReply(feed.EventPublished, out), status
	}, gr, nil
}

// inputStatus is the HTTP status of a refused message, as a POST would get it.
func inputStatus(err error) int {
	var ie *publish.InputError
	var he *httpError
	var ae *auth.Error
	switch {
	case errors.As(err, &ie):
		return ie.Status
	case errors.As(err, &ae):
		return ae.Status()
	case errors.As(err, &he):
		return he.status
	}
	return http.StatusBadRequest
}

func wsReply(event string, data gin.H) []byte {
	b, _ := json.Marshal(gin.H{"event": event, "data": data}) // strings and numbers always marshal
	return b
}
