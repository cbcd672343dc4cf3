// clientjs.mjs: follows a gateway's stream in Node with the JavaScript client (pkg/clientjs) and prints what
// it got as JSON, for the gateway's black-box tests (services/e2e, TestNodeClient).
//
//   node clientjs.mjs <stream URL> <transport: eventsource|websocket> <records> <drop after>
//
// It connects with the eventsource or ws package and a storage in memory; after <drop after> records it drops
// the stream: over a WebSocket by cutting the connection (the client reconnects by itself), then, after
// another <drop after> and that reconnect, by closing it and connecting again (the stored position resumes it); over an
// EventSource by closing and connecting again. It prints {records, opens, errors, drops} once it has <records>
// records, and exits 1 after a minute without them.
import { EventSource } from "eventsource";
import WebSocket from "ws";
import { connect } from "../clientjs/ssegate.js";

const [url, transport, want, dropAfter] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const memory = new Map();
const storage = { getItem: (k) => memory.get(k) ?? null, setItem: (k, v) => void memory.set(k, v) };
const out = { records: [], opens: 0, errors: [], drops: [], positions: [] };
let stream = null;

const done = () => {
  stream.close();
  console.log(JSON.stringify(out));
  process.exit(0);
};
const open = () => {
  stream = connect(url, {
    transport, EventSource, WebSocket, storage,
    onOpen: () => out.opens++,
    onError: (e) => out.errors.push(e),
    onPosition: (id) => out.positions.push(id),
    onRecord: (r) => {
      out.records.push({ id: r.id, topic: r.topic, type: r.type, text: r.text, key: r.key, partition: r.partition, offset: r.offset });
      const n = out.records.length;
      if (n === want) {
        done();
      } else if (n === dropAfter && transport === "websocket") {
        out.drops.push({ how: "cut", at: stream.id, after: n });
        stream.source.terminate(); // the ws package's abrupt end: no close handshake, as a network drops
      } else if (n >= (transport === "websocket" ? 2 : 1) * dropAfter && out.drops.length === (transport === "websocket" ? 1 : 0) &&
        out.opens === out.drops.length + 1) {
        // (Over a WebSocket, once the cut has been resumed: records read before the cut may still come.)
        out.drops.push({ how: "reconnect", at: stream.id, after: n });
        stream.close();
        setTimeout(open, 100);
      }
    },
  });
};
open();
setTimeout(() => {
  console.log(JSON.stringify(out));
  console.error(`only ${out.records.length} of ${want} records within a minute`);
  process.exit(1);
}, 60000);
