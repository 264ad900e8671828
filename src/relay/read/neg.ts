// NIP-77 negentropy: NEG-OPEN / NEG-MSG / NEG-CLOSE, ids in a namespace apart from REQ.
// Every refusal or malformed message is a NEG-ERR, after which the session is gone.
import { log } from "../../log.ts";
import { NegentropyError, NegentropyServer, NegentropyStorage } from "../../nips/nip77.ts";
import { tally } from "../../policy/ip.ts";
import { chargeNegTime, hasNegTime, hasQueryTime, OVER_BUDGET, queryBudget } from "../connection/budget.ts";
import { nowSeconds } from "../../protocol/event.ts";
import type { RelayContext } from "../context.ts";
import { readFailure } from "./stored.ts";
import { admitFilters } from "./req.ts";
import type { NegReply, NegSessionHandle } from "../../store/types.ts";
import { send, type NegLane, type NegSession, type Socket } from "../connection/session.ts";

/**
 * A client waits for each reply before its next message. Past MAX_WAITING frames or bytes a
 * frame's payload is dropped and it is refused in its turn; past MAX_REFUSALS the client is cut.
 */
const MAX_WAITING = 64;
const MAX_WAITING_BYTES = 4 * 1024 * 1024;
const MAX_REFUSALS = 1024;
const BACKLOG = "rate-limited: too many negentropy messages in flight";

type Step = (superseded: () => boolean) => void | Promise<void>;
type Kind = "open" | "msg" | "close";

/**
 * Runs a NEG frame's handler in its turn. A NEG-OPEN or NEG-CLOSE right after a NEG-OPEN that is
 * waiting or still reading the store drops that one unanswered, as its reply would be taken for
 * the new session's; NEG-MSGs are answered in order.
 */
function inOrder(ctx: RelayContext, ws: Socket, subId: string, kind: Kind, bytes: number, handle: Step): void {
  const lanes = ws.data.negLanes;
  const lane = lanes.get(subId);
  if (lane?.openLast && kind !== "msg") lane.epoch++;
  const epoch = lane?.epoch ?? 0;
  const superseded = () => (lanes.get(subId)?.epoch ?? 0) !== epoch;
  if (!lane) {
    const first = handle(superseded);
    if (first) follow(lanes, subId, { tail: first, waiting: 0, bytes: 0, epoch: 0, openLast: kind === "open" }, first);
    return;
  }
  let waiting = 0;
  let held = 0;
  for (const l of lanes.values()) (waiting += l.waiting), (held += l.bytes);
  if (waiting >= MAX_REFUSALS) return ws.close(1008, "too many negentropy messages in flight");
  const flood = waiting >= MAX_WAITING || held + bytes > MAX_WAITING_BYTES;
  const step = flood ? () => fail(ctx, ws, subId, BACKLOG) : () => handle(superseded);
  const cost = flood ? 1 : bytes;
  lane.waiting++;
  lane.bytes += cost;
  lane.openLast = kind === "open" && !flood;
  follow(lanes, subId, lane, lane.tail.then(step), cost);
}

/** Makes `step` the lane's tail; `bytes` given: it was a waiting frame of that size. */
function follow(lanes: Map<string, NegLane>, subId: string, lane: NegLane, step: Promise<void>, bytes?: number): void {
  const done: Promise<void> = step
    .catch((err) => log.error("negentropy handler failed:", err))
    .finally(() => {
      if (bytes !== undefined) lane.waiting--, (lane.bytes -= bytes);
      if (lane.tail === done) lanes.delete(subId);
    });
  lane.tail = done;
  lanes.set(subId, lane);
}

const NEG_OVER_BUDGET = "rate-limited: too much negentropy reconciliation, slow down";

/**
 * Hex (checked by isHex) as bytes in a buffer of their own: moved, not copied, to the reader
 * worker that keeps the session (copying big strings between threads is what cost most).
 */
function hexBytes(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  Buffer.from(bytes.buffer).write(hex, "hex");
  return bytes;
}

/** A message that is not even-length lowercase hex is refused before the decoder sees it. */
const isHex = (m: unknown): m is string => typeof m === "string" && m.length % 2 === 0 && !/[^0-9a-f]/.test(m);
/** Reply frames stay well under what clients accept (nostr-tools' default is 60,000 bytes). */
const FRAME_LIMIT = 60_000;
const errFrame = (subId: string, reason: string) => `["NEG-ERR",${JSON.stringify(subId)},${JSON.stringify(reason)}]`;
const msgFrame = (subId: string, hex: string) => `["NEG-MSG",${JSON.stringify(subId)},${JSON.stringify(hex)}]`;

function fail(ctx: RelayContext, ws: Socket, subId: string, reason: string): void {
  closeNeg(ctx, ws, subId);
  send(ws, errFrame(subId, reason));
}

/** Forgets a session and gives its items back to the address's and the relay's budgets. */
export function closeNeg(ctx: RelayContext, ws: Socket, subId: string): void {
  const session = ws.data.neg.get(subId);
  if (!session) return;
  ws.data.neg.delete(subId);
  clearTimeout(session.idle);
  session.remote?.close();
  tally(ctx.negItems, ws.data.group, -session.items);
  ctx.negItemsTotal -= session.items;
}

/** Frame sizes count against the connection's backlog of waiting NEG frames. */
const sizeOf = (message: unknown) => (typeof message === "string" ? message.length : 0);

/**
 * `parsedMs`: the main-thread time the frame took to parse, charged at once to the address's
 * negentropy allowance (with the time handing it on and sending the reply, later): a flood of big
 * frames is paid for by its sender even though the reconciling runs in a reader worker.
 */
export function handleNegOpen(ctx: RelayContext, ws: Socket, subId: string, rawFilter: unknown, message: unknown, parsedMs = 0): void {
  chargeNegTime(ctx, ws.data, parsedMs);
  inOrder(ctx, ws, subId, "open", sizeOf(message) + 256, (superseded) => openNeg(ctx, ws, subId, rawFilter, message, superseded));
}

export function handleNegMsg(ctx: RelayContext, ws: Socket, subId: string, message: unknown, parsedMs = 0): void {
  chargeNegTime(ctx, ws.data, parsedMs);
  inOrder(ctx, ws, subId, "msg", sizeOf(message), () => negMessage(ctx, ws, subId, message));
}

export function handleNegClose(ctx: RelayContext, ws: Socket, subId: string): void {
  inOrder(ctx, ws, subId, "close", 0, () => closeNeg(ctx, ws, subId));
}

/** A NEG-OPEN or NEG-MSG refused before it was parsed (too big): NEG-ERR, in its turn. */
export function refuseNeg(ctx: RelayContext, ws: Socket, subId: string, reason: string, open: boolean): void {
  inOrder(ctx, ws, subId, open ? "close" : "msg", 0, () => fail(ctx, ws, subId, reason));
}

async function openNeg(
  ctx: RelayContext,
  ws: Socket,
  subId: string,
  rawFilter: unknown,
  message: unknown,
  superseded: () => boolean,
): Promise<void> {
  const s = ws.data;
  // Replaced or closed before its turn, or the connection is gone (its sessions were closed).
  if (superseded() || s.closed) return;
  closeNeg(ctx, ws, subId); // reopening an id replaces it
  if (!ctx.config.nips.nip77) return fail(ctx, ws, subId, "error: negentropy is not supported by this relay");
  if (!isHex(message)) return fail(ctx, ws, subId, "invalid: the initial message must be hex");
  if (s.neg.size >= ctx.config.limits.max_subscriptions)
    return fail(ctx, ws, subId, `rate-limited: too many open negentropy sessions (max ${ctx.config.limits.max_subscriptions})`);
  const admitted = admitFilters(ctx, s, "neg_opens", [rawFilter]);
  if (typeof admitted === "string") return fail(ctx, ws, subId, admitted);
  const { filters, reader } = admitted;
  const budget = queryBudget(ctx, s);
  if (!budget) return fail(ctx, ws, subId, OVER_BUDGET);
  const remote = ctx.store.negentropy;
  // The main thread's part (with a store that keeps no sessions, building the index and the
  // replies too) is paid for from the address's negentropy allowance.
  if (!hasNegTime(ctx, s)) {
    budget.onEnd?.(0);
    return fail(ctx, ws, subId, NEG_OVER_BUDGET);
  }
  // One budget of items per connection, however many sessions share it: memory stays bounded.
  let held = 0;
  for (const other of s.neg.values()) held += other.items;
  const { max_negentropy_items, max_negentropy_items_per_ip: perIp, max_negentropy_items_total: total } = ctx.config.limits;
  const ipLeft = perIp > 0 ? perIp - (ctx.negItems.get(s.group) ?? 0) : Number.POSITIVE_INFINITY;
  // Across addresses too: many addresses (IPv6 /64s are cheap) must not hold the relay's memory.
  const relayLeft = total > 0 ? total - ctx.negItemsTotal : Number.POSITIVE_INFINITY;
  const max = Math.min(max_negentropy_items - held, ipLeft, relayLeft);
  if (max <= 0) {
    budget.onEnd?.(0);
    const why =
      relayLeft <= 0
        ? "this relay's open negentropy sessions are at their limit; try again later"
        : `open negentropy sessions already cover ${held} events${ipLeft <= 0 ? " (from this address)" : ""}; close one first`;
    return fail(ctx, ws, subId, `blocked: ${why}`);
  }
  const filter = filters[0]!;
  const job = {
    filter: filter.source,
    max,
    maxSeq: ctx.store.lastSeq(),
    now: ctx.config.nips.nip40 ? nowSeconds() : 0,
    visibility: reader.visibility,
  };
  // Registered while its items are read, so that it counts against max_subscriptions.
  const session: NegSession = { items: 0 };
  s.neg.set(subId, session);
  if (remote && !filter.neverMatch) {
    // The store keeps the session beside its items; NEG-MSGs become reads in its queue.
    let opened: NegSessionHandle;
    try {
      opened = await remote.open(job, hexBytes(message), FRAME_LIMIT, budget);
    } catch (err) {
      return dropped(ctx, ws, subId, session, superseded) ? undefined : fail(ctx, ws, subId, readFailure(err, "negentropy query"));
    }
    if (dropped(ctx, ws, subId, session, superseded)) return opened.close();
    if (opened.overflow) return fail(ctx, ws, subId, `blocked: this query is too big (more than ${max} events)`);
    if (opened.error !== undefined) {
      opened.close();
      return fail(ctx, ws, subId, opened.error);
    }
    session.remote = opened;
    hold(ctx, ws, subId, session, opened.items);
    return send(ws, msgFrame(subId, opened.reply));
  }
  let items;
  try {
    items = filter.neverMatch
      ? { timestamps: new Float64Array(0), ids: new Uint8Array(0), overflow: false }
      : await ctx.store.negentropyItems(job, budget);
  } catch (err) {
    return dropped(ctx, ws, subId, session, superseded) ? undefined : fail(ctx, ws, subId, readFailure(err, "negentropy query"));
  }
  if (dropped(ctx, ws, subId, session, superseded)) return;
  if (items.overflow) return fail(ctx, ws, subId, `blocked: this query is too big (more than ${max} events)`);
  const started = performance.now();
  session.server = new NegentropyServer(NegentropyStorage.fromPacked(items.timestamps, items.ids), FRAME_LIMIT);
  chargeNegTime(ctx, s, performance.now() - started);
  hold(ctx, ws, subId, session, items.timestamps.length);
  reply(ctx, ws, subId, session.server, message);
}

/** After reading: the open was replaced or closed meanwhile, or its connection is gone. */
function dropped(ctx: RelayContext, ws: Socket, subId: string, session: NegSession, superseded: () => boolean): boolean {
  if (ws.data.neg.get(subId) !== session) return true;
  if (!superseded() && !ws.data.closed) return false;
  closeNeg(ctx, ws, subId);
  return true;
}

function hold(ctx: RelayContext, ws: Socket, subId: string, session: NegSession, items: number): void {
  session.items = items;
  tally(ctx.negItems, ws.data.group, items);
  ctx.negItemsTotal += items;
  keepAlive(ctx, ws, subId, session);
}

/**
 * (Re)starts the session's idle clock: a client that opened a session and went quiet holds its
 * items (memory) until then, not until it disconnects. The NEG-ERR goes in the id's turn.
 */
function keepAlive(ctx: RelayContext, ws: Socket, subId: string, session: NegSession): void {
  const seconds = ctx.config.limits.negentropy_idle_seconds;
  if (seconds <= 0) return;
  clearTimeout(session.idle);
  session.idle = setTimeout(() => {
    inOrder(ctx, ws, subId, "close", 0, () => {
      if (ws.data.neg.get(subId) === session && !ws.data.closed) fail(ctx, ws, subId, `closed: no NEG-MSG for ${seconds} seconds`);
    });
  }, seconds * 1000);
  session.idle.unref?.();
}

async function negMessage(ctx: RelayContext, ws: Socket, subId: string, message: unknown): Promise<void> {
  if (ws.data.closed) return; // waited in its lane past the connection's end
  const session = ws.data.neg.get(subId);
  if (!session) return fail(ctx, ws, subId, "closed: no open negentropy session with this id");
  if (!isHex(message)) return fail(ctx, ws, subId, "invalid: the message must be hex");
  keepAlive(ctx, ws, subId, session);
  if (session.remote) {
    // Reconciled where the session lives, as a read: sliced, budgeted, in turn with the others.
    // The main thread's share (the frame's parse, handing it on, sending the reply) is paid for
    // from the address's negentropy allowance.
    if (!hasNegTime(ctx, ws.data)) return fail(ctx, ws, subId, NEG_OVER_BUDGET);
    const budget = queryBudget(ctx, ws.data);
    if (!budget) return fail(ctx, ws, subId, OVER_BUDGET);
    let started = performance.now();
    let answer: NegReply;
    try {
      const pending = session.remote.message(hexBytes(message), budget);
      chargeNegTime(ctx, ws.data, performance.now() - started);
      answer = await pending;
    } catch (err) {
      answer = { error: readFailure(err, "negentropy reconciliation") };
    }
    if (answer.error !== undefined) return fail(ctx, ws, subId, answer.error);
    started = performance.now();
    send(ws, msgFrame(subId, answer.reply));
    return chargeNegTime(ctx, ws.data, performance.now() - started);
  }
  // Reconciliation on the main thread (a store that keeps no sessions) is paid for from the query
  // budget and from a small per-address allowance of main-thread time, so a loop of NEG-MSGs
  // cannot hold the event loop that every other client waits on.
  if (!hasQueryTime(ctx, ws.data)) return fail(ctx, ws, subId, OVER_BUDGET);
  if (!hasNegTime(ctx, ws.data)) return fail(ctx, ws, subId, NEG_OVER_BUDGET);
  reply(ctx, ws, subId, session.server!, message);
}

function reply(ctx: RelayContext, ws: Socket, subId: string, server: NegentropyServer, message: string): void {
  const started = performance.now();
  try {
    send(ws, msgFrame(subId, server.reconcile(message)));
  } catch (err) {
    if (!(err instanceof NegentropyError)) throw err;
    fail(ctx, ws, subId, `invalid: ${err.message}`);
  } finally {
    chargeNegTime(ctx, ws.data, performance.now() - started);
  }
}
