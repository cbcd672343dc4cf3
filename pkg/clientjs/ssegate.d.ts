// Type declarations of ssegate.js, the client of an ssegate gateway (README.md).

/** A position of a stream of one topic: the last offset the client has in each partition. */
export type Position = Record<number, number>;

/** A position of a stream of several topics: each topic's position. */
export type TopicsPosition = Record<string, Position>;

/** A topic's value format: how a record's data is turned into its value. */
export type ValueFormat = "auto" | "base64" | "text";

/** A value as decodeValue returns it: bytes for base64 data, text for any other. */
export type Value = { bytes: Uint8Array; text?: undefined } | { text: string; bytes?: undefined };

/** A record as onRecord gets it. */
export type StreamRecord = Value & {
  /** The stream's position after this record. */
  id: string;
  /** The record's topic (undefined only when it cannot be told, a stream of several topics with an unreadable id). */
  topic: string | undefined;
  /** "message", "delete" for a tombstone (whose data is the key), or the record's own event type. */
  type: string;
  /** The data as it came. */
  data: string;
  /** WebSocket only: the record's key, as JSON has it (absent without a key). */
  key?: unknown;
  /** WebSocket only: the record's partition. */
  partition?: number;
  /** WebSocket only: the record's offset. */
  offset?: number;
};

/** A partition's part of a resync. */
export interface ResyncPartition {
  partition: number;
  skipped?: number;
  [field: string]: unknown;
}

/** A resync: the position moved past offsets the client will never get. */
export interface Resync {
  id: string;
  topic?: string;
  reason?: string;
  partitions?: ResyncPartition[];
  [field: string]: unknown;
}

/** A from=snapshot stream's snapshot is complete: the cut. */
export interface Live {
  id: string;
  topic?: string;
  [field: string]: unknown;
}

/** With explain=1 in the URL, where a resume came from. */
export interface Resumed {
  /** The position resumed after. */
  id: string;
  source?: "ring" | "kafka";
  from?: string;
  [field: string]: unknown;
}

/** A token-expiring or token-expired event. */
export interface TokenEvent {
  id: string;
  [field: string]: unknown;
}

/** What onError gets. */
export interface StreamError {
  /** True when the stream is not opened again (an HTTP refusal, a WebSocket closed with 1008 or 1009). */
  closed?: boolean;
  /** WebSocket only: the close code. */
  code?: number;
  /** WebSocket only: the close reason. */
  reason?: string;
  /** WebSocket only: the status of the plain HTTP request that tells why a socket was refused. */
  status?: number;
  /** WebSocket only: that answer's error. */
  error?: string;
  /** A renewToken that failed. */
  renewal?: unknown;
}

/** Where the position is kept: sessionStorage, localStorage, or anything with these two methods. */
export interface PositionStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** What connect needs of an EventSource: the WHATWG one, or the eventsource package's. */
export interface EventSourceLike {
  readonly readyState: number;
  onopen: ((ev: any) => any) | null;
  onerror: ((ev: any) => any) | null;
  onmessage: ((ev: any) => any) | null;
  addEventListener(type: string, listener: (ev: any) => any): void;
  close(): void;
}

/** An EventSource class. */
export interface EventSourceClass {
  new (url: string | URL, init?: { withCredentials?: boolean }): EventSourceLike;
  readonly CLOSED?: number;
}

/** What connect needs of a WebSocket: the WHATWG one, or the ws package's. */
export interface WebSocketLike {
  onmessage: ((ev: any) => any) | null;
  onclose: ((ev: any) => any) | null;
  close(code?: number, reason?: string): void;
}

/** A WebSocket class. */
export interface WebSocketClass {
  new (url: string): WebSocketLike;
}

/** The options of connect. */
export interface ConnectOptions {
  /** The storage key of the position (default defaultStorageKey(url): the URL, its query without last_event_id or lastEventId); null keeps none. */
  storageKey?: string | null;
  /** Where the position is kept (default sessionStorage, when there is one); null keeps none. */
  storage?: PositionStorage | null;
  /** The value format, or for several topics an object of formats by topic (others are "auto"). */
  format?: ValueFormat | Record<string, ValueFormat>;
  /** Send cookies cross-origin (EventSource; default true). */
  withCredentials?: boolean;
  /** The records' own event types to listen for besides "message" and "delete" (EventSource). */
  eventTypes?: string[];
  /** "eventsource" (default) or "websocket" (default for a ws: or wss: URL). */
  transport?: "eventsource" | "websocket";
  /** The EventSource class (default globalThis.EventSource). */
  EventSource?: EventSourceClass;
  /** The WebSocket class (default globalThis.WebSocket). */
  WebSocket?: WebSocketClass;
  onRecord?(r: StreamRecord): void;
  onResync?(r: Resync): void;
  onLive?(r: Live): void;
  onResumed?(r: Resumed): void;
  onOpen?(): void;
  onError?(e: StreamError): void;
  /** WebSocket only: the position moved without a record (the open message, a position message). */
  onPosition?(id: string): void;
  /** Called at token-expiring; at token-expired the stream opens again once it has finished. */
  renewToken?(): unknown;
  onTokenExpiring?(r: TokenEvent): void;
  onTokenExpired?(r: TokenEvent): void;
}

/** A stream connect opened. */
export interface Stream {
  /** Stops the stream for good. */
  close(): void;
  /** The stream's position: the last id it got (or the stored one), null before any. */
  readonly id: string | null;
  /** The EventSource or WebSocket in use now. */
  readonly source: EventSourceLike | WebSocketLike | null;
}

/** Opens the stream at url (/streams/{topics} or, with transport "websocket", /ws/{topics}). */
export function connect(url: string | URL, opts?: ConnectOptions): Stream;

/** Decodes a v1 id into {partition: offset}; null for anything else (a compact v2 id included). */
export function parseID(id: unknown): Position | null;

/** The default storage key of a stream's position: "ssegate:" and its URL without last_event_id or lastEventId. */
export function defaultStorageKey(url: string | URL): string;

/** Decodes the id of a stream of several topics into {topic: {partition: offset}}; null for anything else. */
export function parseTopicsID(id: unknown): TopicsPosition | null;

/** A record's value from its data: bytes for "base64:" data (unless format is "text"), else text. */
export function decodeValue(data: string, format?: ValueFormat): Value;
