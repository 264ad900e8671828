// NIP-77 negentropy: NEG-OPEN / NEG-MSG / NEG-CLOSE, ids in a namespace apart from REQ.
// Every refusal or malformed message is a NEG-ERR, after which the session is gone.
import { NegentropyError, NegentropyServer, NegentropyStorage } from "../nips/nip77.ts";
import { ipGroup } from "../policy/ip.ts";
import { chargeNegTime, hasNegTime, hasQueryTime, OVER_BUDGET, queryBudget } from "./budget.ts";
import { nowSeconds, readFailure, visibilityFor, type RelayContext } from "./context.ts";
import { admitFilters } from "./req.ts";
import type { NegSessionHandle } from "../store/types.ts";
import { send, type Socket } from "./session.ts";

export interface NegSession {
  /** Set once the items are loaded; undefined while the store is being read. */
  server?: NegentropyServer;
  /** Or the session kept by the store, beside its items (SQLite: in a reader worker). */
  remote?: NegSessionHandle;
  /** Items held, counted against the connection's max_negentropy_items. */
  items: number;
  /** Closed (NEG-CLOSE, replaced, the connection gone), or ended by a NEG-ERR. */
  closed: boolean;
  failed: boolean;
  /** The last NEG-MSG of a store-kept session in progress: the next waits for it. */
  tail: Promise<void>;
}

const NEG_OVER_BUDGET = "rate-limited: too much negentropy reconciliation, slow down";

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

/** Forgets a session and gives its items back to the address's budget. */
export function closeNeg(ctx: RelayContext, ws: Socket, subId: string): void {
  const session = ws.data.neg.get(subId);
  if (!session) return;
  ws.data.neg.delete(subId);
  session.closed = true;
  // Messages received before the close are still answered: let the session go after them.
  if (session.remote) void session.tail.then(() => session.remote!.close());
  if (session.items === 0) return;
  const g = ipGroup(ws.data.ip);
  const left = (ctx.negItems.get(g) ?? 0) - session.items;
  if (left > 0) ctx.negItems.set(g, left);
  else ctx.negItems.delete(g);
}

export async function handleNegOpen(ctx: RelayContext, ws: Socket, subId: string, rawFilter: unknown, message: unknown): Promise<void> {
  const s = ws.data;
  closeNeg(ctx, ws, subId); // reopening an id replaces it
  if (!ctx.config.nips.nip77) return fail(ctx, ws, subId, "error: negentropy is not supported by this relay");
  if (!isHex(message)) return fail(ctx, ws, subId, "invalid: the initial message must be hex");
  if (s.neg.size >= ctx.config.limits.max_subscriptions)
    return fail(ctx, ws, subId, `rate-limited: too many open negentropy sessions (max ${ctx.config.limits.max_subscriptions})`);
  const filters = admitFilters(ctx, s, "neg_opens", [rawFilter]);
  if (typeof filters === "string") return fail(ctx, ws, subId, filters);
  const budget = queryBudget(ctx, s);
  if (!budget) return fail(ctx, ws, subId, OVER_BUDGET);
  // Building the session's index and the first reply run on the main thread, as NEG-MSG does.
  if (!hasNegTime(ctx, s)) {
    budget.onEnd?.(0);
    return fail(ctx, ws, subId, NEG_OVER_BUDGET);
  }
  // One budget of items per connection, however many sessions share it: memory stays bounded.
  let held = 0;
  for (const other of s.neg.values()) held += other.items;
  const group = ipGroup(s.ip);
  const perIp = ctx.config.limits.max_negentropy_items_per_ip;
  const ipLeft = perIp > 0 ? perIp - (ctx.negItems.get(group) ?? 0) : Number.POSITIVE_INFINITY;
  const max = Math.min(ctx.config.limits.max_negentropy_items - held, ipLeft);
  if (max <= 0) {
    budget.onEnd?.(0);
    return fail(ctx, ws, subId, `blocked: open negentropy sessions already cover ${held} events${ipLeft <= 0 ? " (from this address)" : ""}; close one first`);
  }
  const session: NegSession = { items: 0, closed: false, failed: false, tail: Promise.resolve() };
  s.neg.set(subId, session);
  const job = { filter: filters[0]!.source, max, maxSeq: ctx.store.lastSeq(), now: ctx.config.nips.nip40 ? nowSeconds() : 0, visibility: visibilityFor(ctx.config, s) };
  if (ctx.store.negentropyOpen && !filters[0]!.neverMatch) {
    // The store keeps the session beside its items; NEG-MSGs become reads in its queue.
    let opened: NegSessionHandle;
    try {
      opened = await ctx.store.negentropyOpen(job, message, FRAME_LIMIT, budget);
    } catch (err) {
      if (s.neg.get(subId) === session) fail(ctx, ws, subId, readFailure(err, "negentropy query"));
      return;
    }
    if (s.closed || s.neg.get(subId) !== session) return opened.close(); // closed or replaced meanwhile
    if (opened.overflow) return fail(ctx, ws, subId, `blocked: this query is too big (more than ${max} events)`);
    if (opened.error !== undefined) return fail(ctx, ws, subId, opened.error);
    session.remote = opened;
    session.items = opened.items;
    ctx.negItems.set(group, (ctx.negItems.get(group) ?? 0) + session.items);
    return send(ws, msgFrame(subId, opened.reply!));
  }
  let items;
  try {
    items = filters[0]!.neverMatch
      ? { timestamps: new Float64Array(0), ids: new Uint8Array(0), overflow: false }
      : await ctx.store.negentropyItems(job, budget);
  } catch (err) {
    return fail(ctx, ws, subId, readFailure(err, "negentropy query"));
  }
  if (s.closed || s.neg.get(subId) !== session) return; // closed or replaced meanwhile
  if (items.overflow) return fail(ctx, ws, subId, `blocked: this query is too big (more than ${max} events)`);
  session.items = items.timestamps.length;
  ctx.negItems.set(group, (ctx.negItems.get(group) ?? 0) + session.items);
  const started = performance.now();
  session.server = new NegentropyServer(NegentropyStorage.fromPacked(items.timestamps, items.ids), FRAME_LIMIT);
  chargeNegTime(ctx, s, performance.now() - started);
  reply(ctx, ws, subId, session.server!, message);
}

export async function handleNegMsg(ctx: RelayContext, ws: Socket, subId: string, message: unknown): Promise<void> {
  const session = ws.data.neg.get(subId);
  if (!session?.server && !session?.remote) return fail(ctx, ws, subId, "closed: no open negentropy session with this id");
  if (session.remote) {
    // One message of a session at a time, answered in order (a quick refusal must not overtake
    // the reply to an earlier message).
    const run = session.tail.then(() => remoteMessage(ctx, ws, subId, session, message));
    session.tail = run.catch(() => {});
    return run;
  }
  if (!isHex(message)) return fail(ctx, ws, subId, "invalid: the message must be hex");
  // Reconciliation runs on the main thread: it is paid for from the query budget and from a
  // small per-address allowance of main-thread time, so a loop of NEG-MSGs cannot hold the
  // event loop that every other client waits on.
  if (!hasQueryTime(ctx, ws.data)) return fail(ctx, ws, subId, OVER_BUDGET);
  if (!hasNegTime(ctx, ws.data)) return fail(ctx, ws, subId, NEG_OVER_BUDGET);
  reply(ctx, ws, subId, session.server!, message);
}

async function remoteMessage(ctx: RelayContext, ws: Socket, subId: string, session: NegSession, message: unknown): Promise<void> {
  const refuse = (reason: string) => {
    session.failed = true;
    if (ws.data.neg.get(subId) === session) closeNeg(ctx, ws, subId);
    send(ws, errFrame(subId, reason));
  };
  // After a NEG-ERR the session is over: what the client sent before hearing of it is refused.
  if (session.failed) return send(ws, errFrame(subId, "closed: no open negentropy session with this id"));
  if (!isHex(message)) return refuse("invalid: the message must be hex");
  {
    // Reconciled where the session lives, as a read: sliced, budgeted, in turn with the others.
    // Every message received is answered as if at once: a NEG-CLOSE or a new NEG-OPEN of the
    // same id that arrives meanwhile takes effect after it (the session is kept until then).
    const budget = queryBudget(ctx, ws.data);
    if (!budget) return refuse(OVER_BUDGET);
    let answer: { reply?: string; error?: string };
    try {
      answer = await session.remote!.message(message, budget);
    } catch (err) {
      answer = { error: readFailure(err, "negentropy reconciliation") };
    }
    if (answer.error === undefined) return send(ws, msgFrame(subId, answer.reply!));
    // After NEG-ERR the session is gone (if it is still the one open under this id).
    refuse(answer.error);
  }
}

export function handleNegClose(ctx: RelayContext, ws: Socket, subId: string): void {
  closeNeg(ctx, ws, subId);
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
