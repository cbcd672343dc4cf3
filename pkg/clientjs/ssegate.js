// ssegate.js: the JavaScript client of an ssegate gateway, an ES module without a build step, published to npm
// as "ssegate" (package.json, ssegate.d.ts, README.md) and served by every gateway at /ssegate.js
// (docs/gateway.md, "The browser client"). It wraps an EventSource, or a WebSocket of /ws/{topics}, and adds
// what a page needs beyond it:
//
//   - the position survives a reload: the last id is kept in sessionStorage and sent as last_event_id when
//     the page opens the stream again (an EventSource sends Last-Event-ID only on its own reconnects), the
//     opening id too (the stream is opened with opened=1, which repeats it as an "opened" event);
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
// parseID, parseTopicsID and decodeValue need no browser: the load tool's k6 scripts import them too. In Node,
// connect takes the EventSource and WebSocket classes as options (the "eventsource" and "ws" packages), and
// keeps no position across runs unless given a storage (README.md).

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
    // Own properties only: a topic may be named "constructor" or "__proto__" (the object's inherited names).
    if (pos === null || !topicPattern.test(name) || name === "." || name === ".." || Object.hasOwn(out, name) || (prev !== null && name <= prev)) {
      return null;
    }
    Object.defineProperty(out, name, { value: pos, enumerable: true, writable: true, configurable: true });
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

// storedID and storeID keep the position of a stream across reloads of the page (sessionStorage: per tab, or
// the storage option; null keeps none).
const storageOf = (opts) => (opts.storage === undefined ? globalThis.sessionStorage : opts.storage);

function storedID(opts, key) {
  try {
    return storageOf(opts)?.getItem(key) ?? null;
  } catch {
    return null; // storage refused (a sandboxed frame): no position across reloads
  }
}

function storeID(opts, key, id) {
  try {
    storageOf(opts)?.setItem(key, id);
  } catch {
    // as above
  }
}

// defaultStorageKey is the storage key of a stream's position: its URL without the position the page may have
// put in it (the query's other parameters choose the stream: key=, event=, filter=, from=...).
export function defaultStorageKey(url) {
  const u = new URL(url);
  u.searchParams.delete("last_event_id");
  u.searchParams.delete("lastEventId");
  u.hash = "";
  return "ssegate:" + u.origin + u.pathname + u.search;
}

// The gateway's own event types; every other type (message, delete, a record's own type) is a record.
const ownEvents = new Set(["resync", "resumed", "token-expiring", "token-expired", "live", "opened"]);

// connect opens the stream at url (an absolute or page-relative URL of /streams/{topic}, or of a stream of
// several topics, /streams/orders,payments, or of /ws/{topics} with the WebSocket transport, with any query
// parameters: key=, event=, from=, ...) and returns
// {close(), get id(), get source()}. Options:
//
//   storageKey   the storage key of the position (default "ssegate:" + the URL, with its query but without
//                last_event_id or lastEventId: two streams of one path with other parameters, key= or filter=,
//                keep their own positions); null keeps no position across reloads
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
//   storage      where the position is kept: an object with getItem and setItem (default sessionStorage, when
//                there is one: none in Node); null keeps none
//   EventSource  the EventSource class (default globalThis.EventSource; in Node the "eventsource" package's)
//   transport    "eventsource" (default) or "websocket" (default for a ws: or wss: URL): the stream of
//                /ws/{topics} (an http: or https: URL is turned into ws: or wss:) with the same callbacks;
//                records also have key, partition and offset; see openSocket
//   WebSocket    the WebSocket class (default globalThis.WebSocket; in Node 20 the "ws" package's)
//   onPosition(id)  WebSocket only: the position moved without a record (the open message, a position one)
export function connect(url, opts = {}) {
  if (![undefined, "eventsource", "websocket"].includes(opts.transport)) {
    throw new TypeError(`ssegate: transport ${JSON.stringify(opts.transport)}: want "eventsource" or "websocket"`);
  }
  const base = new URL(url, globalThis.location?.href);
  const key = opts.storageKey === undefined ? defaultStorageKey(base) : opts.storageKey;
  // A stream of one topic names it in its path; one of several names each record's topic in its id.
  const path = base.pathname.split("/").pop();
  const single = /\/(streams|ws)\//.test(base.pathname) && !path.includes(",") && !base.searchParams.has("topic");
  const socket = opts.transport === "websocket" || (opts.transport === undefined && /^wss?:$/.test(base.protocol));
  const topicOf = (next) => (single ? decodeURIComponent(path) : topicOfID(next));
  const formatOf = (topic) => (typeof opts.format === "object" ? (opts.format?.[topic] ?? "auto") : (opts.format ?? "auto"));
  let id = key === null ? null : storedID(opts, key);
  let es = null;
  let closed = false;
  let renewal = Promise.resolve();
  // gen counts the sources opened and closed on purpose: a WebSocket's close or timer of an older one is
  // ignored. retry is the wait before a WebSocket reconnects (the open message says it).
  let gen = 0;
  let timer = null;
  let retry = 3000;
  const stop = () => {
    gen++;
    clearTimeout(timer);
    es.close();
  };

  const moved = (next) => {
    if (next) {
      id = next;
      if (key !== null) {
        storeID(opts, key, next);
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
      stop();
      renewal.then(() => {
        if (!closed) {
          open();
        }
      });
    }
  };
  // record hands a record to the page; extra is a WebSocket message's key, partition, offset and topic.
  const record = (e, extra) => {
    const topic = extra?.topic ?? topicOf(e.lastEventId);
    moved(e.lastEventId);
    // A tombstone ("delete") carries the record's key as its data; other records their value.
    opts.onRecord?.({ id: e.lastEventId, topic, type: e.type, data: e.data, ...decodeValue(e.data, formatOf(topic)), ...extra });
  };

  const open = () => {
    const u = new URL(base);
    if (id !== null) {
      u.searchParams.set("last_event_id", id);
    }
    if (socket) {
      const mine = ++gen;
      es = openSocket(u, {
        opts, record, gatewayEvent, moved,
        live: () => !closed && mine === gen,
        retry: (ms) => (ms === undefined ? retry : (retry = ms)),
        later: (wait) => {
          timer = setTimeout(() => !closed && mine === gen && open(), wait);
        },
      });
      return;
    }
    // The stream's opening id comes in an id-only block, which an EventSource never hands the page: opened=1
    // has the gateway repeat it as an "opened" event, so a reload before the first record resumes from it.
    u.searchParams.set("opened", "1");
    const ES = opts.EventSource ?? globalThis.EventSource;
    es = new ES(u, { withCredentials: opts.withCredentials ?? true });
    es.onopen = () => opts.onOpen?.();
    es.onerror = () => opts.onError?.({ closed: es.readyState === (ES.CLOSED ?? 2) });
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
      stop();
    },
    get id() {
      return id;
    },
    get source() {
      return es;
    },
  };
}

// --- The WebSocket transport: /ws/{topics} (docs/gateway.md, "WebSocket"). Every message is JSON: "open"
// first, with the position the stream starts from and the retry an EventSource gets; then records, with their
// key, partition and offset (and topic, on a stream of several topics); and the gateway's own events. A
// WebSocket does not reconnect by itself: openSocket does, after the retry, with last_event_id the last id it
// got (a record's, or the open message's when none came), as an EventSource would.

// rawData is the text of a message's data as the message has it, so that a JSON value keeps its digits
// (JSON.parse rounds a 64-bit integer) and the order of its fields. The gateway's encoder writes <, > and & in
// strings as \u003c, \u003e and \u0026; they are turned back. null when the message has no data.
const blank = (s, i) => {
  while (i < s.length && " \t\r\n".includes(s[i])) i++;
  return i;
};
// jsonEnd is the index after the JSON value that starts at s[i], in valid JSON s.
const jsonEnd = (s, i) => {
  let depth = 0;
  do {
    const c = s[i++];
    if (c === '"') {
      while (i < s.length && s[i] !== '"') i += s[i] === "\\" ? 2 : 1;
      i++;
    } else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth--;
    else if (depth === 0) while (i < s.length && !",}] \t\r\n".includes(s[i])) i++; // a number, true, false, null
  } while (depth > 0 && i < s.length);
  return i;
};
const rawData = (s) => {
  let i = blank(s, s.indexOf("{") + 1);
  while (s[i] === '"') {
    const k = jsonEnd(s, i);
    const key = JSON.parse(s.slice(i, k));
    const v = blank(s, blank(s, k) + 1); // past the colon
    const end = jsonEnd(s, v);
    if (key === "data") {
      return s.slice(v, end).replace(/\\\\|\\u00(3c|3e|26)/g, (m, h) => (h ? String.fromCharCode(parseInt(h, 16)) : m));
    }
    i = blank(s, end);
    if (s[i] === ",") i = blank(s, i + 1);
  }
  return null;
};
// dataOf is a message's data as an event stream has it: a string as it is, any other JSON value as its JSON
// text as the message has it.
const dataOf = (m, text) => (typeof m.data === "string" ? m.data : m.data === undefined ? "" : (rawData(text) ?? JSON.stringify(m.data)));

// socketURL is u with the scheme of a WebSocket (http: and https: become ws: and wss:); httpURL the reverse.
const swapScheme = (u, from, to) => {
  const out = new URL(u);
  const i = from.indexOf(out.protocol);
  if (i >= 0) out.protocol = to[i];
  return out;
};
const socketURL = (u) => swapScheme(u, ["http:", "https:"], ["ws:", "wss:"]);
const httpURL = (u) => swapScheme(u, ["ws:", "wss:"], ["http:", "https:"]);

// openSocket opens one WebSocket of a stream. c gives connect's state: opts, record(e, extra),
// gatewayEvent(type, e), moved(id), live() (false once the socket is not the stream's), retry(ms?) (gets or
// sets the reconnection wait) and later(wait) (opens the stream again after wait ms).
function openSocket(u, c) {
  const WS = c.opts.WebSocket ?? globalThis.WebSocket;
  const sock = new WS(String(socketURL(u)));
  let opened = false;
  sock.onmessage = (msg) => {
    if (c.live()) {
      opened = socketMessage(c, typeof msg.data === "string" ? msg.data : String(msg.data)) || opened;
    }
  };
  sock.onclose = (ev) => {
    if (c.live()) {
      socketClosed(u, c, ev, opened);
    }
  };
  return sock;
}

// The messages of the WebSocket protocol that are no record.
const ownSocketEvents = new Set(["open", "position", "drain", ...ownEvents]);

// socketMessage hands one message to the page; it reports whether it was the open message.
function socketMessage(c, text) {
  let m;
  try {
    m = JSON.parse(text);
  } catch {
    return false; // not the gateway's
  }
  const id = typeof m.id === "string" ? m.id : "";
  if (typeof m.partition === "number" || !ownSocketEvents.has(m.event)) {
    // A record, whatever its type (a message of an unknown event without data is nothing).
    if (typeof m.partition === "number" || m.data !== undefined) {
      const extra = { key: m.key, partition: m.partition, offset: m.offset };
      if (typeof m.topic === "string") extra.topic = m.topic;
      c.record({ lastEventId: id, type: m.event ?? "message", data: dataOf(m, text) }, extra);
    }
    return false;
  }
  if (m.event === "open" || m.event === "position") {
    c.moved(id);
    if (m.event === "open" && typeof m.retry === "number") c.retry(m.retry);
    if (id) c.opts.onPosition?.(id);
    if (m.event === "open") c.opts.onOpen?.();
    return m.event === "open";
  }
  if (m.event !== "drain") {
    // resync, resumed, live, token-expiring, token-expired: as on an event stream. A drain's close follows.
    c.gatewayEvent(m.event, { lastEventId: id, data: m.data === undefined ? "" : dataOf(m, text) });
  }
  return false;
}

// socketClosed decides what a closed socket means. 1008 (a policy violation) and 1009 (a message too big)
// would come again: the stream stops, as an EventSource does on an error answer. Anything else (1001 going
// away, 1011, 4001 token expired, 4002 too slow, a dropped connection) reconnects from the last id after the
// retry. A socket refused before the upgrade cannot tell why; the same request over plain HTTP can: a gateway
// that would take the stream answers 426 (Upgrade Required), a refusal its status and error; limits (429,
// 503) come again after their Retry-After.
async function socketClosed(u, c, ev, opened) {
  const why = { closed: false, code: ev.code, reason: ev.reason ?? "" };
  if (ev.code === 1008 || ev.code === 1009) {
    c.opts.onError?.({ ...why, closed: true });
    return;
  }
  let wait = c.retry();
  if (!opened && typeof globalThis.fetch === "function") {
    let r = null;
    try {
      r = await fetch(httpURL(u), { credentials: "include" });
      why.status = r.status;
      why.error = (await r.json().catch(() => ({}))).error || r.statusText;
    } catch {
      r = null; // no answer: no gateway there, for now
    }
    if (!c.live()) {
      return;
    }
    if (r !== null && r.status !== 426 && r.status !== 429 && r.status !== 503) {
      c.opts.onError?.({ ...why, closed: true });
      return;
    }
    if (r !== null && r.status !== 426) {
      wait = Math.max(wait, 1000 * (Number(r.headers.get("Retry-After")) || 1));
    }
  }
  c.opts.onError?.(why);
  c.later(wait);
}
