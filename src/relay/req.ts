// REQ, CLOSE and COUNT: stored events from a snapshot, EOSE, then live events through the
// subscription's group topic, each event once.
import { hllOffset } from "../nips/nip45.ts";
import { compileFilter, type CompiledFilter } from "../protocol/filter.ts";
import { chargeRate, rateLimitMessage } from "../policy/rate-limit.ts";
import { ProtocolError } from "../protocol/reasons.ts";
import { tally } from "../policy/ip.ts";
import { OVER_BUDGET, queryBudget } from "./budget.ts";
import { canRead, filterLimits, restrictedKinds, visibilityFor } from "../policy/visibility.ts";
import { nowSeconds } from "../protocol/event.ts";
import {
  QueryTimeoutError,
  ReaderBusyError,
  ReadStoppedError,
  StoreClosedError,
  type StateMark,
  type StoreChanges,
} from "../store/types.ts";
import type { RelayContext } from "./context.ts";
import type { MemoryAnswer, MemoryQuery } from "./fanout.ts";
import { closedFrame, send, type Session, type Socket, type Subscription } from "./session.ts";

/**
 * Charges a REQ / COUNT / NEG-OPEN to the rate limits, compiles its filters and applies the
 * read-side auth rules. Returns the filters, or the refusal text (for CLOSED or NEG-ERR).
 */
export function admitFilters(
  ctx: RelayContext,
  s: Session,
  verb: "reqs" | "counts" | "neg_opens",
  rawFilters: unknown[],
): CompiledFilter[] | string {
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
  // Asking for DMs by kind needs an identity to show them to; without kinds they are just hidden.
  const restricted = restrictedKinds(ctx.config);
  if (s.authed.size === 0 && filters.some((f) => f.kinds && [...f.kinds].some((k) => restricted.has(k))))
    return "auth-required: authenticate to read direct messages";
  return filters;
}

function admit(ctx: RelayContext, ws: Socket, verb: "reqs" | "counts", subId: string, rawFilters: unknown[]): CompiledFilter[] | undefined {
  const filters = admitFilters(ctx, ws.data, verb, rawFilters);
  if (typeof filters !== "string") return filters;
  send(ws, closedFrame(ctx.metrics, subId, filters));
  return undefined;
}

export async function handleReq(ctx: RelayContext, ws: Socket, subId: string, rawFilters: unknown[]): Promise<void> {
  const started = performance.now();
  const s = ws.data;
  const { limits } = ctx.config;
  const filters = admit(ctx, ws, "reqs", subId, rawFilters);
  if (!filters) return;
  // A REQ with a known id replaces that subscription (NIP-01).
  if (!closeSubscription(ctx, ws, subId) && s.subs.size >= limits.max_subscriptions)
    return send(ws, closedFrame(ctx.metrics, subId, `rate-limited: too many open subscriptions (max ${limits.max_subscriptions})`));
  const bytes = filterBytes(filters);
  const values = valueCount(filters);
  const tooMuch = overFilterBudget(ctx, s, values, bytes);
  if (tooMuch) return send(ws, closedFrame(ctx.metrics, subId, tooMuch));

  const perFilter = clampLimits(
    filters.map((f) => (f.neverMatch ? 0 : Math.min(f.limit ?? limits.default_limit, limits.max_limit))),
    limits.max_events_per_req,
  );
  const reads = perFilter.some((n) => n > 0);
  const now = ctx.config.nips.nip40 ? nowSeconds() : 0;
  // The snapshot: events committed up to here come from the store, later ones from the ring.
  const maxSeq = ctx.store.lastSeq();
  const fanoutSeq = ctx.fanout.seq;
  const prefix = `["EVENT",${JSON.stringify(subId)},`;
  // Or all of them from memory, when it holds the store's answer (no reader, no budget).
  const single: MemoryQuery | undefined =
    reads && filters.length === 1
      ? { f: filters[0]!, limit: perFilter[0]!, now, restricted: restrictedKinds(ctx.config), anonymous: s.authed.size === 0 }
      : undefined;
  const fromRing = memoryAnswer(ctx, single);
  // A stored answer memory can keep true is kept for the next such REQ.
  const fill = fromRing ? undefined : fillMark(ctx, single);
  const served: string[] | undefined = fill ? [] : undefined;
  const budget = reads && !fromRing ? queryBudget(ctx, s) : undefined;
  if (reads && !fromRing && !budget) return send(ws, closedFrame(ctx.metrics, subId, OVER_BUDGET));
  const sub: Subscription = { filters, bytes, values };
  addSubscription(ctx, s, subId, sub);
  const live = () => !s.closed && s.subs.get(subId) === sub;
  let sent = 0;
  // The last batch of stored events, sent with the catch-up and the EOSE in one write.
  let last: readonly string[] = [];
  if (fromRing) {
    last = fromRing.map((json) => `${prefix}${json}]`);
  } else if (reads) {
    // Stored events stream in batches: each is sent before the next is read, and while the
    // socket holds more than its share of unsent bytes the read waits (docs/operations.md).
    const batches = ctx.store.query(
      {
        filters: filters.map((f) => f.source),
        limits: perFilter,
        maxSeq,
        now,
        visibility: visibilityFor(ctx.config, s.authed),
        frame: prefix,
      },
      budget,
    );
    try {
      for await (const rows of batches) {
        if (!live()) break;
        if (rows.last) {
          last = rows;
          break;
        }
        served?.push(...rows);
        ws.cork(() => {
          for (const frame of rows) ws.send(frame, s.deflate);
        });
        sent += rows.length;
        if (ws.getBufferedAmount() > highWater(ctx)) await drained(ws);
        if (!live()) break;
      }
    } catch (err) {
      if (s.subs.get(subId) === sub) removeSubscription(ctx, s, subId);
      ctx.metrics.sent.EVENT += sent;
      return send(ws, closedFrame(ctx.metrics, subId, readFailure(err, "query")));
    }
  }
  ctx.metrics.sent.EVENT += sent;
  if (!live()) return; // closed or replaced meanwhile
  if (fill) keepAnswer(ctx, single!, fill, [...served!, ...last], prefix.length);

  ws.cork(() => {
    for (const frame of last) ws.send(frame, s.deflate);
    ctx.metrics.sent.EVENT += last.length;
    const { events, complete } = ctx.fanout.recent(fanoutSeq, filters);
    if (!complete) console.warn(`subscription ${subId}: live events during a slow query overflowed the catch-up ring`);
    let caughtUp = 0;
    const restricted = restrictedKinds(ctx.config);
    for (const r of events) {
      // r.event parses the JSON: only a restricted kind needs it here.
      if (restricted.has(r.kind) && !canRead(ctx.config, s.authed, r.event)) continue;
      ws.send(`${prefix}${r.json}]`, s.deflate);
      caughtUp++;
    }
    ws.send(`["EOSE",${JSON.stringify(subId)}]`);
    ctx.metrics.sent.EVENT += caughtUp;
    ctx.metrics.sent.EOSE++;
    ctx.metrics.reqSeconds.observe((performance.now() - started) / 1000);
    sub.group = ctx.fanout.join(ws, subId, filters);
  });
}

/**
 * A single filter's stored events from memory (relay/fanout.ts answer), when the store vouches
 * that it told every change.
 */
function memoryAnswer(ctx: RelayContext, q: MemoryQuery | undefined): string[] | undefined {
  if (!q || !ctx.store.changes?.known()) return undefined;
  const answer = ctx.fanout.answer(q);
  if (!answer) return undefined;
  ctx.metrics.memoryAnswers[answer.from]++;
  return answer.events;
}

/** Memory's answer that would keep a stored read's answer, and the store's state before the read (Store.changes.mark). */
interface Keeping {
  into: MemoryAnswer["from"];
  mark: StateMark;
  /** The store's, which took the mark. */
  changes: StoreChanges;
}

function fillMark(ctx: RelayContext, q: MemoryQuery | undefined): Keeping | undefined {
  const changes = ctx.store.changes;
  if (!q || !changes?.known()) return undefined;
  // Cheap (no read transaction), and a read while the writer works does not count as an ask.
  const mark = changes.mark();
  const into = mark && ctx.fanout.wants(q);
  return into && mark && { into, mark, changes };
}

/** Keeps a stored answer in memory when nothing was committed while it was read. */
function keepAnswer(ctx: RelayContext, q: MemoryQuery, fill: Keeping, frames: readonly string[], prefix: number): void {
  if (!fill.changes.unchangedSince(fill.mark) || !fill.changes.known()) return;
  ctx.fanout.fill(
    q,
    fill.into,
    frames.map((frame) => frame.slice(prefix, -1)),
  );
}

/** Unsent bytes above which a REQ stops reading stored events until the socket drains. */
const highWater = (ctx: RelayContext) => Math.min(1024 * 1024, ctx.config.limits.max_pending_bytes / 4);

/** Resolves when the socket has drained (Bun's drain callback) or closed. */
function drained(ws: Socket): Promise<void> {
  return new Promise((resolve) => ws.data.drainWaiters.push(resolve));
}

/** What one term of a NIP-50 search is charged, on top of its characters (filterBytes). */
const SEARCH_TERM_BYTES = 64;

/**
 * Bytes a subscription's filters hold: every value, with a little for each entry's overhead. A
 * NIP-50 search holds its query and its terms, and each term is one more word to look up for
 * every live event that confirms the filter, about what confirming a whole plain filter takes
 * (both ~50-60 ns): a term is charged a filter's overhead, so that a budget of search filters
 * costs a live event no more than one of plain filters does. Measured with LiveIndex: 30,000
 * filters of 51 terms cost 75 ms per event, of 2 terms or plain 1.9 ms.
 */
function filterBytes(filters: readonly CompiledFilter[]): number {
  let n = 0;
  for (const f of filters) {
    const s = f.source;
    n += 64;
    if (f.search) {
      n += s.search!.length;
      for (const t of f.search.terms) n += SEARCH_TERM_BYTES + t.length;
    }
    for (const [key, v] of Object.entries(s))
      if (Array.isArray(v)) for (const x of v) n += 16 + (typeof x === "string" ? x.length + key.length : 8);
  }
  return n;
}

/** The refusal when a new subscription would take its connection or address over its filter budget. */
function overFilterBudget(ctx: RelayContext, s: Session, values: number, bytes: number): string | undefined {
  const { limits } = ctx.config;
  let held = bytes;
  for (const other of s.subs.values()) (values += other.values), (held += other.bytes);
  if (values > limits.max_values_per_connection)
    return `rate-limited: subscriptions on this connection would hold more than ${limits.max_values_per_connection} filter values`;
  if (held > limits.max_filter_bytes_per_connection)
    return `rate-limited: subscriptions on this connection would hold more than ${limits.max_filter_bytes_per_connection} bytes of filters`;
  const cap = limits.max_filter_bytes_per_ip;
  if (cap > 0 && (ctx.filterBytes.get(s.group) ?? 0) + bytes > cap)
    return `rate-limited: subscriptions from this address would hold more than ${cap} bytes of filters`;
  return undefined;
}

function addSubscription(ctx: RelayContext, s: Session, subId: string, sub: Subscription): void {
  s.subs.set(subId, sub);
  tally(ctx.filterBytes, s.group, sub.bytes);
}

function removeSubscription(ctx: RelayContext, s: Session, subId: string): Subscription | undefined {
  const sub = s.subs.get(subId);
  if (!sub) return undefined;
  s.subs.delete(subId);
  tally(ctx.filterBytes, s.group, -sub.bytes);
  return sub;
}

/** NIP-45: `["COUNT", id, {"count": n}]`, with `hll` for a single filter with a tag condition. */
export async function handleCount(ctx: RelayContext, ws: Socket, subId: string, rawFilters: unknown[]): Promise<void> {
  if (!ctx.config.nips.nip45) return send(ws, closedFrame(ctx.metrics, subId, "error: COUNT is not supported by this relay"));
  const filters = admit(ctx, ws, "counts", subId, rawFilters);
  if (!filters) return;
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
        visibility: visibilityFor(ctx.config, s.authed),
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

/** How many keys a subscription's filters put into the live index (and memory); a search's terms count as values. */
function valueCount(filters: readonly CompiledFilter[]): number {
  let n = 0;
  for (const f of filters) {
    n += (f.ids?.size ?? 0) + (f.authors?.size ?? 0) + (f.kinds?.size ?? 0) + (f.search?.terms.length ?? 0) + 1;
    for (const [, v] of f.tags) n += v.size;
  }
  return n;
}

/** Scales per-filter limits down so that together they stay within `cap`. */
export function clampLimits(limits: number[], cap: number): number[] {
  const total = limits.reduce((a, b) => a + b, 0);
  if (total <= cap) return limits;
  return limits.map((n) => (n === 0 ? 0 : Math.max(1, Math.floor((n * cap) / total))));
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

/** The refusal text for a failed read (REQ, COUNT, NEG-OPEN). */
export function readFailure(err: unknown, what: string): string {
  if (err instanceof QueryTimeoutError) return `error: ${what} took too long and was stopped`;
  if (err instanceof ReadStoppedError) return err.message;
  if (err instanceof ReaderBusyError) return "rate-limited: the relay is busy, try again shortly";
  if (err instanceof StoreClosedError) return "error: the relay is shutting down";
  console.error(`${what} failed:`, err);
  return `error: could not run the ${what}`;
}
