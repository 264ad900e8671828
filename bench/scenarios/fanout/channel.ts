// What the main thread and the receiver threads share: the progress counters (Int32 slots in
// shared memory), the data a receiver starts with, and the messages it sends back.
import type { FailureEntry } from "./failures.ts";
import type { LatencyHist } from "./latency.ts";

/** Int32 slots of the progress array. */
export const P_DONE = 0; // events received by every subscription that should get them
export const P_EOSE = 1; // EOSEs received
export const P_CLOSED = 2; // receiving connections closed by the other side
export const P_BAD = 3; // wrong / unexpected frames
export const P_READY = 4; // connections that finished the websocket upgrade
export const P_RECV = 5; // valid first-time deliveries received
export const P_SIZE = 8;

export interface ReceiverData {
  role: "fanout-receiver";
  thread: number;
  port: number;
  path: string;
  conns: { conn: number; subs: { num: number; slot: number; req: string }[] }[];
  events: number;
  /** Events below this index are the load phase, the rest the probe (separate latency histograms). */
  loadEvents: number;
  json: SharedArrayBuffer; // all event JSON, concatenated
  offsets: SharedArrayBuffer; // Int32Array(events + 1)
  expected: SharedArrayBuffer; // Uint8Array(slots * events): 1 = this subscription must get this event
  counts: SharedArrayBuffer; // Uint8Array(slots * events): deliveries seen (saturating at 255)
  remaining: SharedArrayBuffer; // Int32Array(events): deliveries still to come
  progress: SharedArrayBuffer; // Int32Array(P_SIZE)
  sentAt: SharedArrayBuffer; // Float64Array(events): when the publisher sent it (nowMs())
  lastValid: SharedArrayBuffer; // Float64Array(threads): last first-time valid delivery
}

export interface ReceiverHello {
  type: "tid";
  tid: number;
}

export interface ReceiverReport {
  type: "result";
  /** Latency histograms: load phase, probe phase. */
  lat: [LatencyHist, LatencyHist];
  frames: number;
  bytes: number;
  failures: FailureEntry[];
}
