// ssegate.js: the browser client of an ssegate gateway, an ES module without a build step, served by every
// gateway at /ssegate.js (docs/gateway.md, "The browser client"). It wraps an EventSource and adds what a
// page needs beyond it:
//
//   - the position survives a reload: the last id is kept in sessionStorage and sent as last_event_id when
//     the page opens the stream again (an EventSource sends Last-Event-ID only on its own reconnects);
//   - values: data starting "base64:" is decoded to bytes, other data is the value as text;
//   - the gateway's own events as callbacks: resync (the stream skipped offsets, with why), token-expiring
//     (renew the token now) and token-expired (the stream ended; it is opened again with the renewed token).
//
//   import { connect } from "/ssegate.js";
//   const s = connect("https://events.example.com/streams/orders", {
//     onRecord: (r) => show(r.key, r.text ?? r.bytes, r.id),
//     onResync: (r) => console.warn("resync:", r.reason, r.partitions),
//     renewToken: () => fetch("/token", { method: "POST", credentials: "include" }), // a new cookie
//   });
//   ...; s.close();
//
// parseID, parseTopicsID and decodeValue need no browser: the load tool's k6 scripts import them too.

// parseID turns "v1:0-12.1-7" into {0: 12, 1: 7}, the last offset the client has in each partition; null for
// anything else. It accepts exactly what the gateway's decoder accepts (partitions ascending, no leading
// zeros, partitions up to 2^31-1), except offsets beyond 2^53-1, which a JavaScript number cannot hold.
// loadtest/k6/testdata/vectors.json holds the cases the gateway's decoder and this one both check.
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

// parseTopicsID turns the id of a stream of several topics, "v1:payments~0-3,orders~0-12.1-7", into
// {payments: {0: 3}, orders: {0: 12, 1: 7}}; null for anything else (docs/gateway.md, "Streams of several
// topics"). The first topic is the frame's own; the others follow in ascending order; each topic once, its part
// following parseID's rules.
const topicPattern = /^[A-Za-z0-9._-]{1,249}$/;

export function parseTopicsID(id) {
  if (typeof id !== "string" || id.length > 32 * 1024 || !id.startsWith("v1:") || !id.includes("~")) {
    return null;
  }
  const out = {};
  const names = [];
  for (const group of id.slice(3).split(",")) {
    const cut = group.indexOf("~");
    const name = group.slice(0, cut);
    const pos = cut < 0 ? null : parseID("v1:" + group.slice(cut + 1));
    const prev = names.length > 1 ? names[names.length - 1] : null;
    if (pos === null || !topicPattern.test(name) || name === "." || name === ".." || name in out || (prev !== null && name <= prev)) {
      return null;
    }
    out[name] = pos;
    names.push(name);
  }
  return out;
}

// topicOfID is the topic of a frame of a stream of several topics: the first in its id.
function topicOfID(id) {
  const cut = typeof id === "string" && (id.startsWith("v1:") || id.startsWith("v2:")) ? id.indexOf("~") : -1;
  return cut < 0 ? undefined : id.slice(3, cut);
}

// decodeValue is a record's value from its data, as docs/gateway.md ("Values") says: on a topic whose value
// format is auto or base64, data starting "base64:" is the value in base64 ({bytes}); any other data, and all
// data of a text topic (format "text"), is the value as text ({text}).
const marker = "base64:";

export function decodeValue(data, format = "auto") {
  if (format !== "text" && typeof data === "string" && data.startsWith(marker)) {
    try {
      const bin = atob(data.slice(marker.length));
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) {
        bytes[i] = bin.charCodeAt(i);
      }
      return { bytes };
    } catch {
      // Not base64 after all (the gateway never sends that): the data as it came.
    }
  }
  return { text: data };
}

// storedID and storeID keep the position of a stream across reloads of the page (sessionStorage: per tab).
function storedID(key) {
  try {
    return globalThis.sessionStorage?.getItem(key) ?? null;
  } catch {
    return null; // storage refused (a sandboxed frame): no position across reloads
  }
}

function storeID(key, id) {
  try {
    globalThis.sessionStorage?.setItem(key, id);
  } catch {
    // as above
  }
}

// The gateway's own event types; every other type (message, delete, a record's own type) is a record.
const ownEvents = new Set(["resync", "resumed", "token-expiring", "token-expired", "live"]);

// connect opens the stream at url (an absolute or page-relative URL of /streams/{topic}, or of a stream of
// several topics, /streams/orders,payments, with any query parameters: key=, event=, from=, ...) and returns
// {close(), get id(), get source()}. Options:
//
//   storageKey   the sessionStorage key of the position (default "ssegate:" + the URL without its query);
//                null keeps no position across reloads
//   format       the topic's value format, "auto" (default), "base64" or "text" (see decodeValue); for several
//                topics, an object of formats by topic (topics it does not name are "auto")
//   withCredentials  send cookies cross-origin (default true: a token in a cookie)
//   onRecord(r)  each record: {id, topic, type ("message", "delete" for a tombstone, whose data is the key, or the
//                record's own event type), text or bytes (decodeValue), data (as it came)}
//   eventTypes   the records' own event types to listen for besides "message" and "delete" (an EventSource
//                hands each type only to its listeners)
//   onResync(r)  a resync: {id, topic, reason, partitions: [{partition, skipped, ...}]} as the gateway sent it
//                (the position moved past offsets the client will never get; each topic's resync is its own)
//   onLive(r)    a from=snapshot stream's snapshot is complete: {id, topic}, the cut; records after it are
//                live (a resume of such a stream sends what changed while away, then live again; in a stream
//                of several topics, each topic read from=snapshot says live once)
//   onResumed(r) with explain=1 in the URL, where each resume came from: {id (the position resumed after),
//                source ("ring" or "kafka"), from, ...} as the gateway sent it
//   onOpen(), onError(e)  the EventSource's own; onError gets {closed: true} when it gave up (an HTTP error:
//                the stream is not opened again)
//   renewToken() called at token-expiring; may return a promise. When the gateway ends the stream at the
//                token's expiry (token-expired), the stream is opened again from its position, after the
//                renewal has finished (a cookie the renewal set is then sent)
//   onTokenExpiring(r), onTokenExpired(r)  the events themselves, for pages that want them
export function connect(url, opts = {}) {
  const base = new URL(url, globalThis.location?.href);
  const key = opts.storageKey === undefined ? "ssegate:" + base.origin + base.pathname : opts.storageKey;
  // A stream of one topic names it in its path; one of several names each record's topic in its id.
  const path = base.pathname.split("/").pop();
  const single = base.pathname.includes("/streams/") && !path.includes(",") && !base.searchParams.has("topic");
  const topicOf = (next) => (single ? decodeURIComponent(path) : topicOfID(next));
  const formatOf = (topic) => (typeof opts.format === "object" ? (opts.format?.[topic] ?? "auto") : (opts.format ?? "auto"));
  let id = key === null ? null : storedID(key);
  let es = null;
  let closed = false;
  let renewal = Promise.resolve();

  const moved = (next) => {
    if (next) {
      id = next;
      if (key !== null) {
        storeID(key, next);
      }
    }
  };
  const gatewayEvent = (type, e) => {
    let r;
    try {
      r = JSON.parse(e.data);
    } catch {
      r = { data: e.data };
    }
    if (type === "resync" || type === "live") {
      r.topic ??= topicOf(e.lastEventId);
    }
    moved(e.lastEventId);
    r.id = e.lastEventId;
    if (type === "resumed") {
      opts.onResumed?.(r);
    } else if (type === "resync") {
      opts.onResync?.(r);
    } else if (type === "live") {
      opts.onLive?.(r);
    } else if (type === "token-expiring") {
      opts.onTokenExpiring?.(r);
      if (opts.renewToken) {
        renewal = Promise.resolve().then(() => opts.renewToken()).catch((err) => opts.onError?.({ renewal: err }));
      }
    } else if (type === "token-expired") {
      opts.onTokenExpired?.(r);
      // The gateway ends the stream; an EventSource would reconnect at once, maybe before the renewal is done.
      es.close();
      renewal.then(() => {
        if (!closed) {
          open();
        }
      });
    }
  };
  const record = (e) => {
    const topic = topicOf(e.lastEventId);
    moved(e.lastEventId);
    // A tombstone ("delete") carries the record's key as its data; other records their value.
    opts.onRecord?.({ id: e.lastEventId, topic, type: e.type, data: e.data, ...decodeValue(e.data, formatOf(topic)) });
  };

  const open = () => {
    const u = new URL(base);
    if (id !== null) {
      u.searchParams.set("last_event_id", id);
    }
    es = new EventSource(u, { withCredentials: opts.withCredentials ?? true });
    es.onopen = () => opts.onOpen?.();
    es.onerror = () => opts.onError?.({ closed: es.readyState === EventSource.CLOSED });
    es.onmessage = record;
    for (const type of ownEvents) {
      es.addEventListener(type, (e) => gatewayEvent(type, e));
    }
    for (const type of ["delete", ...(opts.eventTypes ?? [])]) {
      es.addEventListener(type, record);
    }
  };
  open();
  return {
    close() {
      closed = true;
      es.close();
    },
    get id() {
      return id;
    },
    get source() {
      return es;
    },
  };
}
