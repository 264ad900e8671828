// Per-connection state, kept in ws.data. Only relay/ touches ServerWebSocket.
import type { ServerWebSocket } from "bun";
import type { NegentropyServer } from "../../nips/nip77.ts";
import { ipGroup, isPrivateAddress } from "../../policy/ip.ts";
import type { CompiledFilter } from "../../protocol/filter.ts";
import type { Group } from "../fanout/fanout.ts";
import type { NegSessionHandle } from "../../store/types.ts";
import type { RelayMetrics } from "../../observe/metrics.ts";
import type { WireMeter } from "./fd-guard.ts";

export interface Subscription {
  readonly filters: readonly CompiledFilter[];
  /** What its filters hold in bytes, counted against the connection's and the address's budget. */
  readonly bytes: number;
  /** And how many values (ids, authors, tag values), counted against max_values_per_connection. */
  readonly values: number;
  /** Set once the stored events and EOSE are sent and the socket has joined the group's topic. */
  group?: Group;
}

/** A NIP-77 session of this connection (relay/read/neg.ts). */
export interface NegSession {
  /** Set once the items are loaded; undefined while the store is being read. */
  server?: NegentropyServer;
  /** Or the session kept by the store, beside its items (SQLite: in a reader worker). */
  remote?: NegSessionHandle;
  /** Items held, counted against the connection's max_negentropy_items. */
  items: number;
  /** Closes the session when no NEG-MSG came for [limits] negentropy_idle_seconds. */
  idle?: ReturnType<typeof setTimeout>;
}

/**
 * The NEG frames of one id still being handled, in the order received (relay/read/neg.ts): while one
 * waits on the store (a NEG-OPEN reading its items, a NEG-MSG reconciled in a reader worker), the
 * ones after it wait for it, so every answer comes in the order of the messages.
 */
export interface NegLane {
  tail: Promise<void>;
  /** Frames waiting in the lane, and their bytes (bounded per connection). */
  waiting: number;
  bytes: number;
  /** Bumped by a NEG-OPEN or NEG-CLOSE right after a NEG-OPEN: that one is then dropped. */
  epoch: number;
  /** The last frame in the lane is a NEG-OPEN. */
  openLast: boolean;
}

export interface Session {
  readonly id: number;
  readonly ip: string;
  /** The unit of per-address limits: the IP, or its IPv6 /64 (policy/ip.ts), found once. */
  readonly group: string;
  /** Loopback or private (policy/ip.ts isPrivateAddress), found once: per-IP rates may exempt it. */
  readonly local: boolean;
  /** Host header of the upgrade request (for the NIP-42 relay tag check without relay_url). */
  readonly host: string;
  readonly challenge: string;
  /** EVENT frames go out compressed ([network] compression on; ignored unless the client negotiated it). */
  readonly deflate: boolean;
  readonly authed: Set<string>;
  readonly subs: Map<string, Subscription>;
  /** NIP-77 sessions by id (a namespace of their own, apart from REQ ids). */
  readonly neg: Map<string, NegSession>;
  /** NEG frames waiting for an earlier one of the same id (relay/read/neg.ts). */
  readonly negLanes: Map<string, NegLane>;
  /** Query time this connection may still spend (ms, a token bucket) and when it was last refilled. */
  queryBudget: { tokens: number; at: number; estimate?: number; countEstimate?: number };
  /** EVENTs of this connection still verifying or waiting for the writer. */
  inflight: number;
  /** COUNTs of this connection still running (max_counts_per_connection). */
  counts: number;
  /** AUTHs of this connection whose signature is being verified (relay/auth.ts). */
  authPending: number;
  /** AUTHs of this connection refused as rate-limited: past a bound the connection is closed (relay/auth.ts). */
  authRefusals: number;
  /** Reads waiting for the socket to drain (relay/read/stored.ts), woken by Bun's drain callback or the close. */
  drainWaiters: (() => void)[];
  closed: boolean;
  /** Closed by the relay for its address's inflation budget (inflation.ts chargeInflation): not again. */
  inflationCut: boolean;
  /** What arrived whole, for the guard's count of unfinished message bytes (fd-guard.ts). */
  readonly wire: WireMeter;
}

export type Socket = ServerWebSocket<Session>;

let nextId = 1;

export function newSession(ip: string, host: string, deflate = false, wire: Partial<WireMeter> = {}): Session {
  return {
    id: nextId++,
    ip,
    group: ipGroup(ip),
    local: isPrivateAddress(ip),
    host,
    challenge: crypto.randomUUID(),
    deflate,
    authed: new Set(),
    subs: new Map(),
    neg: new Map(),
    negLanes: new Map(),
    queryBudget: { tokens: Number.POSITIVE_INFINITY, at: 0 },
    inflight: 0,
    counts: 0,
    authPending: 0,
    authRefusals: 0,
    drainWaiters: [],
    closed: false,
    inflationCut: false,
    wire: { handshake: 0, counted: 0, messages: 0, control: 0, deflated: false, ...wire },
  };
}

/**
 * Bytes a message took on the wire in one frame: payload, 2..10 bytes of header and the 4-byte
 * mask. A compressed message (permessage-deflate) counts its inflated size: no better is known.
 */
export function wireSize(message: string | Buffer): number {
  const n = typeof message === "string" ? Buffer.byteLength(message) : message.length;
  return n + (n < 126 ? 6 : n < 65536 ? 8 : 14);
}

/** Sends a per-connection frame unless the socket is gone. */
export function send(ws: Socket, frame: string): void {
  if (!ws.data.closed) ws.send(frame);
}

/**
 * Closes a websocket with a reason and, if its peer has not finished the close a moment later,
 * cuts it: what Bun holds for it (an unfinished message) goes with the socket.
 */
export function cutWebsocket(ws: Socket, code: number, reason: string): void {
  ws.close(code, reason);
  setTimeout(() => {
    if (!ws.data.closed) ws.terminate();
  }, 2000).unref();
}

/** Wakes the reads waiting for the socket to drain (relay/read/stored.ts): it drained, or closed. */
export function wakeDrainWaiters(ws: Socket): void {
  const waiters = ws.data.drainWaiters.splice(0);
  for (const wake of waiters) wake();
}

// Frames queued by sendSoon, written at the end of the current microtask checkpoint with one
// cork per socket: an uncorked ws.send is one send() system call per frame.
const soon = new Map<Socket, string[]>();
let soonScheduled = false;

function flushSoon(): void {
  soonScheduled = false;
  for (const [ws, frames] of soon) {
    if (ws.data.closed) continue;
    if (frames.length === 1) ws.send(frames[0]!);
    else
      ws.cork(() => {
        for (const f of frames) ws.send(f);
      });
  }
  soon.clear();
}

/** Like send, but frames for the same socket within one tick go out in one write (OKs of a committed batch). */
export function sendSoon(ws: Socket, frame: string): void {
  if (ws.data.closed) return;
  const q = soon.get(ws);
  if (q) q.push(frame);
  else soon.set(ws, [frame]);
  if (!soonScheduled) {
    soonScheduled = true;
    queueMicrotask(flushSoon);
  }
}

// Every OK, CLOSED and NOTICE is built here right before it is sent: the one place to count
// them, in the relay's own metrics (ctx.metrics).
type Counted = Pick<RelayMetrics, "sent">;
export const okFrame = (m: Counted, id: string, ok: boolean, message: string): string => (
  m.sent.OK++, `["OK",${JSON.stringify(id)},${ok},${JSON.stringify(message)}]`
);
export const closedFrame = (m: Counted, subId: string, message: string): string => (
  m.sent.CLOSED++, `["CLOSED",${JSON.stringify(subId)},${JSON.stringify(message)}]`
);
export const noticeFrame = (m: Counted, message: string): string => (m.sent.NOTICE++, `["NOTICE",${JSON.stringify(message)}]`);
