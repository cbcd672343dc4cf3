// Uses every export of ssegate.d.ts as a program would; the TypeScript compiler checks it
// (TestDeclarations). The lines after @ts-expect-error are misuses the declarations must refuse.
import { connect, decodeValue, parseID, parseTopicsID } from "ssegate";
import type { ConnectOptions, Position, Stream, StreamRecord, TopicsPosition, Value } from "ssegate";
import { EventSource } from "eventsource";

const seen: StreamRecord[] = [];
const memory = new Map<string, string>();
const opts: ConnectOptions = {
  storageKey: "orders",
  storage: { getItem: (k) => memory.get(k) ?? null, setItem: (k, v) => void memory.set(k, v) },
  format: { orders: "auto", logs: "text" },
  eventTypes: ["order.paid"],
  EventSource,
  onRecord: (r) => {
    seen.push(r);
    const shown: string = r.text ?? new TextDecoder().decode(r.bytes);
    console.log(r.id, r.topic, r.type, shown, r.partition, r.offset);
  },
  onResync: (r) => console.warn(r.reason, r.partitions?.map((p) => p.partition + ":" + p.skipped)),
  onLive: (r) => console.log("live at", r.id, r.topic),
  onResumed: (r) => console.log(r.source, r.from),
  onError: (e) => console.error(e.closed, e.code, e.status, e.error),
  renewToken: () => fetch("/token", { method: "POST" }),
  onTokenExpiring: (r) => console.log(r.id),
  onTokenExpired: (r) => console.log(r.id),
};
const sse: Stream = connect("http://localhost:8080/streams/orders", opts);
const ws: Stream = connect(new URL("ws://localhost:8080/ws/orders,logs"), {
  transport: "websocket",
  WebSocket: globalThis.WebSocket,
  storage: null,
  onPosition: (id) => console.log(id),
});
const at: string | null = sse.id;
sse.close();
ws.close();

const p: Position | null = parseID(at);
const tp: TopicsPosition | null = parseTopicsID("v1:logs~0-3,orders~0-1");
const v: Value = decodeValue("base64:AAE=", "base64");
console.log(p?.[0], tp?.orders?.[0], v.bytes?.length, seen.length);

// @ts-expect-error: a transport the client does not have
connect("http://localhost:8080/streams/orders", { transport: "sse" });
// @ts-expect-error: a value format the gateway does not have
decodeValue("x", "json");
// @ts-expect-error: the position is read-only
sse.id = "v1:0-1";
// @ts-expect-error: onRecord gets a record, not a string
connect("/streams/orders", { onRecord: (r: string) => r });
