package app

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// randomSessions reads a stream the way a client on a flaky network does: in sessions of 150 to 550 ms, each
// on the next of gws and resuming from the last id it got (last_event_id), away up to 300 ms between them
// (sometimes past what the rings hold). path is the stream's path and query. It checks that no id moves a
// partition back, hands each event to each (with the session's number and the id it resumed from), and stops
// once finished says so after a session. It fails t when ctx ends first, and returns the sessions it took.
func randomSessions(t *testing.T, ctx context.Context, gws []*gateway, path string, each func(session int, from string, ev sse.Event), finished func() bool) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	id := ""
	var last position.Vector
	for session := 0; ; session++ {
		if ctx.Err() != nil {
			t.Fatalf("not finished after %d sessions", session)
		}
		u := gws[session%len(gws)].url + path
		if id != "" {
			u += "&last_event_id=" + url.QueryEscape(id)
		}
		from := id
		sctx, cancel := context.WithTimeout(ctx, time.Duration(150+rng.IntN(400))*time.Millisecond)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			t.Fatal(err)
		}
		for p := sse.NewParser(resp.Body); ; {
			ev, err := p.Next()
			if err != nil {
				break // dropped (the session's time is up)
			}
			pos, err := position.Parse(ev.ID)
			if err != nil {
				t.Fatalf("session %d: id %q: %v", session, ev.ID, err)
			}
			for i := range last.Len() {
				if now, ok := pos.Offset(last.At(i).Partition); !ok || now < last.At(i).Offset {
					t.Fatalf("session %d: id %s after %s: partition %d went back", session, ev.ID, id, last.At(i).Partition)
				}
			}
			last, id = pos, ev.ID
			each(session, from, ev)
		}
		_ = resp.Body.Close()
		cancel()
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if finished() {
			return session + 1
		}
	}
}

// afterProducing is a finished function for randomSessions: true once the producer said on produced that it
// ended (failing t on its error) and done holds.
func afterProducing(t *testing.T, produced <-chan error, done func() bool) func() bool {
	ended := false
	return func() bool {
		if !ended {
			select {
			case err := <-produced:
				if err != nil {
					t.Fatal(err)
				}
				ended = true
			default:
			}
		}
		return ended && done()
	}
}

// readyGateways starts a gateway of topic for each mutate (nil: the defaults) and waits until each is ready.
func readyGateways(t *testing.T, topic string, mutates ...func(*Config)) []*gateway {
	t.Helper()
	gws := make([]*gateway, len(mutates))
	for i, m := range mutates {
		gws[i] = startGateway(t, []string{topic}, m)
	}
	for _, g := range gws {
		g.waitReady(t)
	}
	return gws
}
