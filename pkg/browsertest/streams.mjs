// Opens many EventSources on one page, all on streams of the page's own origin, and reports what each saw and
// over which protocol and connection the browser fetched it: HTTP/1.1 holds at most six connections to an
// origin, so a seventh stream waits for one of them to end; HTTP/2 carries them all on one connection.
//
//   node streams.mjs PAGE_URL STREAM_URL COUNT EVENTS [SETTLE_MS] [TIMEOUT_MS]
//
// Loads PAGE_URL (a page of the streams' origin that opens no stream itself), accepting any certificate (the
// tests' are self-signed), and opens COUNT EventSources on STREAM_URL, the i-th with "es=i" added to its query
// (so that each request can be told apart). Prints {"open": n, "connecting": n} as one JSON line once all are
// open, or once at least one is and the number open has not changed for SETTLE_MS (default 1500). Then waits
// until every open stream has received EVENTS events (within TIMEOUT_MS, default 60000), and at most SETTLE_MS
// more for every stream to have them, and prints one JSON line: the protocol the page itself came over
// (pageProtocol, from its navigation timing) and for each stream its readyState, opens, errors and events
// ({type, id, data}), and, as the browser's network stack saw its request (Chrome DevTools Protocol), whether
// it was sent (requested), the response's status, protocol ("h2", "http/1.1") and connection (an id of the
// connection it came over; absent while no response came). The page and its streams stay until stdin ends.
// CHROMIUM names the browser binary (default /usr/bin/chromium).
import { launch } from "./launch.mjs";

const [pageURL, streamURL, countArg, eventsArg, settleArg, timeoutArg] = process.argv.slice(2);
const count = Number(countArg);
const events = Number(eventsArg);
const settle = Number(settleArg || 1500);
const timeout = Number(timeoutArg || 60000);
if (!pageURL || !streamURL || !Number.isInteger(count) || count < 1 || !Number.isInteger(events) || events < 0) {
  console.error("usage: node streams.mjs PAGE_URL STREAM_URL COUNT EVENTS [SETTLE_MS] [TIMEOUT_MS]");
  process.exit(2);
}
const urls = Array.from({ length: count }, (_, i) => {
  const u = new URL(streamURL);
  u.searchParams.set("es", String(i));
  return u.href;
});

const browser = await launch();
try {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));

  // The network stack's account of each stream's request, by URL.
  const net = new Map(urls.map((u) => [u, { requested: false }]));
  const byId = new Map();
  const cdp = await context.newCDPSession(page);
  cdp.on("Network.requestWillBeSent", (e) => {
    const n = net.get(e.request.url);
    if (n) {
      n.requested = true;
      byId.set(e.requestId, n);
    }
  });
  cdp.on("Network.responseReceived", (e) => {
    const n = byId.get(e.requestId);
    if (n) Object.assign(n, { status: e.response.status, protocol: e.response.protocol, connection: e.response.connectionId });
  });
  await cdp.send("Network.enable");

  await page.goto(pageURL);
  await page.evaluate((urls) => {
    const sources = window.ssegateSources = [];
    const seen = window.ssegate = { streams: [], open: 0, changedAt: performance.now() };
    for (const url of urls) {
      const s = { opens: 0, errors: 0, events: [] };
      seen.streams.push(s);
      const es = new EventSource(url);
      sources.push(es);
      es.onopen = () => {
        s.opens++;
        seen.open = sources.filter((es) => es.readyState === EventSource.OPEN).length;
        seen.changedAt = performance.now();
      };
      es.onerror = () => { s.errors++; };
      es.onmessage = (e) => { s.events.push({ type: e.type, id: e.lastEventId, data: e.data }); };
    }
  }, urls);
  const state = () => page.evaluate(() => {
    const rs = window.ssegateSources.map((es) => es.readyState);
    return { open: rs.filter((r) => r === EventSource.OPEN).length, connecting: rs.filter((r) => r === EventSource.CONNECTING).length };
  });

  // All open, or as many as will open: some, and no more for a while.
  await page.waitForFunction(([n, settle]) => {
    const s = window.ssegate;
    return s.open === n || (s.open > 0 && performance.now() - s.changedAt >= settle);
  }, [count, settle], { timeout, polling: 50 });
  console.log(JSON.stringify(await state()));

  // Every open stream has the events; then the others get a bounded while to catch up.
  await page.waitForFunction((n) => window.ssegateSources.every((es, i) =>
    es.readyState !== EventSource.OPEN || window.ssegate.streams[i].events.length >= n), events, { timeout, polling: 50 });
  await page.waitForFunction((n) => window.ssegate.streams.every((s) => s.events.length >= n), events, { timeout: settle, polling: 50 })
    .catch(() => {});

  const report = await page.evaluate(() => ({
    pageProtocol: performance.getEntriesByType("navigation")[0]?.nextHopProtocol || "",
    streams: window.ssegate.streams.map((s, i) => ({ ...s, readyState: window.ssegateSources[i].readyState })),
  }));
  report.streams.forEach((s, i) => Object.assign(s, net.get(urls[i])));
  console.log(JSON.stringify(report));
  for await (const _ of process.stdin); // the page stays until stdin ends
} finally {
  await browser.close();
}
