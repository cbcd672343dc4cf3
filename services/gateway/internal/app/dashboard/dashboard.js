// dashboard.js: the script of the gateway's dashboard (GET /, docs/gateway.md "/ (dashboard)"). The id, value
// and EventSource logic is the client module's (ssegate.js, "The browser client"); this file is what the page
// shows of it. The WebSocket transport has its own loop (ws.js): a WebSocket is not an EventSource.
import { connect as follow, parseID, parseTopicsID } from "./ssegate.js";
import { followWS } from "./ws.js";

const el = (id) => document.getElementById(id);
// formats: the value format of every topic the gateway serves (the page's template writes them).
const formats = JSON.parse(document.body.dataset.formats);
const demoTopic = document.body.dataset.topic;
// window.ssegate is what the page saw, for people poking at the console and for browser tests: opens of the
// stream, record events, resumes (from explain=1's "resumed" events), resyncs, gaps and duplicates found in the
// ids, the connection state, the transport ("sse" or "ws"). perPartition counts the events whose partition the
// ids tell (the one partition a record's id moved), keyed "topic/partition"; unattributed the others: a
// stream's first event, and, with a filter or a snapshot, an event whose id also moved partitions passed over.
// The two add up to the events. plots holds a sample a second, the last 2 minutes, of events/s and latency.
// snapshot counts a from=snapshot stream's snapshot records and live its live events (the cut's id, at how
// many events). resumedFrom is the position a reloaded page went on from (the module keeps it across reloads).
// streamCounts are what one stream from the form counts; reset (below) starts them afresh for the next.
const streamCounts = () => ({
  opens: 0, events: [], lastEventId: "", resumes: [], resyncs: [], gaps: 0, dups: 0, unchecked: 0,
  perPartition: {}, unattributed: 0, plots: { rate: [], latency: [] }, snapshot: 0, live: [], resumedFrom: null,
});
const seen = window.ssegate = { ...streamCounts(), drops: 0, state: "connecting", transport: "sse" };

// --- The stream, from the form (which the page's own query fills: /?topics=a,b&key=user-42&from=earliest).
const own = new URLSearchParams(location.search);
const list = (v) => v.split(",").map((s) => s.trim()).filter((s) => s !== "");
el("f-topics").value = own.get("topics") || demoTopic;
el("f-key").value = own.get("key") || "";
el("f-event").value = own.get("event") || "";
const from = own.get("from") || "latest";
if (["latest", "earliest", "snapshot"].includes(from)) el("f-from").value = from;
else { el("f-from").value = "time"; el("f-time").value = from; }
el("f-transport").value = own.get("transport") === "ws" ? "ws" : "sse";
for (const t of Object.keys(formats).sort()) {
  const o = document.createElement("option"); o.value = t; el("served").appendChild(o);
}
// form is the stream the form names: its topics, and the query of /streams/{topics}.
const form = () => {
  const topics = list(el("f-topics").value);
  const q = new URLSearchParams();
  for (const k of list(el("f-key").value)) q.append("key", k);
  for (const t of list(el("f-event").value)) q.append("event", t);
  const f = el("f-from").value;
  if (f === "time") q.set("from", el("f-time").value.trim()); else if (f !== "latest") q.set("from", f);
  q.set("explain", "1"); // the gateway says where each resume comes from
  return { topics, query: q, filtered: q.has("key") || q.has("event"), snapshot: f === "snapshot" };
};
let current = form();
// streamURL is the path of the stream, /streams/{topics} (or, for a WebSocket, /ws/{topics}), with its query
// and, for a WebSocket, the position to resume from.
const streamURL = (resumeFrom, ws) => {
  const q = new URLSearchParams(current.query);
  if (resumeFrom) q.set("last_event_id", resumeFrom);
  return (ws ? "/ws/" : "/streams/") + current.topics.map(encodeURIComponent).join(",") + "?" + q.toString();
};
// pageQuery is the page's own query for the form's stream: a reload opens the same stream.
const pageQuery = () => {
  const q = new URLSearchParams(current.query);
  q.delete("explain");
  if (current.topics.join(",") !== demoTopic) q.set("topics", current.topics.join(","));
  if (el("f-transport").value === "ws") q.set("transport", "ws");
  return q.toString();
};

// --- Values, as docs/gateway.md ("Values") says; the module decodes them by each topic's format.
const utf8 = new TextEncoder();
const strictUTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
// shown is the text of a decoded value: as text when it is UTF-8, with control characters other than LF and
// tab spelled out (\r, \x00), else as hex bytes.
const shown = (bytes) => {
  let text;
  try { text = strictUTF8.decode(bytes); } catch { text = null; }
  if (text !== null) {
    return text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g,
      (c) => c === "\r" ? "\\r" : "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"));
  }
  const head = hex(bytes.subarray(0, 256)).replace(/(..)(?!$)/g, "$1 ");
  return head + (bytes.length > 256 ? " ..." : "");
};

// --- Positions: the id is the client's offset in every partition of every topic ("v1:0-12.1-7", or
// "v1:payments~0-3,orders~0-12.1-7" for several). Each record moves it by one offset in one partition; more is
// a gap, none a duplicate (unless a filter passes records by, or a snapshot or its catch-up conflates them).
// positionsOf is an id as a Map "topic/partition" -> offset; null for an id the page cannot read.
const positionsOf = (id) => {
  const byTopic = id.includes("~") ? parseTopicsID(id) : (() => { const v = parseID(id); return v && { [current.topics[0]]: v }; })();
  if (byTopic === null) return null;
  const m = new Map();
  for (const [t, ps] of Object.entries(byTopic)) for (const [p, o] of Object.entries(ps)) m.set(t + "/" + p, o);
  return m;
};
const part = (k) => { const i = k.lastIndexOf("/"); return [k.slice(0, i), Number(k.slice(i + 1))]; };
const byPart = (a, b) => { const [ta, pa] = part(a), [tb, pb] = part(b); return ta < tb ? -1 : ta > tb ? 1 : pa - pb; };
let pos = null; // the position the page has; null until the first id
// A compact id ("v2:...", a gateway with id-format v2) names a checkpoint in Kafka that only a gateway can
// read: the page cannot follow the position through it. It counts such frames as unchecked, and takes the next
// whole id it gets as its position again without calling the jump a gap.
let blind = false;
// liveNow holds the topics whose live event came since the stream (re)opened: on a snapshot stream, a topic's
// records before it are state (each key's latest), after it every record (a resume sends a snapshot of what
// changed, then live again). exact says whether records now move the position one offset at a time.
const liveNow = new Set();
const inSnapshot = (topic) => current.snapshot && !liveNow.has(topic);
const exact = () => current.topics.every((t) => !inSnapshot(t));
const advance = (id) => {
  if (id.startsWith("v2:")) { blind = true; seen.unchecked++; return { moved: -1, parts: [] }; }
  const v = positionsOf(id);
  if (v === null) return { moved: 0, parts: [] };
  let moved = 0; const parts = [];
  if (pos === null || blind) { pos = new Map(); blind = false; moved = -1; }
  for (const [p, o] of v) {
    const had = pos.has(p) ? pos.get(p) : -1;
    if (o > had) { if (moved >= 0) moved += o - had; parts.push(p); pos.set(p, o); }
  }
  return { moved, parts };
};
const cells = (tr, texts, cls) => {
  for (const text of texts) { const td = document.createElement("td"); if (cls) td.className = cls; td.textContent = text; tr.appendChild(td); }
};
const showPositions = (movedParts) => {
  if (pos === null) return; // only compact ids so far
  const rows = el("partitions");
  rows.textContent = "";
  for (const k of [...pos.keys()].sort(byPart)) {
    const tr = document.createElement("tr");
    if (movedParts.includes(k)) tr.className = "moved";
    cells(tr, [...part(k), pos.get(k), seen.perPartition[k] || 0], "num");
    rows.appendChild(tr);
  }
  if (seen.unattributed > 0) {
    const tr = document.createElement("tr");
    tr.title = "events whose partition the ids cannot tell: the first of a stream, or filtered or snapshot ones that moved several partitions";
    cells(tr, ["?", "?", "", seen.unattributed], "num");
    rows.appendChild(tr);
  }
};

// --- Latency: now minus the time the producer wrote into the value (the demo's "sent_at", the load tool's
// "ts" in Unix nanoseconds), on this machine's clock. Only records produced while the stream was open count:
// the ones a resume catches up on are late by design, not slow.
const lat = [];
let openedAt = Infinity;
const latencyOf = (data) => {
  if (!data.startsWith("{")) return null;
  let sent = null;
  try {
    const v = JSON.parse(data);
    if (typeof v.sent_at === "string") sent = Date.parse(v.sent_at);
    else if (typeof v.ts === "number") sent = v.ts / 1e6;
  } catch { /* not JSON */ }
  return sent === null || Number.isNaN(sent) || sent < openedAt ? null : Date.now() - sent;
};
const showLatency = () => {
  if (lat.length === 0) return;
  const s = [...lat].sort((a, b) => a - b);
  el("latency").textContent = Math.round(s[Math.floor(s.length / 2)]) + " ms";
  el("latency-note").textContent = "p50 of " + s.length + ", p99 " + Math.round(s[Math.floor(s.length * 0.99)]) + " ms";
};

// --- Plots: one sample a second, the last 120, as a polyline scaled to the largest sample.
const plot = (id, samples, unit) => {
  const top = Math.max(1, ...samples.filter((v) => v !== null));
  const pts = [];
  samples.forEach((v, i) => { if (v !== null) pts.push((i + 120 - samples.length) + "," + (47 - (v / top) * 45).toFixed(1)); });
  el(id).querySelector("polyline").setAttribute("points", pts.join(" "));
  el(id + "-note").textContent = "last 2 minutes, top " + Math.round(top) + unit;
};
const sample = (samples, v) => { samples.push(v); if (samples.length > 120) samples.shift(); };
let count = 0, window1s = 0, lat1s = [];
setInterval(() => {
  el("rate").textContent = window1s;
  sample(seen.plots.rate, window1s);
  const s = lat1s.sort((a, b) => a - b);
  sample(seen.plots.latency, s.length ? s[Math.floor(s.length / 2)] : null);
  window1s = 0; lat1s = [];
  plot("plot-rate", seen.plots.rate, "/s");
  plot("plot-latency", seen.plots.latency, " ms");
}, 1000);

const checkNote = () => current.filtered ? "not checked: a filter passes records by"
  : !exact() ? "checked after live: a snapshot holds each key's latest record"
  : seen.unchecked > 0 ? "from the whole ids; " + seen.unchecked + " compact (v2) ids not checked"
  : "from the ids";
const showSnapshot = () => {
  if (!current.snapshot) { el("snapshot").textContent = "not a snapshot stream (from=snapshot)"; return; }
  const waiting = current.topics.filter(inSnapshot);
  const live = seen.live[seen.live.length - 1];
  el("snapshot").textContent = seen.snapshot + " records of state; " + (waiting.length > 0 ? "waiting for live of " + waiting.join(", ")
    : "live since event " + live.at + " (cut " + live.id + ")");
  el("snapshot").className = waiting.length > 0 ? "" : "ok";
};
// onRecord takes a record as the module hands it ({id, topic, type, data, text or bytes}); meta is what a
// WebSocket message adds (key, partition, offset).
const onRecord = (r, meta) => {
  count++; window1s++;
  const bytes = r.bytes ?? utf8.encode(r.text);
  seen.lastEventId = r.id;
  seen.events.push({ type: r.type, topic: r.topic, id: r.id, data: r.data, value: hex(bytes), encoded: Boolean(r.bytes), ...meta });
  if (seen.events.length > 100000) seen.events.splice(0, 50000);
  const state = inSnapshot(r.topic);
  if (state) { seen.snapshot++; showSnapshot(); }
  const first = pos === null;
  const { moved, parts } = advance(r.id);
  if (parts.length === 1) seen.perPartition[parts[0]] = (seen.perPartition[parts[0]] || 0) + 1;
  else seen.unattributed++;
  if (!first && !state && exact() && !current.filtered && moved >= 0) {
    if (moved === 0) seen.dups++;
    else if (moved > 1) seen.gaps += moved - 1;
  }
  el("gaps").textContent = seen.gaps + " / " + seen.dups;
  el("gaps").className = seen.gaps + seen.dups > 0 ? "bad" : "ok";
  el("gaps-note").textContent = checkNote();
  const l = latencyOf(r.data);
  if (l !== null) { lat.push(l); lat1s.push(l); if (lat.length > 500) lat.shift(); showLatency(); }
  el("count").textContent = count;
  showPositions(parts);
  const tr = document.createElement("tr");
  cells(tr, [new Date().toLocaleTimeString(), r.topic ?? "", r.type, r.id]);
  const td = document.createElement("td");
  td.className = "data";
  if (r.bytes) {
    const tag = document.createElement("span");
    tag.className = "enc";
    tag.textContent = "base64, " + r.bytes.length + " bytes:";
    td.appendChild(tag);
    td.appendChild(document.createTextNode(shown(r.bytes)));
  } else {
    td.textContent = r.data;
  }
  tr.appendChild(td);
  const rows = el("events");
  rows.insertBefore(tr, rows.firstChild);
  while (rows.childElementCount > 50) rows.removeChild(rows.lastChild);
};
const line = (box, text, cls) => {
  const div = document.createElement("div");
  if (cls) div.className = cls;
  div.textContent = text;
  box.insertBefore(div, box.firstChild);
  while (box.childElementCount > 8) box.removeChild(box.lastChild);
};
// onResumed, onResync and onLive take the gateway's events as the module hands them: the event's data, with
// its id.
const onResumed = (d) => {
  seen.resumes.push({ source: d.source, from: d.from, at: count });
  // The resumed event's id is the position resumed from: the frames that follow must continue from it.
  advance(d.id);
  line(el("resumes"), new Date().toLocaleTimeString() + ": resumed from " + (d.source === "ring" ? "the gateway's memory (ring)" : "Kafka (a replay)") + " after " + d.from, "ok");
};
const resyncCounts = {};
const onResync = (d) => {
  seen.resyncs.push(d);
  resyncCounts[d.reason] = (resyncCounts[d.reason] || 0) + 1;
  const skipped = (d.partitions || []).reduce((n, p) => n + (p.skipped || 0), 0);
  const counts = Object.entries(resyncCounts).map(([r, n]) => r + " x" + n).join(", ");
  line(el("resyncs"), new Date().toLocaleTimeString() + ": " + (d.topic ? d.topic + ": " : "") + d.reason +
    (skipped ? ", " + skipped + " offsets skipped" : "") + (d.error ? " (" + d.error + ")" : "") + " [" + counts + "]", "bad");
  // A resync's id is where the stream goes on: what it skipped is announced, not a gap.
  if (d.id) advance(d.id);
};
const onLive = (d) => {
  seen.live.push({ id: d.id, topic: d.topic, at: count });
  // The cut: every record after it moves the position by one offset (checked from here on).
  advance(d.id); liveNow.add(d.topic);
  el("gaps-note").textContent = checkNote();
  showSnapshot();
};

// --- The connection state: open, retrying (the browser reconnects by itself), or stopped (the gateway
// answered with an error, which an EventSource never retries; the page asks once more to show why).
let retries = 0;
const setState = (s, note) => {
  seen.state = s;
  el("state").textContent = s; el("state").className = s;
  el("state-note").textContent = note || "";
};
const opened = () => {
  openedAt = Date.now();
  seen.opens++;
  el("reconnects").textContent = Math.max(0, seen.opens - 1);
  retries = 0;
  // A snapshot stream that (re)connects sends a snapshot of what changed before going live again.
  liveNow.clear();
  showSnapshot();
  setState("open");
};
const explainRefusal = (url) => fetch(url, { credentials: "include" }).then(async (r) => {
  if (r.status !== 200) setState("stopped", r.status + ": " + ((await r.json().catch(() => ({}))).error || r.statusText));
  else r.body.cancel();
}).catch(() => {});

// --- The EventSource, through the module: it keeps the position in sessionStorage under a key of the stream's
// URL, so a reload of the page (whose query names the same stream) resumes exactly where it was.
let stream = null;
const storageKey = () => "ssegate-dashboard:" + streamURL("");
const connectSSE = () => {
  if (stream) stream.close();
  const url = streamURL("");
  openedAt = Infinity;
  el("url").textContent = "GET " + url;
  setState("connecting");
  const types = new Set(["order.created", "order.paid", "order.shipped", "order.cancelled", ...list(el("f-event").value)]);
  stream = follow(url, {
    storageKey: storageKey(),
    format: formats,
    eventTypes: [...types].filter((t) => !["message", "delete", "resync", "resumed", "live"].includes(t)),
    onOpen: opened,
    onError: (e) => {
      if (e.closed) { setState("stopped", "the gateway refused the stream; fix the form or reload"); explainRefusal(url); return; }
      retries++;
      setState("retrying", "attempt " + retries + "; the browser resumes with the last id");
    },
    onRecord: (r) => onRecord(r),
    onResumed, onResync, onLive,
  });
  if (stream.id && seen.resumedFrom === null && count === 0) {
    // A reload: the module goes on from the position the page had, which the checks start from.
    seen.resumedFrom = stream.id; seen.lastEventId = stream.id;
    advance(stream.id); showPositions([]);
  }
};

// --- The WebSocket (transport=ws), with the same stream and the same handlers (ws.js).
const wsPage = followWS({
  url: (resumeFrom) => streamURL(resumeFrom, true),
  setState, opened, onResumed, onResync, onLive,
  format: formats,
  onRecord,
  onPosition: (id) => { if (!id.startsWith("v2:")) { advance(id); showPositions([]); } },
  seen,
});

const showTransport = () => {
  el("transport").textContent = seen.transport === "ws" ? "WebSocket" : "EventSource";
};
// reset forgets the old stream: a new one from the form starts every count, table and plot afresh.
const reset = () => {
  pos = null; blind = false; liveNow.clear(); count = 0; window1s = 0; lat.length = 0; lat1s = [];
  Object.assign(seen, streamCounts());
  delete seen.position; // a WebSocket's
  for (const k of Object.keys(resyncCounts)) delete resyncCounts[k];
  for (const id of ["partitions", "events", "resumes", "resyncs"]) el(id).textContent = "";
  el("count").textContent = "0"; el("rate").textContent = "0"; el("reconnects").textContent = "0";
  el("latency").textContent = "-"; el("latency-note").textContent = "from the value's time";
  el("gaps").textContent = "0 / 0"; el("gaps").className = ""; el("gaps-note").textContent = "from the ids";
  plot("plot-rate", seen.plots.rate, "/s"); plot("plot-latency", seen.plots.latency, " ms");
};
// open opens the stream the form names on the transport it names.
const open = () => {
  seen.transport = el("f-transport").value;
  showTransport();
  showSnapshot();
  if (seen.transport === "ws") { if (stream) { stream.close(); stream = null; } wsPage.connect(""); } else { wsPage.stop(); connectSSE(); }
};
el("filters").addEventListener("submit", (ev) => {
  ev.preventDefault();
  if (stream) { stream.close(); stream = null; }
  wsPage.stop();
  reset();
  current = form();
  // A new stream from the form starts where the form says, not where an earlier one of the same URL was.
  try { sessionStorage.removeItem(storageKey()); } catch { /* no storage */ }
  history.replaceState(null, "", "?" + pageQuery());
  open();
});
el("drop").addEventListener("click", () => {
  const away = Math.max(0, Number(el("f-away").value) || 0);
  seen.drops++;
  if (seen.transport === "ws") { wsPage.drop(away); return; }
  stream.close();
  setState("dropped", "resuming in " + away + " s from " + (stream.id || "the start position"));
  setTimeout(connectSSE, away * 1000);
});
open();
