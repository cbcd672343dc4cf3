package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// TestWebSocketPublishKafkaRefused: a message Kafka does not take (here larger than the topic's
// max.message.bytes) is answered with a publish-error (503) under publish_results=1, and without it closes the
// connection with 1011 and why, so that the client knows it and what it sent after it were not published.
// Before, without publish_results it was dropped with no answer and no close.
func TestWebSocketPublishKafkaRefused(t *testing.T) {
	limit := "1000"
	topic := kafkatest.NewTopic(t, 1, map[string]*string{"max.message.bytes": &limit})
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
	})
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Random text, which compression cannot bring under the limit.
	raw := make([]byte, 6000)
	_, _ = rand.Read(raw)
	big := []byte(base64.StdEncoding.EncodeToString(raw))

	answered := dialWS(t, ctx, g, "/ws/"+topic+"?publish=1&publish_results=1", nil)
	nextWS(t, answered) // open
	if err := answered.Write(ctx, websocket.MessageText, big); err != nil {
		t.Fatal(err)
	}
	m := nextWS(t, answered)
	var d struct{ Status int }
	if m.Event != "publish-error" || json.Unmarshal(m.Data, &d) != nil || d.Status != 503 {
		t.Fatalf("a message Kafka refused, with publish_results: %s %.200s, want a publish-error of status 503", m.Event, m.Data)
	}

	silent := dialWS(t, ctx, g, "/ws/"+topic+"?publish=1", nil)
	nextWS(t, silent) // open
	if err := silent.Write(ctx, websocket.MessageText, big); err != nil {
		t.Fatal(err)
	}
	_, b, err := silent.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusInternalError || !strings.Contains(ce.Reason, "not published") {
		t.Fatalf("a message Kafka refused, without publish_results: %.200q %v, want close 1011 saying it was not published", b, err)
	}
	if n := len(kafkatest.ReadAll(t, topic)[0]); n != 0 {
		t.Fatalf("the topic holds %d records, want none", n)
	}
}

// TestWebSocketPublishTokenExpires: a socket that publishes with a token that may publish into an optional
// topic but not read it (it reads anonymously) ends when that token expires, as a reading token's stream
// does: token-expiring, token-expired, close 4001. Before, it published with the token for ever.
func TestWebSocketPublishTokenExpires(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.Auth.TopicModes = map[string]string{topic: "optional"}
		c.Auth.ExpiryNotice = time.Second
		c.Publish.Topics = []string{topic}
	}))
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	exp := time.Now().Add(3 * time.Second)
	writer := token(t, testSecret, exp, map[string]any{"topics": []string{}, "publish": []string{topic}}, nil)
	ws := dialWS(t, ctx, g, "/ws/"+topic+"?publish=1&publish_results=1", http.Header{"Authorization": {"Bearer " + writer}})
	nextWS(t, ws) // open
	if err := ws.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	var events []string
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			if st := websocket.CloseStatus(err); st != stream.CloseTokenExpired {
				t.Fatalf("after %v: %v, want close %d (token expired)", events, err, stream.CloseTokenExpired)
			}
			break
		}
		var m wsMessage
		_ = json.Unmarshal(b, &m)
		events = append(events, m.Event)
	}
	if time.Now().Before(exp.Truncate(time.Second)) { // exp is in whole seconds
		t.Errorf("closed before the token expired")
	}
	if !slices.Contains(events, "published") || !slices.Contains(events, "token-expiring") || events[len(events)-1] != "token-expired" {
		t.Errorf("messages %v, want the publish's answer, token-expiring, and token-expired last", events)
	}
}
