// NIP-40 expiration: the `expiration` tag's unix time, if the event has a valid one.
import type { NostrEvent } from "../protocol/event.ts";

export function expirationOf(e: NostrEvent): number | undefined {
  for (const t of e.tags) {
    if (t[0] !== "expiration" || t[1] === undefined) continue;
    if (!/^\d{1,15}$/.test(t[1])) return undefined;
    return Number(t[1]);
  }
  return undefined;
}

export const isExpired = (e: NostrEvent, now: number): boolean => {
  const exp = expirationOf(e);
  return exp !== undefined && exp <= now;
};
