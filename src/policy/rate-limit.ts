// Rate limits as token buckets: per IP and per authenticated pubkey, for new connections and for
// EVENT, REQ, COUNT, NEG-OPEN and AUTH. Pure (the clock is injected); the relay holds one RateLimiter.
import type { Config } from "../config/schema.ts";
import { ipGroup, isPrivateAddress } from "./ip.ts";

/** Tokens refill at perMinute, up to burst; perMinute 0 = unlimited. */
export interface Rate {
  perMinute: number;
  burst: number;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was computed (ms). */
  at: number;
  /** When the bucket will be full again (ms): from then on it is the same as no bucket. */
  fullAt: number;
}

/** The bucket's tokens at `now`, refilled since it was last touched (never above burst). */
export function refill(b: Bucket, rate: Rate, now: number): number {
  const gained = (Math.max(0, now - b.at) * rate.perMinute) / 60_000;
  return Math.min(rate.burst, b.tokens + gained);
}

/** Milliseconds until `tokens` has grown to `need`. */
export function waitFor(tokens: number, need: number, rate: Rate): number {
  return tokens >= need ? 0 : Math.ceil(((need - tokens) * 60_000) / rate.perMinute);
}

interface Charge {
  key: string;
  rate: Rate;
}

interface LimiterOptions {
  /** Most buckets held; past it the least recently used is dropped (it then starts full again). */
  maxKeys?: number;
  /** How often buckets that have refilled completely are dropped. */
  pruneEveryMs?: number;
  now?: () => number;
}

/**
 * Buckets by key, bounded in memory: a full bucket is the same as none, so full ones are pruned
 * (lazily, at most every pruneEveryMs), and past maxKeys the least recently used one is dropped:
 * an attack from many addresses costs a fixed amount of memory, never an unbounded Map.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxKeys: number;
  private readonly pruneEveryMs: number;
  private readonly now: () => number;
  private prunedAt: number;

  constructor(opts: LimiterOptions = {}) {
    this.maxKeys = opts.maxKeys ?? 100_000;
    this.pruneEveryMs = opts.pruneEveryMs ?? 60_000;
    this.now = opts.now ?? Date.now;
    this.prunedAt = this.now();
  }

  get size(): number {
    return this.buckets.size;
  }

  /**
   * Takes `cost` tokens from every charged bucket, or from none when one of them has too few (a
   * refused request costs nothing elsewhere). A cost above a bucket's burst takes a full bucket
   * (else it could never pass). Returns 0 when allowed, else the ms until it would be.
   */
  take(charges: readonly Charge[], cost = 1): number {
    const now = this.now();
    if (now - this.prunedAt >= this.pruneEveryMs) this.prune(now);
    let wait = 0;
    const levels: number[] = [];
    for (const { key, rate } of charges) {
      if (rate.perMinute <= 0) continue;
      const b = this.buckets.get(key);
      const tokens = b ? refill(b, rate, now) : rate.burst;
      levels.push(tokens);
      wait = Math.max(wait, waitFor(tokens, Math.min(cost, rate.burst), rate));
    }
    if (wait > 0) {
      // A key that keeps being refused is the one to remember: mark it recently used.
      for (const { key } of charges) this.touch(key);
      return wait;
    }
    let i = 0;
    for (const { key, rate } of charges) {
      if (rate.perMinute <= 0) continue;
      const tokens = levels[i++]! - Math.min(cost, rate.burst);
      // Re-inserted so the Map's order is least recently used first.
      this.buckets.delete(key);
      this.buckets.set(key, { tokens, at: now, fullAt: now + waitFor(tokens, rate.burst, rate) });
      if (this.buckets.size > this.maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
    }
    return 0;
  }

  private touch(key: string): void {
    const b = this.buckets.get(key);
    if (!b) return;
    this.buckets.delete(key);
    this.buckets.set(key, b);
  }

  /** Drops the buckets that have refilled completely. */
  prune(now = this.now()): void {
    this.prunedAt = now;
    for (const [key, b] of this.buckets) if (b.fullAt <= now) this.buckets.delete(key);
  }
}

/** What can be rate-limited per IP and per pubkey (connections and AUTHs: per IP only, see IP_ONLY). */
type RatedVerb = "connections" | "events" | "reqs" | "counts" | "neg_opens" | "auths";

/**
 * Charged to the IP alone: a new connection comes before any AUTH, and an AUTH's pubkey is not
 * known to be the sender's until its signature is checked (the pubkeys the connection already
 * proved are not the ones asking). They have no pubkey_ keys.
 */
const IP_ONLY: ReadonlySet<RatedVerb> = new Set(["connections", "auths"]);

const NOUN: Record<RatedVerb, string> = {
  connections: "new connections",
  events: "events",
  reqs: "REQs",
  counts: "COUNTs",
  neg_opens: "NEG-OPENs",
  auths: "AUTH messages",
};

type RateKey = Extract<keyof Config["rate_limits"], `${string}_per_minute` | `${string}_burst`>;
/** Read at each use: a reload changes config.rate_limits in place. */
const rateOf = (config: Config, prefix: "" | "pubkey_", verb: RatedVerb): Rate => ({
  perMinute: config.rate_limits[`${prefix}${verb}_per_minute` as RateKey],
  burst: config.rate_limits[`${prefix}${verb}_burst` as RateKey],
});

/** Who is asking: the client's IP (absent for import, sync and stream) and its NIP-42 pubkeys. */
interface RateSubject {
  ip?: string;
  /** ipGroup(ip), when the caller has it already (a connection's Session). */
  group?: string;
  /** isPrivateAddress(ip), likewise. */
  local?: boolean;
  authed?: ReadonlySet<string>;
}

/**
 * The address group the subject's per-IP limits are charged to: none without an address (import,
 * sync, stream, mirrors), nor for a loopback or private client while exempt_private_addresses is
 * on: that is most likely a reverse proxy speaking for everyone, its pubkeys are charged instead.
 * The writer queue's share per address (store/queue.ts) follows the same rule.
 */
export function chargedGroup(config: Config, who: RateSubject): string | undefined {
  if (who.ip === undefined) return undefined;
  if (config.rate_limits.exempt_private_addresses && (who.local ?? isPrivateAddress(who.ip))) return undefined;
  return who.group ?? ipGroup(who.ip);
}

/**
 * Charges one `verb` (`cost` tokens: an EVENT's write cost, policy/write-cost.ts) to the
 * subject's IP and to each pubkey it authenticated as. Returns 0 when
 * allowed, else the ms to wait. A connection authenticated as an [admin] pubkey is never limited;
 * a loopback or private IP is not charged unless [rate_limits] exempt_private_addresses is off.
 */
export function chargeRate(config: Config, limiter: RateLimiter, verb: RatedVerb, who: RateSubject, cost = 1): number {
  if (who.ip === undefined) return 0;
  const authed = who.authed ?? [];
  for (const pk of authed) if (config.admin.pubkeys.includes(pk)) return 0;
  const group = chargedGroup(config, who);
  const charges: Charge[] = group === undefined ? [] : [{ key: `${verb} ip ${group}`, rate: rateOf(config, "", verb) }];
  if (!IP_ONLY.has(verb)) {
    const rate = rateOf(config, "pubkey_", verb);
    for (const pk of authed) charges.push({ key: `${verb} pk ${pk}`, rate });
  }
  return limiter.take(charges, cost);
}

/** The reason after `rate-limited: ` in OK false, CLOSED and NEG-ERR. */
export const rateLimitMessage = (verb: RatedVerb, waitMs: number): string =>
  `too many ${NOUN[verb]}, try again in ${Math.ceil(waitMs / 1000)} s`;
