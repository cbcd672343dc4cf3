// k6 (a version with the stable k6/websockets module; see below for older ones): the Go tool's steady
// scenario over WebSocket (--proto=ws) against a real deployment. Each VU holds one WebSocket stream,
// GET /ws/TOPIC, for HOLD seconds, checks that the ids advance by one offset in one partition per record as
// steady.js does (common.js: WSStream and Positions), and records end-to-end latency for values written by
// the Go tool (run the producer on a host whose clock is in sync). ACK_EVERY=N asks for acknowledgements
// (ack=1, max_in_flight=MAX_IN_FLIGHT, default 100) and acknowledges every N-th message.
//
//   k6 run -e BASE_URLS=https://sse.example.com -e TOPIC=loadtest -e VUS=500 -e HOLD=60 loadtest/k6/ws.js
//   k6 run -e BASE_URLS=https://sse.example.com -e VUS=500 -e ACK_EVERY=10 loadtest/k6/ws.js
//
// BASE_URLS are the http(s) bases steady.js takes; the script speaks ws:// or wss:// to them. Records must be
// produced meanwhile (the Go tool next to Kafka, or the application). A k6 from before k6/websockets was
// stable (it came in 2026) has the same module as k6/experimental/websockets:
//   sed -i 's#"k6/websockets"#"k6/experimental/websockets"#' loadtest/k6/ws.js
import { WebSocket } from "k6/websockets";
import { check } from "k6";
import { Counter, Trend } from "k6/metrics";
import { setTimeout } from "k6/timers";
import { WSStream, wsURL } from "./common.js";

const latency = new Trend("ws_latency", true);
const delivered = new Counter("ws_delivered");
const lost = new Counter("ws_lost");
const duplicated = new Counter("ws_duplicated");
// Messages whose compact (v2) ids a script cannot check (see common.js); 0 against a v1 gateway.
const unchecked = new Counter("ws_unchecked");
// Streams that went wrong: a message that is not the gateway's JSON, a resync, an error, a close we did not ask for.
const streamErrors = new Counter("ws_stream_errors");
const acks = new Counter("ws_acks");

const hold = Number(__ENV.HOLD || 30);
const ackEvery = Number(__ENV.ACK_EVERY || 0);
const maxInFlight = Number(__ENV.MAX_IN_FLIGHT || 100);

export const options = {
  scenarios: {
    ws: {
      executor: "per-vu-iterations",
      vus: Number(__ENV.VUS || 100),
      iterations: 1,
      maxDuration: `${hold + 60}s`,
    },
  },
  thresholds: {
    ws_lost: ["count==0"],
    ws_duplicated: ["count==0"],
    ws_stream_errors: ["count==0"],
    ws_latency: ["p(99)<250"],
  },
};

export default function () {
  if (ackEvery > maxInFlight) {
    throw new Error(`ACK_EVERY=${ackEvery} above MAX_IN_FLIGHT=${maxInFlight}: the stream would stall`);
  }
  const stream = new WSStream(ackEvery);
  const ws = new WebSocket(wsURL(__VU, ackEvery, maxInFlight));
  let closing = false;
  let failed = false;
  const fail = (why) => {
    if (!failed) {
      failed = true;
      streamErrors.add(1);
      console.error(`VU ${__VU}: ${why}`);
    }
  };
  let reported = false;
  const done = () => {
    if (reported) {
      return;
    }
    reported = true;
    check(stream, { opened: (s) => s.messages > 0 });
    delivered.add(stream.pos.delivered);
    lost.add(stream.pos.lost);
    duplicated.add(stream.pos.dup);
    unchecked.add(stream.pos.unchecked);
  };
  ws.addEventListener("message", (e) => {
    const r = stream.message(e.data);
    if (r.error !== null) {
      fail(r.error);
      closing = true;
      ws.close();
      return;
    }
    if (r.sent !== null) {
      latency.add(Date.now() - r.sent);
    }
    if (r.ack !== null) {
      ws.send(r.ack);
      acks.add(1);
    }
  });
  ws.addEventListener("error", (e) => {
    fail(`error: ${e.error}`);
    done();
  });
  ws.addEventListener("close", () => {
    if (!closing) {
      fail("closed by the gateway");
    }
    done();
  });
  setTimeout(() => {
    closing = true;
    ws.close();
  }, hold * 1000);
}
