// REQ, CLOSE and COUNT: stored events from a snapshot, EOSE, then live events through the
// subscription's group topic, each event once. A REQ's stages are files of their own:
// read/subscriptions.ts, read/stored.ts (the stored events), read/live.ts (catch-up and live).
import { hllOffset } from "../../nips/nip45.ts";
import { compileFilter, type CompiledFilter } from "../../protocol/filter.ts";
import { chargeRate, rateLimitMessage } from "../../policy/rate-limit.ts";
import { ProtocolError } from "../../protocol/reasons.ts";
import { tally } from "../../policy/ip.ts";
import { OVER_BUDGET, queryBudget } from "../connection/budget.ts";
import { filterLimits, groupFilterRefusal, memberRefusal, readerFor, restrictedKinds, type Reader } from "../../policy/visibility.ts";
import { INVITE } from "../../nips/nip43.ts";
import { nowSeconds } from "../../protocol/event.ts";
import type { RelayContext } from "../context.ts";
import { catchUpAndJoin } from "./live.ts";
import { readFailure, storedEvents } from "./stored.ts";
import { dropSubscription, openSubscription } from "./subscriptions.ts";
import { closedFrame, send, type Session, type Socket } from "../connection/session.ts";

/** A request's filters, admitted, with the one reader every stage of it asks (policy/visibility.ts). */
export interface Admitted {
  filters: CompiledFilter[];
  reader: Reader;
}

/**
 * Charges a REQ / COUNT / NEG-OPEN to the rate limits, compiles its filters and applies the
 * read-side auth rules. Returns the filters and the request's reader, or the refusal text (for
 * CLOSED or NEG-ERR).
 */
export function admitFilters(
  ctx: RelayContext,
  s: Session,
  verb: "reqs" | "counts" | "neg_opens",
  rawFilters: unknown[],
): Admitted | string {
  // First: the cheapest check, and a flood of refused requests must still be charged.
  const wait = chargeRate(ctx.config, ctx.rates, verb, s);
  if (wait > 0) return `rate-limited: ${rateLimitMessage(verb, wait)}`;
  if (ctx.config.options.auth === "always" && s.authed.size === 0) return "auth-required: this relay requires authentication";
  let filters: CompiledFilter[];
  try {
    const limits = filterLimits(ctx.config);
    filters = rawFilters.map((f) => compileFilter(f, limits));
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return err.text;
  }
  // [authorization] read = "members" (issue 33): only admitted pubkeys read, DMs to them aside.
  const closed = memberRefusal(ctx, s.authed, filters);
  if (closed) return closed;
  // Asking for DMs by kind needs an identity to show them to; without kinds they are just hidden.
  const restricted = restrictedKinds(ctx.config);
  if (s.authed.size === 0 && filters.some((f) => f.kinds && [...f.kinds].some((k) => restricted.has(k))))
    return "auth-required: authenticate to read direct messages";
  // Asking for a private group's events (NIP-29) needs to be one of its members.
  const refusal = groupFilterRefusal(ctx, s.authed, filters);
  if (refusal) return refusal;
  return { filters, reader: readerFor(ctx, s.authed) };
}

function admit(ctx: RelayContext, ws: Socket, verb: "reqs" | "counts", subId: string, rawFilters: unknown[]): Admitted | undefined {
  const admitted = admitFilters(ctx, ws.data, verb, rawFilters);
  if (typeof admitted !== "string") return admitted;
  send(ws, closedFrame(ctx.metrics, subId, admitted));
  return undefined;
}

/**
 * A REQ, in its stages (docs/architecture.md, the REQ path): its filters admitted, its
 * subscription opened, the snapshot taken, the stored events answered (from memory or the store:
 * relay/read/stored.ts), then the catch-up on what was committed since the snapshot, EOSE, and
 * the live feed (relay/read/live.ts).
 */
export async function handleReq(ctx: RelayContext, ws: Socket, subId: string, rawFilters: unknown[]): Promise<void> {
  const started = performance.now();
  const admitted = admit(ctx, ws, "reqs", subId, rawFilters);
  if (!admitted) return;
  if (ctx.membership && admitted.filters.some((f) => f.kinds?.has(INVITE))) {
    // NIP-43: the relay's invite for this reader (relay/membership.ts), then the normal read.
    const invite = await ctx.membership.inviteFor(admitted.reader);
    if (typeof invite === "string") return send(ws, closedFrame(ctx.metrics, subId, invite));
    send(ws, `["EVENT",${JSON.stringify(subId)},${JSON.stringify(invite)}]`);
  }
  const req = openSubscription(ctx, ws, subId, admitted, started);
  if (typeof req === "string") return send(ws, closedFrame(ctx.metrics, subId, req));
  // The snapshot, taken together: events committed up to here come from the stored answer, later
  // ones from the catch-up, so each is sent once (store/types.ts CommitFeed).
  const storeSeq = ctx.store.lastSeq();
  const feedSeq = ctx.fanout.seq;
  const last = await storedEvents(ctx, ws, req, storeSeq);
  if (last === undefined) return; // closed or replaced meanwhile
  if (typeof last === "string") {
    dropSubscription(ctx, ws, req);
    return send(ws, closedFrame(ctx.metrics, subId, last));
  }
  catchUpAndJoin(ctx, ws, req, feedSeq, last);
}

/** NIP-45: `["COUNT", id, {"count": n}]`, with `hll` for a single filter with a tag condition. */
export async function handleCount(ctx: RelayContext, ws: Socket, subId: string, rawFilters: unknown[]): Promise<void> {
  if (!ctx.config.nips.nip45) return send(ws, closedFrame(ctx.metrics, subId, "error: COUNT is not supported by this relay"));
  const admitted = admit(ctx, ws, "counts", subId, rawFilters);
  if (!admitted) return;
  const { filters, reader } = admitted;
  const s = ws.data;
  const live = filters.filter((f) => !f.neverMatch).map((f) => f.source);
  const offset = filters.length === 1 ? hllOffset(filters[0]!.source) : undefined;
  // Filters that match nothing: answered without a read.
  if (live.length === 0) return sendCount(ws, subId, { count: 0, hll: offset === undefined ? undefined : "00".repeat(256) });
  const busy = tooManyCounts(ctx, s);
  if (busy) return send(ws, closedFrame(ctx.metrics, subId, busy));
  const budget = queryBudget(ctx, s, "count");
  if (!budget) return send(ws, closedFrame(ctx.metrics, subId, OVER_BUDGET));
  s.counts++;
  tally(ctx.counts, s.group, 1);
  let result: { count: number; hll?: string };
  try {
    result = await ctx.store.count(
      {
        filters: live,
        maxSeq: ctx.store.lastSeq(),
        now: ctx.config.nips.nip40 ? nowSeconds() : 0,
        visibility: reader.visibility,
        hllOffset: offset,
      },
      budget,
    );
  } catch (err) {
    return send(ws, closedFrame(ctx.metrics, subId, readFailure(err, "count")));
  } finally {
    s.counts--;
    tally(ctx.counts, s.group, -1);
  }
  sendCount(ws, subId, result);
}

const sendCount = (ws: Socket, subId: string, result: { count: number; hll?: string }) =>
  send(ws, `["COUNT",${JSON.stringify(subId)},${JSON.stringify(result)}]`);

/**
 * The refusal when a COUNT would take its connection or address over the COUNTs they may run at
 * once. Without it a pipeline of COUNTs all started together (a reader interleaves up to 1,000
 * jobs per connection), each admitted by a budget that had not yet been charged for the others.
 */
function tooManyCounts(ctx: RelayContext, s: Session): string | undefined {
  const { max_counts_per_connection: mine, max_counts_per_ip: perIp } = ctx.config.limits;
  if (s.counts >= mine) return `rate-limited: too many COUNTs running on this connection (max ${mine})`;
  if (perIp > 0 && (ctx.counts.get(s.group) ?? 0) >= perIp) return `rate-limited: too many COUNTs running from this address (max ${perIp})`;
  return undefined;
}
