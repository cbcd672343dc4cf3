package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
	if o.Publish && strings.Contains(name, ",") {
		abort(c, &stream.ParamError{Param: "publish", Msg: "a stream of several topics cannot publish: open one per topic"})
		return
	}
	if o.Publish && a.feed.Topic(name) != nil {
		inbound, err := a.wsInbound(c, name)
		if err != nil {
			if _, ok := auth.ReasonOf(err); ok {
				a.refuse(c, name, err)
			} else {
				abort(c, err)
			}
			return
		}
		o.Inbound = inbound
	}
	req, ok := a.streamRequest(c)
	if !ok {
		return
	}
	a.streams.ServeWebSocket(c.Writer, c.Request, req.streams(a), req.onEnd, o)
}

// wsInbound checks that the request may publish into topic and returns what publishes its client's messages
// (publish.FromMessage), answering each with {"event":"published","data":{...}} (the place and id, as a POST
// answers) or {"event":"publish-error","data":{"error","status"}}.
func (a *App) wsInbound(c *gin.Context, topic string) (func(context.Context, []byte) ([]byte, bool), error) {
	p := a.publisher
	if p == nil || !p.open[topic] {
		return nil, &httpError{status: http.StatusForbidden, reason: "not_open", msg: "topic " + topic + " is not open for publishing (publish-topics)"}
	}
	gr, err := a.gate.admitPublish(c.Request, topic, a.cfg.Publish.Anonymous)
	if err != nil {
		return nil, err
	}
	who := a.publisherName(c.Request, gr)
	lim := a.cfg.Publish.limits()
	source := "/ws/" + topic
	return func(ctx context.Context, msg []byte) ([]byte, bool) {
		rec, err := publish.FromMessage(msg, source, lim)
		if err == nil {
			_, err = a.publishAllowed(p, who, gr, rec)
		}
		if err != nil {
			p.stats[topic].results[publishErrorResult(err)].Add(1)
			return wsReply(feed.EventPublishError, gin.H{"error": err.Error(), "status": inputStatus(err)}), false
		}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.Publish.claimLease())
		defer cancel()
		results, errs := p.Publish(pctx, topic, who, []publish.Record{rec})
		out, status, _ := a.publishOutcome(topic, results[0], errs[0])
		if status != http.StatusOK {
			return wsReply(feed.EventPublishError, out), true
		}
		return wsReply(feed.EventPublished, out), true
	}, nil
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
