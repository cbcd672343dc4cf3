// ws.js: the dashboard's WebSocket transport (transport=ws), /ws/{topics} with the same query as the
// EventSource's stream. Every message is JSON: "open" first, with the position the stream starts from and the
// retry an EventSource gets; then records, with their key, partition and offset (and topic, on a stream of
// several topics); and the gateway's own events ("resumed", "resync", "live", ...). A WebSocket does not
// reconnect by itself: this loop does, after the retry, with last_event_id the last id it got (a record's, or
// the open message's when none came), as an EventSource would. page.seen.position is that id.

// rawData is the text of a message's data as the message has it, so that a JSON value keeps its digits
// (JSON.parse rounds a 64-bit integer) and the order of its fields. The gateway's encoder writes <, > and & in
// strings as \u003c, \u003e and \u0026; they are turned back. null when the message has no data.
const blank = (s, i) => { while (i < s.length && " \t\r\n".includes(s[i])) i++; return i; };
const jsonEnd = (s, i) => { // the index after the JSON value that starts at s[i], in valid JSON s
  let depth = 0;
  do {
    const c = s[i++];
    if (c === '"') { while (i < s.length && s[i] !== '"') i += s[i] === "\\" ? 2 : 1; i++; }
    else if (c === "{" || c === "[") depth++;
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
const dataOf = (m, text) => typeof m.data === "string" ? m.data : m.data === undefined ? "" : rawData(text) ?? JSON.stringify(m.data);
// eventOf is a gateway event's message as the module hands such events to a page: its data, with its id.
const eventOf = (m) => ({ ...(typeof m.data === "object" && m.data !== null ? m.data : {}), id: m.id || "" });

// followWS runs the WebSocket side of the page. page gives: url(resumeFrom), the stream's path; the page's
// handlers (setState, opened, onRecord(record, meta), onResumed, onResync, onLive,
// onPosition(id)); topicOf(message); and seen, where position is kept. It returns {connect(resumeFrom), stop(),
// drop(awaySeconds)}.
export function followWS(page) {
  let ws = null, timer = null, gen = 0, retry = 3000, retries = 0;
  // stop closes the socket and forgets a reconnect it planned; a close, message or answer of an older socket
  // is ignored (gen).
  const stop = () => {
    gen++;
    clearTimeout(timer); timer = null;
    if (ws) { const s = ws; ws = null; s.close(); }
  };
  const message = (msg, markOpen) => {
    let m;
    try { m = JSON.parse(msg.data); } catch { return; }
    if (m.id) page.seen.position = m.id;
    if (typeof m.partition === "number") { // a record, whatever its type
      page.onRecord({ id: m.id || "", topic: page.topicOf(m), type: m.event, data: dataOf(m, msg.data) },
        { key: m.key, partition: m.partition, offset: m.offset });
      return;
    }
    switch (m.event) {
    case "open":
      markOpen();
      retries = 0;
      if (typeof m.retry === "number") retry = m.retry;
      page.opened();
      // The page sees where the stream starts (an EventSource never shows it): the first record's move is
      // checked too. A compact id tells nothing the page can read.
      if (m.id) page.onPosition(m.id);
      break;
    case "position": page.onPosition(m.id); break;
    case "resumed": page.onResumed(eventOf(m)); break;
    case "resync": page.onResync({ topic: page.topicOf(m), ...eventOf(m) }); break;
    case "live": page.onLive({ topic: page.topicOf(m), ...eventOf(m) }); break;
    case "token-expiring": case "token-expired": case "drain": break; // the close that follows says what to do
    default: if (m.data !== undefined) page.onRecord({ id: m.id || "", topic: page.topicOf(m), type: m.event, data: dataOf(m, msg.data) });
    }
  };
  const connect = (resumeFrom) => {
    stop();
    const mine = gen;
    const url = page.url(resumeFrom);
    document.getElementById("url").textContent = "WebSocket " + url;
    page.setState("connecting");
    page.seen.position = resumeFrom;
    const sock = ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + url);
    let opened = false;
    sock.onmessage = (msg) => { if (mine === gen) message(msg, () => { opened = true; }); };
    sock.onclose = (ev) => {
      if (mine !== gen) return;
      ws = null;
      const closed = ev.code === 1006 ? "" : " (closed " + ev.code + (ev.reason ? ": " + ev.reason : "") + ")";
      // 1008 (a policy violation) and 1009 (a message too big) would come again: stop, as an EventSource does
      // on an error answer. Anything else (1001 going away, 1011, 4001 token expired, 4002 too slow, a dropped
      // connection) reconnects from the last id.
      if (ev.code === 1008 || ev.code === 1009) {
        page.setState("stopped", "closed " + ev.code + (ev.reason ? ": " + ev.reason : "") + "; fix the form or reload");
        return;
      }
      const again = (wait, why) => {
        retries++;
        page.setState("retrying", "attempt " + retries + why + "; resuming from " + (page.seen.position || "the start position"));
        timer = setTimeout(() => connect(page.seen.position), wait);
      };
      if (opened) { again(retry, closed); return; }
      // Refused before the upgrade, or no gateway: a socket cannot tell which. The same request over plain
      // HTTP can: a gateway that would take the stream answers 426 (Upgrade Required); a refusal, its status
      // and error. Limits (429, 503) come again after their Retry-After; no answer at all, after the retry.
      fetch(url, { credentials: "include" }).then(async (r) => {
        if (mine !== gen) return;
        const why = ((await r.json().catch(() => ({}))).error || r.statusText);
        if (r.status === 426) again(retry, closed);
        else if (r.status === 429 || r.status === 503) {
          again(Math.max(retry, 1000 * (Number(r.headers.get("Retry-After")) || 1)), " (" + r.status + ": " + why + ")");
        } else page.setState("stopped", r.status + ": " + why);
      }).catch(() => { if (mine === gen) again(retry, " (no answer)"); });
    };
  };
  const drop = (away) => {
    stop();
    const from = page.seen.position;
    page.setState("dropped", "resuming in " + away + " s from " + (from || "the start position"));
    timer = setTimeout(() => connect(from), away * 1000);
  };
  return { connect, stop, drop };
}
