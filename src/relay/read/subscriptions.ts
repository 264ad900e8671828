// A connection's subscriptions: opened by REQ within the connection's and the address's limits
// (a REQ with a known id replaces that subscription, NIP-01), ended by CLOSE, by a failed read
// or with the connection. What their filters hold is counted per connection and per address.
import { tally } from "../../policy/ip.ts";
import type { CompiledFilter } from "../../protocol/filter.ts";
import type { Reader } from "../../policy/visibility.ts";
import type { RelayContext } from "../context.ts";
import type { Session, Socket, Subscription } from "../connection/session.ts";

/** A REQ on its way through its stages (relay/read/req.ts handleReq): its subscription and what its EVENT frames begin with. */
export interface OpenReq {
  readonly subId: string;
  readonly sub: Subscription;
  /** `["EVENT",<subId>,` */
  readonly prefix: string;
  /** When the REQ came (performance.now()), for its time to EOSE. */
  readonly started: number;
  /** Who reads, decided at admission: the stored read and the catch-up ask it (policy/visibility.ts). */
  readonly reader: Reader;
}

/**
 * Opens the subscription of a REQ, or returns the refusal when it would take its connection or
 * address over their limits. A subscription of the same id ends either way (NIP-01: the REQ
 * replaces it; refused, the client is told that id is CLOSED); what it held is not counted against
 * the new one. Decided first, then done: the connection's state changes in one place.
 */
export function openSubscription(
  ctx: RelayContext,
  ws: Socket,
  subId: string,
  { filters, reader }: { filters: CompiledFilter[]; reader: Reader },
  started: number,
): OpenReq | string {
  const s = ws.data;
  const sub: Subscription = { filters, bytes: filterBytes(filters), values: valueCount(filters) };
  const refusal = refusalFor(ctx, s, subId, sub);
  closeSubscription(ctx, ws, subId);
  if (refusal) return refusal;
  s.subs.set(subId, sub);
  tally(ctx.filterBytes, s.group, sub.bytes);
  return { subId, sub, prefix: `["EVENT",${JSON.stringify(subId)},`, started, reader };
}

/** Is the REQ's subscription still open (not closed, nor replaced by a REQ of the same id)? */
export const stillOpen = (ws: Socket, req: OpenReq): boolean => !ws.data.closed && ws.data.subs.get(req.subId) === req.sub;

/** Ends the REQ's subscription before it joined the live feed (its answer refused or failed), unless replaced meanwhile. */
export function dropSubscription(ctx: RelayContext, ws: Socket, req: OpenReq): void {
  if (ws.data.subs.get(req.subId) === req.sub) removeSubscription(ctx, ws.data, req.subId);
}

/** Ends a subscription; true if there was one. */
export function closeSubscription(ctx: RelayContext, ws: Socket, subId: string): boolean {
  const sub = removeSubscription(ctx, ws.data, subId);
  if (!sub) return false;
  if (sub.group) ctx.fanout.leave(ws, sub.group);
  return true;
}

export function closeAllSubscriptions(ctx: RelayContext, ws: Socket): void {
  for (const subId of [...ws.data.subs.keys()]) closeSubscription(ctx, ws, subId);
}

function removeSubscription(ctx: RelayContext, s: Session, subId: string): Subscription | undefined {
  const sub = s.subs.get(subId);
  if (!sub) return undefined;
  s.subs.delete(subId);
  tally(ctx.filterBytes, s.group, -sub.bytes);
  return sub;
}

// What a filter holds on the main thread's heap, measured (Bun 1.4, heapStats after a full GC,
// 40,000 filters compiled and filed in the live index as a REQ does): an empty filter ~350 bytes,
// {"kinds":[1]} ~665, one more author ~290 (64 hex characters), one more 12-character tag value
// ~235, a search of two short terms ~400 more, of ten terms ~950 more. A budget in bytes is only
// a bound if each filter is charged about that: charged 64 bytes and its characters, 80,000
// search filters from ten addresses held 170 MiB past their 40 MiB of budgets (issue 36).
/** A compiled filter, its source object and its entry in the live index. */
const FILTER_BYTES = 400;
/** A list (ids, authors, kinds, a tag): the array and its Set. */
const LIST_BYTES = 100;
/** One value of a list: its slot in the array, the Set and the index, plus 2 bytes a character (the string, the index key). */
const VALUE_BYTES = 160;
/** A NIP-50 query: its compiled matcher. */
const SEARCH_BYTES = 200;
/**
 * One term of a search, on top of its characters. Each term is also one more word to look up for
 * every live event that confirms the filter, about what confirming a whole plain filter takes
 * (both ~50-60 ns): so a budget of search filters costs a live event no more than one of plain
 * filters does. Measured with LiveIndex: 30,000 filters of 51 terms cost 75 ms per event, of 2
 * terms or plain 1.9 ms.
 */
const SEARCH_TERM_BYTES = 64;

/** Bytes a subscription's filters hold on the heap (the figures above), what its budgets are counted in. */
function filterBytes(filters: readonly CompiledFilter[]): number {
  let n = 0;
  for (const f of filters) {
    const s = f.source;
    n += FILTER_BYTES;
    if (f.search) {
      n += SEARCH_BYTES + s.search!.length;
      for (const t of f.search.terms) n += SEARCH_TERM_BYTES + t.length;
    }
    for (const v of Object.values(s)) {
      if (!Array.isArray(v)) continue;
      n += LIST_BYTES;
      for (const x of v) n += VALUE_BYTES + (typeof x === "string" ? 2 * x.length : 0);
    }
  }
  return n;
}

/** How many keys a subscription's filters put into the live index (and memory); a search's terms count as values. */
function valueCount(filters: readonly CompiledFilter[]): number {
  let n = 0;
  for (const f of filters) {
    n += (f.ids?.size ?? 0) + (f.authors?.size ?? 0) + (f.kinds?.size ?? 0) + (f.search?.terms.length ?? 0) + 1;
    for (const [, v] of f.tags) n += v.size;
  }
  return n;
}

/** The refusal when a new subscription (replacing `subId`'s, if open) would take its connection or address over a limit. */
function refusalFor(ctx: RelayContext, s: Session, subId: string, sub: Subscription): string | undefined {
  const { limits } = ctx.config;
  const replaced = s.subs.get(subId);
  if (!replaced && s.subs.size >= limits.max_subscriptions)
    return `rate-limited: too many open subscriptions (max ${limits.max_subscriptions})`;
  let values = sub.values;
  let held = sub.bytes;
  for (const other of s.subs.values()) if (other !== replaced) (values += other.values), (held += other.bytes);
  if (values > limits.max_values_per_connection)
    return `rate-limited: subscriptions on this connection would hold more than ${limits.max_values_per_connection} filter values`;
  if (held > limits.max_filter_bytes_per_connection)
    return `rate-limited: subscriptions on this connection would hold more than ${limits.max_filter_bytes_per_connection} bytes of filters`;
  const cap = limits.max_filter_bytes_per_ip;
  const addressHeld = (ctx.filterBytes.get(s.group) ?? 0) - (replaced?.bytes ?? 0);
  if (cap > 0 && addressHeld + sub.bytes > cap)
    return `rate-limited: subscriptions from this address would hold more than ${cap} bytes of filters`;
  return undefined;
}
