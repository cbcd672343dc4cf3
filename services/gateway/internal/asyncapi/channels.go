package asyncapi

import "strings"

// sseChannel is a topic's event stream.
func sseChannel(t Topic, k string) obj {
	return obj{
		"address":     "/streams/" + t.Name,
		"title":       t.Name,
		"description": "The topic " + t.Name + " as an event stream. " + authNote(t),
		"servers":     []any{ref("servers", "events")},
		"messages": obj{
			"record":         ref("components", "messages", "record."+k),
			"delete":         ref("components", "messages", "delete"),
			"resync":         ref("components", "messages", "resync"),
			"live":           ref("components", "messages", "live"),
			"opened":         ref("components", "messages", "opened"),
			"resumed":        ref("components", "messages", "resumed"),
			"token-expiring": ref("components", "messages", "token-expiring"),
			"token-expired":  ref("components", "messages", "token-expired"),
		},
	}
}

// wsChannel is a topic's WebSocket.
func wsChannel(t Topic, k string) obj {
	return obj{
		"address":     "/ws/" + t.Name,
		"title":       t.Name + " (WebSocket)",
		"description": "The topic " + t.Name + " on a WebSocket: every message is a JSON text message. " + authNote(t),
		"servers":     []any{ref("servers", "websocket")},
		"messages": obj{
			"record":  ref("components", "messages", "record.ws."+k),
			"control": ref("components", "messages", "ws.control"),
		},
		"bindings": obj{"ws": obj{"method": "GET", "query": ref("components", "schemas", "ssegate.WebSocketQuery")}},
	}
}

// authNote says who may read a topic.
func authNote(t Topic) string {
	switch t.Auth {
	case "required":
		return "Needs a token whose scope allows the topic."
	case "optional":
		return "Anyone may read it; a token's scope may narrow what its holder reads."
	}
	return "Anyone may read it."
}

// recordMessage is a record of t on an event stream: its value as the frame's data.
func recordMessage(t Topic) obj {
	m := obj{
		"name":    "record",
		"title":   "A record of " + t.Name,
		"headers": ref("components", "schemas", "ssegate.EventFields"),
	}
	payload, contentType, note := valuePayload(t)
	m["payload"], m["contentType"] = payload, contentType
	m["description"] = "One record: the frame's id is the position after it, its event the record's `event` " +
		"(or `ce_type`) header, `message` without one; a type of the gateway's own (`resync`, `live`, " +
		"`token-expired`, ...) arrives as `record.<type>`. " + note
	return m
}

// wsRecordMessage is a record of t on a WebSocket (format=json).
func wsRecordMessage(t Topic) obj {
	value, _, note := valuePayload(t)
	return obj{
		"name":        "record",
		"title":       "A record of " + t.Name,
		"contentType": "application/json",
		"description": "One record (format=json; format=cloudevents sends a structured CloudEvent instead). " + note,
		"payload": obj{
			"type":     "object",
			"required": []string{"event", "id"},
			"properties": obj{
				"event":     obj{"type": "string", "description": "The record's event type; delete for a tombstone; record.<type> for a type of the gateway's own."},
				"id":        ref("components", "schemas", "ssegate.PositionID"),
				"data":      value,
				"key":       obj{"type": "string"},
				"partition": obj{"type": "integer", "minimum": 0},
				"offset":    obj{"type": "integer", "minimum": 0},
				"undecodable": obj{
					"type":        "string",
					"description": "Why a value of a schema format could not be decoded; data is then the value as auto writes it.",
				},
			},
		},
	}
}

// valuePayload is the schema of a record's data, its content type, and a note on how it is written.
func valuePayload(t Topic) (obj, string, string) {
	switch {
	case t.Schema != nil:
		return t.Schema.Root, "application/json", "The value is decoded from the registry's " + t.Schema.Kind.String() +
			" wire format to JSON (subject " + t.Schema.Subject + ", the version current when this document was made). " +
			"A value that cannot be decoded carries an `undecodable` field with the reason and is sent as auto writes it."
	case t.ValueFormat == "avro" || t.ValueFormat == "protobuf" || t.ValueFormat == "json-schema":
		return obj{}, "application/json", "The value is decoded from the registry's " + t.ValueFormat +
			" wire format to JSON; its schema is not described here: " + t.SchemaNote + "."
	case t.ValueFormat == "base64":
		return obj{"type": "string", "contentEncoding": "base64"}, "text/plain", "The value in base64."
	case t.ValueFormat == "text":
		return obj{"type": "string"}, "text/plain", "The value as text (lossy for CR and bytes that are not UTF-8)."
	}
	return obj{"type": "string"}, "text/plain", "The value as it is when it is text (UTF-8 without CR or NUL), " +
		"else `base64:` and the value in base64. A JSON value is sent as its text."
}

// commonMessages are the gateway's own events and the tombstone, the same for every topic.
func commonMessages() obj {
	control := func(name, summary, payload string) obj {
		return obj{
			"name": name, "title": name, "summary": summary, "contentType": "application/json",
			"headers": ref("components", "schemas", "ssegate.EventFields"),
			"payload": ref("components", "schemas", payload),
		}
	}
	return obj{
		"delete": obj{
			"name": "delete", "title": "delete", "contentType": "text/plain",
			"summary": "A tombstone (a record with no value): the data is its key.",
			"headers": ref("components", "schemas", "ssegate.EventFields"),
			"payload": obj{"type": "string"},
		},
		"resync":         control("resync", "The stream cannot deliver everything after the position: why, and where each partition resumes.", "ssegate.Resync"),
		"live":           control("live", "A from=snapshot stream has sent the latest record of every key; every record follows.", "ssegate.Live"),
		"opened":         control("opened", "With opened=1: the opening block's id again, as an event a page is handed (an EventSource keeps an id-only block's id to itself).", "ssegate.Live"),
		"resumed":        control("resumed", "With explain=1: where a resumed stream's missed records come from.", "ssegate.Resumed"),
		"token-expiring": control("token-expiring", "The stream's token expires soon (auth-expiry-notice before): renew it.", "ssegate.TokenExpiring"),
		"token-expired":  control("token-expired", "The stream's token expired: the stream ends after this event; reconnect with a new token.", "ssegate.TokenExpired"),
		"ws.control": obj{
			"name": "control", "title": "The gateway's own WebSocket messages", "contentType": "application/json",
			"summary": "open (first, with the start position), position, resync, live, resumed, token-expiring, token-expired, drain (before a close 1001).",
			"payload": obj{
				"type": "object", "required": []string{"event", "id"},
				"properties": obj{
					"event": obj{"type": "string", "enum": []string{"open", "position", "resync", "live", "resumed", "token-expiring", "token-expired", "drain"}},
					"id":    ref("components", "schemas", "ssegate.PositionID"),
					"retry": obj{"type": "integer", "description": "In open: the reconnection delay in milliseconds."},
					"data":  obj{"description": "As the event stream's event of the same name."},
				},
			},
		},
	}
}

// queryParams are the query parameters of an event stream, as properties of a schema.
func queryParams() obj {
	str := func(desc string) obj { return obj{"type": "string", "description": desc} }
	strs := func(desc string) obj {
		return obj{"type": "array", "items": obj{"type": "string"}, "description": desc}
	}
	return obj{
		"from":          str("Where a new stream starts: latest (default), earliest, snapshot, or an RFC 3339 time."),
		"key":           strs("Only records with these keys (repeatable)."),
		"event":         strs("Only events of these types (repeatable)."),
		"filter":        str("A CEL expression over the value (JSON) as value; only records it matches."),
		"fields":        str("Of each JSON value only these fields (a,b.c)."),
		"conflate":      str("Within each interval (10ms to 1m) only the latest record of each key."),
		"heartbeat":     str("Milliseconds without an event before a keep-alive: 0 (none) or 100 to 3600000."),
		"explain":       str("1: a resumed stream says where what it missed comes from (event resumed)."),
		"opened":        str("1: the opening block is followed by an opened event of the same id."),
		"lastEventId":   str("Resume after this position id (the Last-Event-ID header wins)."),
		"last_event_id": str("The same as lastEventId."),
	}
}

// commonSchemas are the schemas the messages and bindings share.
func commonSchemas() obj {
	wsQuery := queryParams()
	for name, desc := range map[string]string{
		"format":          "json (default) or cloudevents (structured CloudEvents 1.0).",
		"hello":           "1: the client sends {\"last_event_id\": ...} as its first message instead of in the URL.",
		"ack":             "1: the client acknowledges messages ({\"ack\": \"<id>\"}).",
		"max_in_flight":   "With ack=1: at most this many unacknowledged messages (1 to 10000, default 100).",
		"publish":         "1: messages the client sends are published into the topic (where publishing is open).",
		"publish_results": "1: each published message is answered (published or publish-error).",
	} {
		wsQuery[name] = obj{"type": "string", "description": desc}
	}
	partition := obj{
		"type": "object",
		"properties": obj{
			"partition": obj{"type": "integer"}, "requested": obj{"type": "integer"},
			"low_watermark": obj{"type": "integer"}, "resumes_at": obj{"type": "integer"}, "skipped": obj{"type": "integer"},
		},
	}
	return obj{
		"ssegate.PositionID": obj{
			"type": "string",
			"description": "The client's position on every partition after this event: v1:<partition>-<offset>.... " +
				"(offsets ascending by partition), v2: a compact id resolved through the gateway's position topic, " +
				"and for a stream of several topics each topic's part after its name and ~. Opaque to clients: " +
				"send it back as Last-Event-ID.",
			"examples": []string{"v1:0-5812.1-5790.2-5833"},
		},
		"ssegate.EventFields": obj{
			"type": "object",
			"properties": obj{
				"id":    ref("components", "schemas", "ssegate.PositionID"),
				"event": obj{"type": "string", "description": "The event type (message when absent)."},
				"topic": obj{"type": "string", "description": "In a stream of several topics: the topic of the record."},
			},
		},
		"ssegate.StreamQuery":    obj{"type": "object", "properties": queryParams()},
		"ssegate.WebSocketQuery": obj{"type": "object", "properties": wsQuery},
		"ssegate.Resync": obj{
			"type": "object", "required": []string{"reason", "partitions"},
			"properties": obj{
				"reason":     obj{"type": "string", "enum": []string{"retention", "ahead", "invalid-id"}},
				"topic":      obj{"type": "string"},
				"error":      obj{"type": "string"},
				"partitions": obj{"type": "array", "items": partition},
			},
		},
		"ssegate.Live":    obj{"type": "object", "required": []string{"id"}, "properties": obj{"id": obj{"type": "string"}, "topic": obj{"type": "string"}}},
		"ssegate.Resumed": obj{"type": "object", "properties": obj{"source": obj{"type": "string", "enum": []string{"ring", "kafka"}}, "from": obj{"type": "string"}}},
		"ssegate.TokenExpiring": obj{"type": "object", "properties": obj{
			"expires_at": obj{"type": "string", "format": "date-time"}, "expires_in_ms": obj{"type": "integer"},
		}},
		"ssegate.TokenExpired": obj{"type": "object", "properties": obj{"expired_at": obj{"type": "string", "format": "date-time"}}},
	}
}

// severalChannel is the stream of several topics, /streams/{topics}.
func severalChannel(topics []string) obj {
	return obj{
		"address": "/streams/{topics}",
		"title":   "Several topics in one stream",
		"description": "Several topics in one stream and one id, each frame naming its topic in a topic field. " +
			"Parameters for one topic are written name.{topic}= (key.orders=...).",
		"servers": []any{ref("servers", "events")},
		"parameters": obj{"topics": obj{
			"description": "Comma-separated topics, each one of: " + strings.Join(topics, ", ") + ".",
			"examples":    []string{strings.Join(topics, ",")},
		}},
	}
}
