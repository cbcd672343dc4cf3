// Checks common.js against the vectors the Go load tool checks too (testdata/vectors.json): the same ids
// decode to the same positions, and the same streams give the same delivered, lost and duplicated counts.
// Run with Node: node loadtest/k6/vectors.test.mjs (the Go test TestK6AgreesWithGo runs it).
import { readFileSync } from "node:fs";
import { Positions, parseID } from "./common.js";

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
if (failures > 0) {
  process.exit(1);
}
console.log(`ok: ${vectors.ids.length} ids, ${vectors.streams.length} streams`);
