// Package asyncapi writes an AsyncAPI 3.0 document of what a gateway serves: each topic as an event stream
// channel (/streams/{topic}) and a WebSocket channel (/ws/{topic}), with their query parameters, the messages
// a client receives (the topic's records, with the payload schema its schema format gives, and the gateway's
// own events: resync, live, resumed, token-expiring, token-expired), the id forms, and the security schemes
// of the topics that need a token.
//
// The package only assembles the document from a Spec; the gateway's app package fills the Spec (which
// topics the request may read, their schemas from the registry). A Spec's Document is a pure function of it,
// safe for concurrent use.
package asyncapi
