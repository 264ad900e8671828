// permessage-deflate: what compressed messages cost to inflate, per address. Bun inflates a
// message before the relay sees it, so the relay cannot refuse one in advance; it can count what
// each address's messages inflated to and, past a budget, close that address's compressed
// connections and stop offering it compression (its new connections are then plain, and a
// compressed frame on a plain connection is a protocol error Bun closes without inflating).
import type { Config } from "../../config/schema.ts";
import { cutWebsocket, type Socket } from "./session.ts";

/** Seconds' worth of the rate an address may inflate at once. */
export const INFLATE_BURST_SECONDS = 8;
/** How long an address that went over the budget is not offered compression. */
export const NO_DEFLATE_MS = 10 * 60_000;
/** Buckets kept before the full ones (addresses quiet for a while) are dropped. */
const MAX_BUCKETS = 10_000;

export class InflationBudget {
  /** Per address group: bytes it may still inflate, and when that was reckoned. */
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  /** Address groups not offered compression, until when. */
  private readonly plain = new Map<string, number>();

  /**
   * Charges `bytes` inflated by one of `group`'s messages at `rate` bytes per second (0: no
   * limit). False when that took the address over its budget: it is then refused compression.
   */
  charge(group: string, bytes: number, rate: number, now = performance.now()): boolean {
    if (rate <= 0) return true;
    // Over already: its compressed connections are being closed.
    if (!this.mayDeflate(group, now)) return false;
    const cap = rate * INFLATE_BURST_SECONDS;
    let b = this.buckets.get(group);
    if (!b) {
      if (this.buckets.size >= MAX_BUCKETS) this.prune(rate, now);
      b = { tokens: cap, at: now };
      this.buckets.set(group, b);
    }
    b.tokens = Math.min(cap, b.tokens + ((now - b.at) / 1000) * rate) - bytes;
    b.at = now;
    if (b.tokens >= 0) return true;
    this.plain.set(group, now + NO_DEFLATE_MS);
    this.buckets.delete(group);
    return false;
  }

  /** Whether this address may be offered compression now. */
  mayDeflate(group: string, now = performance.now()): boolean {
    const until = this.plain.get(group);
    if (until === undefined) return true;
    if (now < until) return false;
    this.plain.delete(group);
    return true;
  }

  /** Drops the buckets that have refilled (nothing to remember) and the expired refusals. */
  private prune(rate: number, now: number): void {
    const cap = rate * INFLATE_BURST_SECONDS;
    for (const [g, b] of this.buckets) if (b.tokens + ((now - b.at) / 1000) * rate >= cap) this.buckets.delete(g);
    for (const [g, until] of this.plain) if (now >= until) this.plain.delete(g);
  }
}

/**
 * Charges what a compressed connection's message inflated to against its address's budget
 * ([limits] inflated_bytes_per_ip_per_second). Over it, the address's compressed connections are
 * closed (this one too; false) and it is not offered compression for a while (InflationBudget).
 */
export function chargeInflation(sockets: Iterable<Socket>, budget: InflationBudget, config: Config, ws: Socket, bytes: number): boolean {
  const { group } = ws.data;
  if (budget.charge(group, bytes, config.limits.inflated_bytes_per_ip_per_second)) return true;
  // Its address's sockets were all cut when it first went over: a message still arriving on one
  // costs no scan of every socket (and no close and timer again).
  if (ws.data.inflationCut) return false;
  for (const s of sockets)
    if (s.data.group === group && s.data.wire.deflated && !s.data.closed && !s.data.inflationCut) {
      s.data.inflationCut = true;
      cutWebsocket(s, 1008, "compressed messages inflate too much; reconnect");
    }
  return false;
}
