package asyncapi

import (
	"maps"
	"slices"
	"strings"

	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// Version is the AsyncAPI specification version of the documents.
const Version = "3.0.0"

// Spec is what a document describes.
type Spec struct {
	// Title and AppVersion fill the document's info (AppVersion: the gateway's build).
	Title, AppVersion string
	// Host is the gateway's address as clients reach it (host[:port]), from the request or a setting.
	Host string
	// TLS: the clients' port speaks https and wss.
	TLS bool
	// Topics are the topics described, in order; only those the reader may read.
	Topics []Topic
	// Cookie is the name of the token cookie, QueryToken whether access_token is accepted in the query.
	Cookie     string
	QueryToken bool
}

// Topic is one served topic.
type Topic struct {
	Name string
	// Auth is the topic's auth mode: none, optional or required.
	Auth string
	// ValueFormat is how values are written: auto, base64, text, avro, protobuf or json-schema.
	ValueFormat string
	// Schema is the description of the topic's value schema (the latest of its subject), nil without one.
	Schema *schema.Description
	// SchemaNote says why a topic of a schema format has no Schema (no subject, the registry down).
	SchemaNote string
}

// Namer is how payload schemas' named types are named in the document: under components.schemas, each in a
// namespace of its topic.
func Namer(topic string) schema.Namer {
	return schema.Namer{Namespace: "topic." + topic, Prefix: "#/components/schemas/"}
}

// key is a document key for a topic: a component key or a channel id allows only [A-Za-z0-9._-].
func key(topic string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, topic)
}

// obj is a JSON object being built.
type obj = map[string]any

// ref is a reference to a place in the document.
func ref(path ...string) obj { return obj{"$ref": "#/" + strings.Join(path, "/")} }

// Document returns the AsyncAPI document of s, ready to be written as JSON.
func (s Spec) Document() obj {
	schemas := obj{}
	maps.Copy(schemas, commonSchemas())
	messages := commonMessages()
	channels, operations := obj{}, obj{}
	for _, t := range s.Topics {
		k := key(t.Name)
		if t.Schema != nil {
			maps.Copy(schemas, t.Schema.Defs)
		}
		messages["record."+k] = recordMessage(t)
		messages["record.ws."+k] = wsRecordMessage(t)
		channels[k] = sseChannel(t, k)
		channels["ws."+k] = wsChannel(t, k)
		operations["receive."+k] = obj{
			"action": "receive", "channel": ref("channels", k),
			"summary":  "Read " + t.Name + " as an event stream (EventSource).",
			"bindings": obj{"http": obj{"method": "GET", "query": ref("components", "schemas", "ssegate.StreamQuery")}},
			"security": s.security(t),
		}
		operations["receive.ws."+k] = obj{
			"action": "receive", "channel": ref("channels", "ws."+k),
			"summary":  "Read " + t.Name + " on a WebSocket.",
			"security": s.security(t),
		}
	}
	if len(s.Topics) > 1 {
		several := severalChannel(s.topicNames())
		msgs := obj{}
		for name, m := range channels[key(s.Topics[0].Name)].(obj)["messages"].(obj) {
			if name != "record" {
				msgs[name] = m
			}
		}
		for _, t := range s.Topics {
			msgs["record."+key(t.Name)] = ref("components", "messages", "record."+key(t.Name))
		}
		several["messages"] = msgs
		channels["streams"] = several
		operations["receive.streams"] = obj{
			"action": "receive", "channel": ref("channels", "streams"),
			"summary":  "Read several topics as one event stream.",
			"bindings": obj{"http": obj{"method": "GET", "query": ref("components", "schemas", "ssegate.StreamQuery")}},
		}
	}
	doc := obj{
		"asyncapi": Version,
		"info": obj{
			"title": s.Title, "version": s.AppVersion,
			"description": "Kafka topics served as Server-Sent Events and WebSocket streams. Every event's id is the " +
				"client's position on every partition; a client that reconnects with it (Last-Event-ID, or " +
				"lastEventId) resumes exactly where it was, on any gateway.",
		},
		"defaultContentType": "application/json",
		"servers":            s.servers(),
		"channels":           channels,
		"operations":         operations,
		"components": obj{
			"schemas":         schemas,
			"messages":        messages,
			"securitySchemes": s.securitySchemes(),
		},
	}
	return doc
}

// servers are the event stream server and the WebSocket server, at the same address.
func (s Spec) servers() obj {
	httpProto, wsProto := "http", "ws"
	if s.TLS {
		httpProto, wsProto = "https", "wss"
	}
	return obj{
		"events": obj{
			"host": s.Host, "protocol": httpProto,
			"description": "Server-Sent Events: GET a channel's address with Accept: text/event-stream.",
		},
		"websocket": obj{
			"host": s.Host, "protocol": wsProto,
			"description": "The same streams on a WebSocket: JSON text messages.",
		},
	}
}

// securitySchemes are the ways a token reaches the gateway.
func (s Spec) securitySchemes() obj {
	out := obj{
		"bearer": obj{
			"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
			"description": "A JWT in the Authorization header; its scope claim may narrow the stream (keys, events, filter).",
		},
		"cookie": obj{
			"type": "httpApiKey", "in": "cookie", "name": s.Cookie,
			"description": "The same JWT in a cookie, which EventSource and WebSocket send by themselves.",
		},
	}
	if s.QueryToken {
		out["queryToken"] = obj{
			"type": "httpApiKey", "in": "query", "name": "access_token",
			"description": "The same JWT in the query (allowed by the gateway's auth-query-token setting).",
		}
	}
	return out
}

// security is what an operation on t accepts: nothing for a topic anyone reads; any token source otherwise
// (an optional topic reads without one too, which the description says).
func (s Spec) security(t Topic) []any {
	if t.Auth == "" || t.Auth == "none" {
		return []any{}
	}
	names := []string{"bearer", "cookie"}
	if s.QueryToken {
		names = append(names, "queryToken")
	}
	var out []any
	for _, n := range names {
		out = append(out, ref("components", "securitySchemes", n))
	}
	return out
}

// topicNames lists the spec's topics, for the several-topic channel's parameter.
func (s Spec) topicNames() []string {
	var out []string
	for _, t := range s.Topics {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}
