// NIP-42 client authentication: checking a kind 22242 AUTH event (pure; the signature is
// verified by the caller before the pubkey is trusted).
import type { NostrEvent } from "../protocol/event.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";

export const AUTH_KIND = 22242;
/** How far an AUTH event's created_at may be from now. */
const AUTH_WINDOW_SECONDS = 600;

interface AuthExpectation {
  challenge: string;
  /** The relay URLs (normalized, normalizeRelayUrl) the relay tag may name; undefined skips the check. */
  relayUrls?: readonly string[];
  now: number;
}

/**
 * A websocket URL in one spelling, for comparing relay tags: ws: or wss: only, host lowercased,
 * default port dropped (the URL parser does both), trailing slashes dropped from the path ("" and
 * "/" are the same), query and fragment ignored. undefined for anything else.
 */
export function normalizeRelayUrl(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if ((u.protocol !== "ws:" && u.protocol !== "wss:") || u.host === "") return undefined;
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "") || "/"}`;
}

const tagValue = (e: NostrEvent, name: string): string | undefined => e.tags.find((t) => t[0] === name)?.[1];

export function checkAuthEvent(e: NostrEvent, x: AuthExpectation): Refusal | undefined {
  if (e.kind !== AUTH_KIND) return refuse("invalid", `AUTH event must be kind ${AUTH_KIND}`);
  if (Math.abs(e.created_at - x.now) > AUTH_WINDOW_SECONDS) return refuse("invalid", "AUTH event created_at is too far from now");
  if (tagValue(e, "challenge") !== x.challenge) return refuse("invalid", "AUTH challenge does not match");
  if (x.relayUrls !== undefined) {
    const relay = normalizeRelayUrl(tagValue(e, "relay") ?? "");
    if (relay === undefined || !x.relayUrls.includes(relay)) return refuse("invalid", "AUTH relay tag does not name this relay");
  }
  return undefined;
}
