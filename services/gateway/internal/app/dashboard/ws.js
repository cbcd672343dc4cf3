// ws.js: the dashboard's WebSocket transport (transport=ws), /ws/{topics} with the same query as the
// EventSource's stream, through the client module's WebSocket transport (ssegate.js, connect with transport
// "websocket"), which reads the messages and reconnects from the last id. This file is what the page shows of
// it: the state, the attempts, and page.seen.position, the id the stream would resume from.
import { connect } from "./ssegate.js";

// followWS runs the WebSocket side of the page. page gives: url(resumeFrom), the stream's path; format, the
// topics' value formats; the page's handlers (setState, opened, onRecord(record, meta), onResumed, onResync,
// onLive, onPosition(id)); and seen, where position is kept. It returns {connect(resumeFrom), stop(),
// drop(awaySeconds)}.
export function followWS(page) {
  let stream = null, timer = null, retries = 0;
  // stop closes the stream and forgets a reconnect the page planned.
  const stop = () => {
    clearTimeout(timer); timer = null;
    if (stream) { stream.close(); stream = null; }
  };
  const at = (id) => { if (id) page.seen.position = id; };
  const start = (resumeFrom) => {
    stop();
    const url = page.url(resumeFrom);
    document.getElementById("url").textContent = "WebSocket " + url;
    page.setState("connecting");
    page.seen.position = resumeFrom;
    stream = connect(url, {
      transport: "websocket",
      storageKey: null, // the page resumes from seen.position itself (url names it)
      format: page.format,
      onOpen: () => { retries = 0; page.opened(); },
      // The page sees where the stream starts (an EventSource never shows it): the first record's move is
      // checked too.
      onPosition: (id) => { at(id); page.onPosition(id); },
      onRecord: (r) => {
        at(r.id);
        const { key, partition, offset, ...rec } = r;
        page.onRecord(rec, partition === undefined ? undefined : { key, partition, offset });
      },
      onResumed: (r) => { at(r.id); page.onResumed(r); },
      onResync: (r) => { at(r.id); page.onResync(r); },
      onLive: (r) => { at(r.id); page.onLive(r); },
      onError: (e) => {
        const closed = e.status !== undefined ? " (" + e.status + ": " + e.error + ")"
          : e.code === 1006 || e.code === undefined ? "" : " (closed " + e.code + (e.reason ? ": " + e.reason : "") + ")";
        if (e.closed) {
          page.setState("stopped", (e.status !== undefined ? e.status + ": " + e.error : "closed " + e.code + (e.reason ? ": " + e.reason : "")) +
            (e.code === 1008 || e.code === 1009 ? "; fix the form or reload" : ""));
          return;
        }
        retries++;
        // The module opens the stream again from the last id it got, as the page's position says.
        document.getElementById("url").textContent = "WebSocket " + page.url(page.seen.position);
        page.setState("retrying", "attempt " + retries + closed + "; resuming from " + (page.seen.position || "the start position"));
      },
    });
  };
  const drop = (away) => {
    stop();
    const from = page.seen.position;
    page.setState("dropped", "resuming in " + away + " s from " + (from || "the start position"));
    timer = setTimeout(() => start(from), away * 1000);
  };
  return { connect: start, stop, drop };
}
