// Shared helpers of the k6 scripts: position ids and the load tool's value format.

// parseID turns "v1:0-12.1-7" into {0: 12, 1: 7}; null for anything else. It accepts exactly what the
// gateway's decoder accepts (partitions ascending, no leading zeros, partitions up to 2^31-1), except offsets
// beyond 2^53-1, which a JavaScript number cannot hold. testdata/vectors.json holds the cases both check.
const idPattern = /^v1:(?:(?:0|[1-9][0-9]*)-(?:0|[1-9][0-9]*)(?:\.(?:0|[1-9][0-9]*)-(?:0|[1-9][0-9]*))*)?$/;

export function parseID(id) {
  if (typeof id !== "string" || id.length > 32 * 1024 || !idPattern.test(id)) {
    return null;
  }
  const out = {};
  const body = id.slice(3);
  if (body === "") {
    return out;
  }
  let prev = -1;
  for (const entry of body.split(".")) {
    const [p, o] = entry.split("-").map(Number);
    if (p <= prev || p > 2147483647 || !Number.isSafeInteger(o)) {
      return null;
    }
    prev = p;
    out[p] = o;
  }
  return out;
}

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
