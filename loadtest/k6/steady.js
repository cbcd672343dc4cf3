// k6 (0.59 or later, whose k6/experimental/sse is xk6-sse built in): the Go tool's steady scenario against a real deployment. Each VU holds one SSE stream for
// HOLD seconds and records end-to-end latency (for values written by the Go tool, whose "ts" is the send
// time; run the producer on a host whose clock is in sync) and lost/duplicated records from the ids.
//
//   k6 run -e BASE_URLS=https://sse.example.com -e TOPIC=loadtest -e VUS=500 -e HOLD=60 loadtest/k6/steady.js
//
// Records must be produced meanwhile, e.g. by the Go tool on a machine next to Kafka, or by the
// application. Older k6: build it with the extension (xk6 build --with github.com/phymbert/xk6-sse) and import
// "k6/x/sse" instead.
import sse from "k6/experimental/sse";
import { check } from "k6";
import { Counter, Trend } from "k6/metrics";
import { Positions, sendTime, streamURL } from "./common.js";

const latency = new Trend("sse_latency", true);
const delivered = new Counter("sse_delivered");
const lost = new Counter("sse_lost");
const duplicated = new Counter("sse_duplicated");
// Frames whose compact (v2) ids a script cannot check (see common.js); 0 against a v1 gateway.
const unchecked = new Counter("sse_unchecked");

const hold = Number(__ENV.HOLD || 30);

export const options = {
  scenarios: {
    steady: {
      executor: "per-vu-iterations",
      vus: Number(__ENV.VUS || 100),
      iterations: 1,
      maxDuration: `${hold + 60}s`,
    },
  },
  thresholds: {
    sse_lost: ["count==0"],
    sse_duplicated: ["count==0"],
    sse_latency: ["p(99)<250"],
  },
};

export default function () {
  const pos = new Positions();
  let opened = false;
  const res = sse.open(streamURL(__VU), { headers: { Accept: "text/event-stream" } }, (client) => {
    const stopAt = Date.now() + hold * 1000;
    client.on("open", () => {
      opened = true;
    });
    client.on("event", (ev) => {
      if (ev.name === "resync") {
        console.error(`VU ${__VU}: resync ${ev.data}`);
      }
      pos.event(ev);
      const ts = sendTime(ev.data);
      if (ts !== null) {
        latency.add(Date.now() - ts);
      }
      if (Date.now() >= stopAt) {
        client.close();
      }
    });
    client.on("error", (e) => {
      console.error(`VU ${__VU}: ${e.error()}`);
    });
  });
  check(res, { "status is 200": (r) => r && r.status === 200, opened: () => opened });
  delivered.add(pos.delivered);
  lost.add(pos.lost);
  duplicated.add(pos.dup);
  unchecked.add(pos.unchecked);
}
