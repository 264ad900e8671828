// Query time budgets: token buckets of worker milliseconds, one per connection and one per
// address group (an IP, an IPv6 /64). A read is admitted while both have time left, reserves
// its expected cost (so pipelined REQs cannot all start on one full bucket), is charged slice by
// slice while it runs, and is stopped when either bucket runs dry. A new connection from the
// same address starts with its own bucket but shares the address's.
import type { Config } from "../../config/schema.ts";
import type { ReadContext } from "../../store/types.ts";
import type { Session } from "./session.ts";

interface Bucket {
  tokens: number;
  at: number;
}

/** What the budgets keep relay-wide (RelayContext extends it). */
export interface BudgetState {
  readonly config: Config;
  /** Running average of what one read costs (worker ms), the first guess for a new connection. */
  readCostEstimate: number;
  /** The same for COUNTs, apart: a count walks every match, a REQ stops at its limit. */
  countCostEstimate: number;
  /** Query time left per address group. */
  queryGroups: Map<string, Bucket>;
  /** Main-thread reconciliation time left per address group. */
  negGroups: Map<string, Bucket>;
}

/** Bursts of query time, as a multiple of the per-second rate. */
const QUERY_BURST = 20;
/** Address buckets kept before full (idle) ones are forgotten. */
const MAX_GROUPS = 10_000;

export const OVER_BUDGET = "rate-limited: too much query time used, slow down";

const ewma = (avg: number, x: number) => avg + (x - avg) / 8;

function refill(b: Bucket, rate: number, now: number, cap = rate * QUERY_BURST): void {
  b.tokens = Math.min(cap, (Number.isFinite(b.tokens) ? b.tokens : cap) + ((now - b.at) / 1000) * rate);
  b.at = now;
}

/** The address group's bucket of a [rate_limits] pair (rate per second, burst), created full. */
function groupBucket(groups: Map<string, Bucket>, group: string, rate: number, cap: number, now: number): Bucket {
  let b = groups.get(group);
  if (!b) {
    if (groups.size >= MAX_GROUPS) forgetFull(groups, rate, cap, now);
    b = { tokens: cap, at: now };
    groups.set(group, b);
  }
  refill(b, rate, now, cap);
  return b;
}

function forgetFull(groups: Map<string, Bucket>, rate: number, cap: number, now: number): void {
  for (const [k, b] of groups) {
    refill(b, rate, now, cap);
    if (b.tokens >= cap) groups.delete(k);
  }
}

/** The connection's bucket and its address's (undefined when that limit is off), refilled to now. */
function buckets(ctx: BudgetState, s: Session, now = performance.now()): { mine: Session["queryBudget"]; shared?: Bucket } {
  const mine = s.queryBudget;
  refill(mine, ctx.config.limits.query_ms_per_second, now);
  const ipRate = ctx.config.rate_limits.query_ms_per_minute / 60;
  return {
    mine,
    shared: ipRate > 0 ? groupBucket(ctx.queryGroups, s.group, ipRate, ctx.config.rate_limits.query_ms_burst, now) : undefined,
  };
}

/**
 * The read context for a REQ / COUNT / NEG-OPEN of this connection, or undefined when the
 * connection or its address has spent its query time. It reserves what reads of its kind cost
 * this connection so far (else the relay's running average for the kind): a COUNT over every
 * stored event costs a hundred times a REQ, and reserving a REQ's cost let a pipeline of them
 * all start on one full bucket.
 */
export function queryBudget(ctx: BudgetState, s: Session, kind: "read" | "count" = "read"): ReadContext | undefined {
  const { mine, shared } = buckets(ctx, s);
  if (mine.tokens <= 0 || (shared && shared.tokens <= 0)) return undefined;
  const counting = kind === "count";
  const reserved = (counting ? mine.countEstimate : mine.estimate) ?? (counting ? ctx.countCostEstimate : ctx.readCostEstimate);
  mine.tokens -= reserved;
  if (shared) shared.tokens -= reserved;
  let refunded = false;
  return {
    owner: s,
    group: s.group,
    onCost: (ms) => {
      mine.tokens -= ms;
      if (shared) shared.tokens -= ms;
    },
    stop: () => {
      buckets(ctx, s);
      // What it reserved counts as its own: only what others left it matters.
      return mine.tokens + reserved <= 0 || (shared && shared.tokens + reserved <= 0) ? OVER_BUDGET : undefined;
    },
    onEnd: (ms) => {
      if (refunded) return;
      refunded = true;
      mine.tokens += reserved;
      if (shared) shared.tokens += reserved;
      if (counting) {
        // A connection's first COUNT that ran is its estimate at once: the next ones in its
        // pipeline are likely the same filters.
        if (ms > 0) mine.countEstimate = mine.countEstimate === undefined ? ms : ewma(mine.countEstimate, ms);
        ctx.countCostEstimate = ewma(ctx.countCostEstimate, ms);
      } else {
        mine.estimate = ewma(mine.estimate ?? reserved, ms);
        ctx.readCostEstimate = ewma(ctx.readCostEstimate, ms);
      }
    },
  };
}

/** May this connection start more query work now? */
export function hasQueryTime(ctx: BudgetState, s: Session): boolean {
  const { mine, shared } = buckets(ctx, s);
  return mine.tokens > 0 && (!shared || shared.tokens > 0);
}

function negBucket(ctx: BudgetState, s: Session, now: number): Bucket | undefined {
  const { negentropy_ms_per_minute: perMinute, negentropy_ms_burst: cap } = ctx.config.rate_limits;
  if (perMinute <= 0) return undefined;
  return groupBucket(ctx.negGroups, s.group, perMinute / 60, cap, now);
}

/** Has this connection's address main-thread NIP-77 time left (the allowance only; see hasQueryTime)? */
export function hasNegTime(ctx: BudgetState, s: Session): boolean {
  const b = negBucket(ctx, s, performance.now());
  return b === undefined || b.tokens > 0;
}

/** Charges a reconciliation's main-thread time to the address's allowance and the query budgets. */
export function chargeNegTime(ctx: BudgetState, s: Session, ms: number): void {
  const b = negBucket(ctx, s, performance.now());
  if (b) b.tokens -= ms;
  const { mine, shared } = buckets(ctx, s);
  mine.tokens -= ms;
  if (shared) shared.tokens -= ms;
}
