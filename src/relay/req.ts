// REQ, CLOSE and COUNT: stored events from a snapshot, EOSE, then live events through the
// subscription's group topic, each event once.
import { compileFilter, type CompiledFilter } from "../protocol/filter.ts";
import { ProtocolError } from "../protocol/reasons.ts";
import type { RelayContext } from "./context.ts";
import { closedFrame, send, type Socket, type Subscription } from "./session.ts";

export async function handleReq(ctx: RelayContext, ws: Socket, subId: string, rawFilters: unknown[]): Promise<void> {
  const s = ws.data;
  const { limits, options } = ctx.config;
  if (options.require_auth && s.authed.size === 0) return send(ws, closedFrame(subId, "auth-required: this relay requires authentication"));
  let filters: CompiledFilter[];
  try {
    filters = rawFilters.map((f) => compileFilter(f, { maxValues: limits.max_filter_values }));
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return send(ws, closedFrame(subId, err.text));
  }
  // A REQ with a known id replaces that subscription (NIP-01).
  if (!closeSubscription(ctx, ws, subId) && s.subs.size >= limits.max_subscriptions)
    return send(ws, closedFrame(subId, `rate-limited: too many open subscriptions (max ${limits.max_subscriptions})`));

  const sub: Subscription = { filters };
  s.subs.set(subId, sub);
  const perFilter = filters.map((f) => (f.neverMatch ? 0 : Math.min(f.limit ?? limits.default_limit, limits.max_limit)));
  // The snapshot: events committed up to here come from the store, later ones from the ring.
  const maxSeq = ctx.store.lastSeq();
  const fanoutSeq = ctx.fanout.seq;
  let stored: string[] = [];
  if (perFilter.some((n) => n > 0)) {
    try {
      stored = await ctx.store.query({ filters: filters.map((f) => f.source), limits: perFilter, maxSeq });
    } catch (err) {
      console.error("query failed:", err);
      if (s.subs.get(subId) === sub) s.subs.delete(subId);
      return send(ws, closedFrame(subId, "error: could not run the query"));
    }
  }
  if (s.closed || s.subs.get(subId) !== sub) return; // closed or replaced meanwhile

  const prefix = `["EVENT",${JSON.stringify(subId)},`;
  ws.cork(() => {
    for (const json of stored) ws.send(`${prefix}${json}]`);
    const { events, complete } = ctx.fanout.recent(fanoutSeq, filters);
    if (!complete) console.warn(`subscription ${subId}: live events during a slow query overflowed the catch-up ring`);
    for (const r of events) ws.send(`${prefix}${r.json}]`);
    ws.send(`["EOSE",${JSON.stringify(subId)}]`);
    sub.group = ctx.fanout.acquire(subId, filters);
    ws.subscribe(sub.group.topic);
  });
}

/** Ends a subscription; true if there was one. */
export function closeSubscription(ctx: RelayContext, ws: Socket, subId: string): boolean {
  const sub = ws.data.subs.get(subId);
  if (!sub) return false;
  ws.data.subs.delete(subId);
  if (sub.group) {
    if (!ws.data.closed) ws.unsubscribe(sub.group.topic);
    ctx.fanout.release(sub.group);
  }
  return true;
}

export function closeAllSubscriptions(ctx: RelayContext, ws: Socket): void {
  for (const subId of [...ws.data.subs.keys()]) closeSubscription(ctx, ws, subId);
}
