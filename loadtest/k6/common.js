// Shared helpers of the k6 scripts: position ids and the load tool's value format.

// parseID turns "v1:0-12.1-7" into {0: 12, 1: 7}; null for anything else. It is the browser client's own
// (the gateway serves it as /ssegate.js), so the id logic exists once in JavaScript; testdata/vectors.json
// holds the cases it and the gateway's decoder both check.
import { parseID } from "../../pkg/clientjs/ssegate.js";

export { parseID };

// Positions follows one client's stream and counts lost and duplicated records from the ids alone, as the
// Go tool does: each frame must move the vector by exactly one offset in one partition. Offsets of a topic
// written by transactional producers have gaps (commit markers), which this counts as lost.
//
// A compact id ("v2:...", from a gateway with id-format v2) names a checkpoint in Kafka, which a k6 script
// cannot read: its frame counts as delivered and unchecked, and the next whole (v1) id becomes the known
// position again without its jump counting as lost. Check v2 gateways exactly with the Go load tool.
export class Positions {
  constructor() {
    this.high = {};
    this.lost = 0;
    this.dup = 0;
    this.delivered = 0;
    this.unchecked = 0;
    this.seen = false;
    this.blind = false;
  }

  // advance raises the known position to id and returns by how many offsets it moved: -1 for an id it cannot
  // read, -2 for a compact one.
  advance(id) {
    if (typeof id === "string" && id.startsWith("v2:")) {
      this.blind = true;
      return -2;
    }
    if (this.blind && parseID(id) !== null) {
      this.blind = false;
      this.high = {};
      this.advance(id);
      return -2;
    }
    const v = parseID(id);
    if (v === null) {
      return -1;
    }
    let adv = 0;
    for (const [p, off] of Object.entries(v)) {
      const h = p in this.high ? this.high[p] : -1;
      if (off > h) {
        adv += off - h;
        this.high[p] = off;
      }
    }
    return adv;
  }

  // event accounts for one event. An event without data is an id-only block (the opening position of a
  // stream, if the extension reports it): moving past what the client had there skips records. The first
  // event a client sees sets its starting position.
  event(ev) {
    if (!this.seen) {
      this.seen = true;
      this.advance(ev.id);
      if (ev.data) {
        this.delivered++;
      }
      return;
    }
    if (!ev.data) {
      this.lost += Math.max(this.advance(ev.id), 0);
      return;
    }
    this.frame(ev.id);
  }

  // frame accounts for one frame that carries a record.
  frame(id) {
    const adv = this.advance(id);
    if (adv === -2) {
      this.delivered++;
      this.unchecked++;
    } else if (adv === 0) {
      this.dup++;
    } else if (adv > 0) {
      this.delivered++;
      this.lost += adv - 1;
    }
  }
}

// sendTime returns the send time in milliseconds of a value written by the Go tool ({"ts":<unix nanos>,...}),
// or null.
export function sendTime(data) {
  if (typeof data !== "string" || !data.startsWith('{"ts":')) {
    return null;
  }
  const ns = parseInt(data.slice(6), 10);
  return Number.isFinite(ns) ? ns / 1e6 : null;
}

// streamURL is the stream of TOPIC on one of the comma-separated BASE_URLS, chosen by n.
export function streamURL(n) {
  const bases = (__ENV.BASE_URLS || "http://127.0.0.1:8080").split(",");
  const topic = __ENV.TOPIC || "loadtest";
  return `${bases[n % bases.length].replace(/\/$/, "")}/streams/${topic}`;
}

// wsURL is the WebSocket stream (GET /ws/TOPIC) on one of the comma-separated BASE_URLS, chosen by n, as
// ws:// or wss://; ackEvery > 0 asks for acknowledgements (ack=1, max_in_flight).
export function wsURL(n, ackEvery = 0, maxInFlight = 100) {
  const u = streamURL(n).replace(/^http/, "ws").replace(/\/streams\/([^/]*)$/, "/ws/$1");
  return ackEvery > 0 ? `${u}?ack=1&max_in_flight=${maxInFlight}` : u;
}

// WSStream follows one client's WebSocket streams of the gateway (docs/gateway.md, "WebSocket"): every
// message is JSON, the first of a connection "open" with its position, then records and the gateway's events
// with the same ids an event stream gives the same records. Each is accounted for in pos (Positions) as the
// SSE scripts account for the event the event stream carries: the ids must advance by one offset in one
// partition per record. With ackEvery > 0 every ackEvery-th message with data is acknowledged (cumulatively).
export class WSStream {
  constructor(ackEvery = 0) {
    this.pos = new Positions();
    this.ackEvery = ackEvery;
    this.opened = false;
    this.unacked = 0;
    this.messages = 0;
  }

  // connect starts a new connection: its first message must be "open" again.
  connect() {
    this.opened = false;
    this.unacked = 0;
  }

  // message takes one message's text and returns what to do: ack, the acknowledgement to send (or null);
  // error, why the stream is wrong (or null); sent, the send time in ms of a value the Go tool wrote (or null).
  message(text) {
    const out = { ack: null, error: null, sent: null };
    let m;
    try {
      m = JSON.parse(text);
    } catch (e) {
      out.error = `message is not JSON: ${e}`;
      return out;
    }
    if (m === null || typeof m !== "object" || typeof m.event !== "string") {
      out.error = `message without "event": ${text.slice(0, 200)}`;
      return out;
    }
    this.messages++;
    if (!this.opened) {
      if (m.event !== "open") {
        out.error = `first message is "${m.event}", want "open"`;
        return out;
      }
      this.opened = true;
    }
    if (m.event === "open" || m.event === "position") {
      // The position without a record: as an event stream's id-only block.
      this.pos.event({ id: m.id, data: "" });
      return out;
    }
    // A record or one of the gateway's events: data as the event stream sends it (a JSON value as JSON, a
    // string as itself).
    const data = typeof m.data === "string" ? m.data : JSON.stringify(m.data === undefined ? "" : m.data);
    if (m.event === "resync") {
      out.error = `resync ${data}`;
    }
    this.pos.frame(m.id);
    out.sent = sendTime(data);
    if (this.ackEvery > 0 && ++this.unacked >= this.ackEvery) {
      out.ack = JSON.stringify({ ack: m.id });
      this.unacked = 0;
    }
    return out;
  }
}
