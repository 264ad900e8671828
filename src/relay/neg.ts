// NIP-77 negentropy: NEG-OPEN / NEG-MSG / NEG-CLOSE, ids in a namespace apart from REQ.
// Every refusal or malformed message is a NEG-ERR, after which the session is gone.
import { NegentropyError, NegentropyServer, NegentropyStorage } from "../nips/nip77.ts";
import { tally } from "../policy/ip.ts";
import { chargeNegTime, hasNegTime, hasQueryTime, OVER_BUDGET, queryBudget } from "./budget.ts";
import { visibilityFor } from "../policy/visibility.ts";
import { nowSeconds } from "../protocol/event.ts";
import type { RelayContext } from "./context.ts";
import { admitFilters, readFailure } from "./req.ts";
import { send, type NegSession, type Socket } from "./session.ts";

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
  tally(ctx.negItems, ws.data.group, -session.items);
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
  const perIp = ctx.config.limits.max_negentropy_items_per_ip;
  const ipLeft = perIp > 0 ? perIp - (ctx.negItems.get(s.group) ?? 0) : Number.POSITIVE_INFINITY;
  const max = Math.min(ctx.config.limits.max_negentropy_items - held, ipLeft);
  if (max <= 0) {
    budget.onEnd?.(0);
    return fail(ctx, ws, subId, `blocked: open negentropy sessions already cover ${held} events${ipLeft <= 0 ? " (from this address)" : ""}; close one first`);
  }
  const session: NegSession = { items: 0 };
  s.neg.set(subId, session);
  let items;
  try {
    items = filters[0]!.neverMatch
      ? { timestamps: new Float64Array(0), ids: new Uint8Array(0), overflow: false }
      : await ctx.store.negentropyItems({
          filter: filters[0]!.source,
          max,
          maxSeq: ctx.store.lastSeq(),
          now: ctx.config.nips.nip40 ? nowSeconds() : 0,
          visibility: visibilityFor(ctx.config, s.authed),
        }, budget);
  } catch (err) {
    return fail(ctx, ws, subId, readFailure(err, "negentropy query"));
  }
  if (s.closed || s.neg.get(subId) !== session) return; // closed or replaced meanwhile
  if (items.overflow) return fail(ctx, ws, subId, `blocked: this query is too big (more than ${max} events)`);
  session.items = items.timestamps.length;
  tally(ctx.negItems, s.group, session.items);
  const started = performance.now();
  session.server = new NegentropyServer(NegentropyStorage.fromPacked(items.timestamps, items.ids), FRAME_LIMIT);
  chargeNegTime(ctx, s, performance.now() - started);
  reply(ctx, ws, subId, session.server, message);
}

export function handleNegMsg(ctx: RelayContext, ws: Socket, subId: string, message: unknown): void {
  const session = ws.data.neg.get(subId);
  if (!session?.server) return fail(ctx, ws, subId, "closed: no open negentropy session with this id");
  if (!isHex(message)) return fail(ctx, ws, subId, "invalid: the message must be hex");
  // Reconciliation runs on the main thread: it is paid for from the query budget and from a
  // small per-address allowance of main-thread time, so a loop of NEG-MSGs cannot hold the
  // event loop that every other client waits on.
  if (!hasQueryTime(ctx, ws.data)) return fail(ctx, ws, subId, OVER_BUDGET);
  if (!hasNegTime(ctx, ws.data)) return fail(ctx, ws, subId, NEG_OVER_BUDGET);
  reply(ctx, ws, subId, session.server, message);
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
