// NIP-42 client authentication: checking a kind 22242 AUTH event (pure; the signature is
// verified by the caller before the pubkey is trusted).
import type { NostrEvent } from "../protocol/event.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";

export const AUTH_KIND = 22242;
/** How far an AUTH event's created_at may be from now. */
export const AUTH_WINDOW_SECONDS = 600;

export interface AuthExpectation {
  challenge: string;
  /** Host (and port) the relay tag must name; undefined skips the check. */
  relayHost?: string;
  now: number;
}

const tagValue = (e: NostrEvent, name: string): string | undefined => e.tags.find((t) => t[0] === name)?.[1];

export function checkAuthEvent(e: NostrEvent, x: AuthExpectation): Refusal | undefined {
  if (e.kind !== AUTH_KIND) return refuse("invalid", `AUTH event must be kind ${AUTH_KIND}`);
  if (Math.abs(e.created_at - x.now) > AUTH_WINDOW_SECONDS) return refuse("invalid", "AUTH event created_at is too far from now");
  if (tagValue(e, "challenge") !== x.challenge) return refuse("invalid", "AUTH challenge does not match");
  if (x.relayHost !== undefined) {
    const relay = tagValue(e, "relay");
    let host: string | undefined;
    try {
      host = relay ? new URL(relay).host : undefined;
    } catch {
      host = undefined;
    }
    if (host?.toLowerCase() !== x.relayHost.toLowerCase()) return refuse("invalid", "AUTH relay tag does not name this relay");
  }
  return undefined;
}
