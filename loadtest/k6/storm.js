// k6 (0.59 or later, whose k6/experimental/sse is xk6-sse built in): the Go tool's storm scenario against a real deployment. Every VU reads a stream for CONSUME
// seconds, disconnects, waits GAP seconds (all VUs are away at the same time), reconnects within WINDOW
// seconds with Last-Event-ID, on the next of BASE_URLS (another pod) when there are several, and reads
// until it has caught up (HOLD seconds). The resumed stream must continue exactly from the saved id: no
// gap, no duplicate. resume_latency is the time from the reconnect to the first replayed frame.
//
//   k6 run -e BASE_URLS=https://pod-0.sse.example.com,https://pod-1.sse.example.com -e TOPIC=loadtest \
//     -e VUS=1000 -e CONSUME=10 -e GAP=20 -e WINDOW=5 -e HOLD=30 loadtest/k6/storm.js
//
// Records must be produced all along (the Go tool, or the application). Older k6: build it with the extension
// (xk6 build --with github.com/phymbert/xk6-sse) and import "k6/x/sse" instead.
import sse from "k6/experimental/sse";
import { check, sleep } from "k6";
import { Counter, Trend } from "k6/metrics";
import { Positions, streamURL } from "./common.js";

const resumeLatency = new Trend("resume_latency", true);
const lost = new Counter("sse_lost");
const duplicated = new Counter("sse_duplicated");
// Frames whose compact (v2) ids a script cannot check (see common.js); 0 against a v1 gateway.
const unchecked = new Counter("sse_unchecked");
const resyncs = new Counter("sse_resyncs");

const consume = Number(__ENV.CONSUME || 5);
const gap = Number(__ENV.GAP || 10);
const windowS = Number(__ENV.WINDOW || 2);
const hold = Number(__ENV.HOLD || 15);

export const options = {
  scenarios: {
    storm: {
      executor: "per-vu-iterations",
      vus: Number(__ENV.VUS || 100),
      iterations: 1,
      maxDuration: `${consume + gap + windowS + hold + 120}s`,
    },
  },
  thresholds: {
    sse_lost: ["count==0"],
    sse_duplicated: ["count==0"],
    sse_resyncs: ["count==0"],
  },
};

// read holds one stream for seconds, feeding its events to pos; returns the response, when it started and
// when the first frame with data arrived.
function read(url, headers, pos, seconds) {
  let firstAt = null;
  const start = Date.now();
  const res = sse.open(url, { headers }, (client) => {
    client.on("event", (ev) => {
      if (ev.name === "resync") {
        resyncs.add(1);
      }
      pos.event(ev);
      if (firstAt === null && ev.data) {
        firstAt = Date.now();
      }
      pos.lastID = ev.id;
      if (Date.now() - start >= seconds * 1000) {
        client.close();
      }
    });
    client.on("error", (e) => console.error(`VU ${__VU}: ${e.error()}`));
  });
  return { res, firstAt, start };
}

export default function () {
  const pos = new Positions();
  const base = { Accept: "text/event-stream" };
  const a = read(streamURL(__VU), base, pos, consume);
  check(a.res, { "first stream 200": (r) => r && r.status === 200 });
  // Everyone is away now: wait out the rest of the gap, then come back at a random moment in the window.
  sleep(gap + Math.random() * windowS);
  const lastID = pos.lastID;
  const b = read(streamURL(__VU + 1), Object.assign({ "Last-Event-ID": lastID }, base), pos, hold);
  check(b.res, { "resumed stream 200": (r) => r && r.status === 200 });
  if (b.firstAt !== null) {
    resumeLatency.add(b.firstAt - b.start);
  }
  lost.add(pos.lost);
  duplicated.add(pos.dup);
  unchecked.add(pos.unchecked);
}
