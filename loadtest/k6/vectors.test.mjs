// Checks common.js against the vectors the Go load tool checks too (testdata/vectors.json): the same ids
// decode to the same positions, and the same streams give the same delivered, lost and duplicated counts, as
// event streams and as WebSocket messages (WSStream, ws.js).
// Run with Node: node loadtest/k6/vectors.test.mjs (the Go test TestK6AgreesWithGo runs it).
import { readFileSync } from "node:fs";
import { Positions, WSStream, parseID } from "./common.js";

const vectors = JSON.parse(readFileSync(new URL("./testdata/vectors.json", import.meta.url), "utf8"));
let failures = 0;
const fail = (msg) => {
  failures++;
  console.error(msg);
};

for (const { id, want } of vectors.ids) {
  const got = parseID(id);
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    fail(`parseID(${JSON.stringify(id)}) = ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}
for (const s of vectors.streams) {
  const pos = new Positions();
  for (const [kind, id] of s.steps) {
    // An opening id is an event without data, a frame one with data (what the k6 SSE module reports).
    pos.event({ id, data: kind === "open" ? "" : "x" });
  }
  const got = { delivered: pos.delivered, lost: pos.lost, dup: pos.dup };
  const want = { delivered: s.delivered, lost: s.lost, dup: s.dup };
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    fail(`stream "${s.name}": ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}
// Compact ids, which only a gateway can resolve (so they are not in the shared vectors): their frames count as
// delivered and unchecked, and the whole id after them is the position again, its jump no loss.
{
  const pos = new Positions();
  pos.event({ id: "v1:0-4.1-9", data: "" });
  pos.event({ id: "v1:0-5.1-9", data: "x" });
  pos.event({ id: "v2:AAEC", data: "x" });
  pos.event({ id: "v2:AAED", data: "x" });
  pos.event({ id: "v1:0-9.1-12", data: "x" }); // a v1 fallback frame far ahead: not a loss
  pos.event({ id: "v1:0-10.1-12", data: "x" });
  pos.event({ id: "v1:0-12.1-12", data: "x" }); // checked again: one lost
  pos.event({ id: "v1:0-12.1-12", data: "x" }); // and a duplicate
  const got = { delivered: pos.delivered, unchecked: pos.unchecked, lost: pos.lost, dup: pos.dup };
  const want = { delivered: 6, unchecked: 3, lost: 1, dup: 1 };
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    fail(`compact ids: ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}
// The same streams over WebSocket (ws.js): each step as the gateway's JSON message, a resume as a new
// connection whose "open" carries the resumed position. The counts must be the same.
for (const s of vectors.streams) {
  const ws = new WSStream();
  let errors = 0;
  for (const [kind, id] of s.steps) {
    let msg;
    if (kind === "open") {
      ws.connect();
      msg = { event: "open", id, retry: 3000 };
    } else {
      msg = { data: { ts: 1, seq: 1, pad: "x" }, event: "message", id, key: "k-1", offset: 1, partition: 0 };
    }
    if (ws.message(JSON.stringify(msg)).error !== null) {
      errors++;
    }
  }
  const got = { delivered: ws.pos.delivered, lost: ws.pos.lost, dup: ws.pos.dup, errors };
  const want = { delivered: s.delivered, lost: s.lost, dup: s.dup, errors: 0 };
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    fail(`stream "${s.name}" over WebSocket: ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}
// WebSocket messages: the mapping to events, acknowledgements, and what fails a stream.
{
  const ws = new WSStream(2);
  const steps = [
    [`{"event":"open","id":"v1:0-4.1-9","retry":3000}`, { ack: null, error: null, sent: null }],
    [`{"data":{"ts":1700000000123456789,"seq":1,"pad":"xx"},"event":"message","id":"v1:0-5.1-9","key":"k-1","offset":5,"partition":0}`,
      { ack: null, error: null, sent: 1700000000123.4568 }],
    [`{"data":"not json","event":"message","id":"v1:0-5.1-10","key":"k-2","offset":10,"partition":1}`,
      { ack: `{"ack":"v1:0-5.1-10"}`, error: null, sent: null }],
    [`{"event":"position","id":"v1:0-5.1-10.2-0"}`, { ack: null, error: null, sent: null }],
    [`{"data":{},"event":"delete","id":"v1:0-6.1-10.2-0","partition":0,"offset":6}`, { ack: null, error: null, sent: null }],
    [`{"data":{},"event":"message","id":"v1:0-6.1-10.2-1","partition":2,"offset":1}`, { ack: `{"ack":"v1:0-6.1-10.2-1"}`, error: null, sent: null }],
  ];
  for (const [text, want] of steps) {
    const got = ws.message(text);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      fail(`WSStream.message(${text}) = ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  }
  const counts = { delivered: ws.pos.delivered, lost: ws.pos.lost, dup: ws.pos.dup };
  if (JSON.stringify(counts) !== JSON.stringify({ delivered: 4, lost: 1, dup: 0 })) {
    // The position message moved past partition 2's offset 0 without a record: lost, as for an id-only block.
    fail(`WSStream counts: ${JSON.stringify(counts)}, want 4 delivered and partition 2's offset 0 lost`);
  }
  const bad = [
    [new WSStream(), [`{"event":"message","id":"v1:0-1","data":{}}`], "want \"open\""],
    [new WSStream(), [`{"event":"open","id":"v1:0-1"}`, `id: v1:0-2`], "not JSON"],
    [new WSStream(), [`{"event":"open","id":"v1:0-1"}`, `{"id":"v1:0-2"}`], "without \"event\""],
    [new WSStream(), [`{"event":"open","id":"v1:0-1"}`, `{"event":"resync","id":"v1:0-9","data":{"reason":"retention"}}`], "resync"],
  ];
  for (const [s, texts, want] of bad) {
    const errs = texts.map((t) => s.message(t).error).filter((e) => e !== null);
    if (errs.length !== 1 || !errs[0].includes(want)) {
      fail(`WSStream on ${JSON.stringify(texts)}: errors ${JSON.stringify(errs)}, want one with ${want}`);
    }
  }
}
if (failures > 0) {
  process.exit(1);
}
console.log(`ok: ${vectors.ids.length} ids, ${vectors.streams.length} streams`);
