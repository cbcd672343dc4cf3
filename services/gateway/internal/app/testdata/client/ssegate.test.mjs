// Checks of the browser client module (pkg/clientjs/ssegate.js) that need no browser: run by Node from
// TestBrowserClientNode, with an EventSource and a sessionStorage of this file's own.
import assert from "node:assert/strict";
import { connect, parseTopicsID, defaultStorageKey } from "../../../../../../pkg/clientjs/ssegate.js";

// FakeSource records what connect opens and lets the test hand it events.
class FakeSource {
  static CLOSED = 2;
  static opened = [];
  constructor(url) {
    this.url = new URL(url);
    this.listeners = {};
    this.readyState = 1;
    FakeSource.opened.push(this);
  }
  addEventListener(type, fn) {
    (this.listeners[type] ??= []).push(fn);
  }
  close() {
    this.readyState = FakeSource.CLOSED;
  }
  // record hands the source a record event, as a browser would.
  record(id, data, type = "message") {
    const e = { lastEventId: id, data, type };
    if (type === "message") {
      this.onmessage(e);
    } else {
      for (const fn of this.listeners[type] ?? []) fn(e);
    }
  }
}

const store = new Map();
globalThis.sessionStorage = {
  getItem: (k) => (store.has(k) ? store.get(k) : null),
  setItem: (k, v) => store.set(k, String(v)),
};
globalThis.EventSource = FakeSource;

const checks = {
  // Topics named like Object's own properties are topics like any other.
  prototypeNames() {
    const out = parseTopicsID("v1:zeta~0-1,__proto__~0-2,constructor~0-3.1-4,hasOwnProperty~");
    assert.notEqual(out, null, "an id naming constructor and __proto__ was refused");
    assert.deepEqual(Object.keys(out), ["zeta", "__proto__", "constructor", "hasOwnProperty"]);
    assert.equal(Object.getPrototypeOf(out), Object.prototype, "__proto__ changed the result's prototype");
    assert.deepEqual(out["__proto__"], { 0: 2 });
    assert.deepEqual(out.constructor, { 0: 3, 1: 4 });
    assert.deepEqual(out.hasOwnProperty, {});
    assert.equal(parseTopicsID("v1:a~0-1,constructor~0-1,constructor~0-2"), null, "a topic twice");
    assert.equal(parseTopicsID("v1:constructor~0-1,constructor~0-2"), null, "a topic twice, first");
  },

  // The opening id, which the gateway repeats as an "opened" event when asked (opened=1), is the position: a
  // reload before the first record resumes from it. It is not a record.
  openingStored() {
    const records = [];
    const s = connect("https://gw.example/streams/prices?from=latest", { onRecord: (r) => records.push(r) });
    const src = FakeSource.opened.at(-1);
    assert.equal(src.url.searchParams.get("opened"), "1", "the stream was not opened with opened=1");
    src.record("v1:0-41.1-9", '{"id":"v1:0-41.1-9"}', "opened");
    assert.equal(s.id, "v1:0-41.1-9");
    s.close();
    assert.deepEqual(records, [], "the opened event was handed over as a record");
    connect("https://gw.example/streams/prices?from=latest").close();
    assert.equal(FakeSource.opened.at(-1).url.searchParams.get("last_event_id"), "v1:0-41.1-9", "a reload before the first record did not resume from the opening id");
  },

  // Two streams of one path with other parameters keep their own positions; the position in the URL is not
  // part of the key.
  storageKeyHasQuery() {
    assert.equal(defaultStorageKey(new URL("https://gw.example/streams/orders?key=a&last_event_id=v1:0-1#x")), "ssegate:https://gw.example/streams/orders?key=a");
    const a = connect("https://gw.example/streams/orders?key=a");
    FakeSource.opened.at(-1).record("v1:0-7", "{}");
    a.close();
    const b = connect("https://gw.example/streams/orders?key=b");
    const bSource = FakeSource.opened.at(-1);
    b.close();
    assert.equal(bSource.url.searchParams.get("last_event_id"), null, "key=b resumed from key=a's position");
    const again = connect("https://gw.example/streams/orders?key=a");
    again.close();
    assert.equal(FakeSource.opened.at(-1).url.searchParams.get("last_event_id"), "v1:0-7", "key=a did not resume from its position");
  },
};

let failed = 0;
for (const [name, check] of Object.entries(checks)) {
  try {
    check();
    console.log("ok", name);
  } catch (err) {
    failed++;
    console.log("FAIL", name, err.message);
  }
}
process.exit(failed ? 1 : 0);
