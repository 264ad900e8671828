// NIP-62 request to vanish: does a kind 62 event name this relay?
import type { NostrEvent } from "../protocol/event.ts";

export const VANISH_KIND = 62;
const ALL_RELAYS = "ALL_RELAYS";

/** host + path, lowercased host, without a trailing slash: wss://Relay.example.com/ == wss://relay.example.com */
function normalizeRelayUrl(url: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.host.toLowerCase()}${u.pathname.replace(/\/+$/, "")}`;
  } catch {
    return undefined;
  }
}

/** True if a `relay` tag is ALL_RELAYS or names `ourUrl` (scheme ws/wss ignored). */
export function namesRelay(e: NostrEvent, ourUrl: string): boolean {
  const ours = normalizeRelayUrl(ourUrl);
  for (const t of e.tags) {
    if (t[0] !== "relay" || t[1] === undefined) continue;
    if (t[1] === ALL_RELAYS) return true;
    if (ours !== undefined && normalizeRelayUrl(t[1]) === ours) return true;
  }
  return false;
}

/** Appended to the refusal of a request to vanish that was carried out but not stored (PendingWrite.vanishOnly). */
export const VANISH_CARRIED_OUT =
  "; the request to vanish was carried out (this pubkey's events up to its created_at are deleted), but it is not stored";
