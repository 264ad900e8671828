// What the answers kept in memory past their request share (relay/answers/tag.ts,
// relay/answers/replaceable.ts): which answers are worth keeping, and what an event's JSON costs
// there.
//
// A frame cut from a reader's reply is a slice of the reply: it keeps the reply alive, and one
// character outside Latin-1 anywhere in the reply makes all of it two bytes per character
// (JavaScriptCore). A kept answer holds all of its reply's events, so that costs the frames'
// prefixes; what a string holds is counted as two bytes per character, which it is at most.
// (Copying each event out through UTF-8 gave one byte per character, at ~5 us per KiB of the
// main thread's: more than the answers it kept saved, in bench/query-ab.ts.)

import { expirationOf } from "../../nips/nip40.ts";
import { headOf, type NostrEvent } from "../../protocol/event.ts";

/** At most the bytes a string holds (two per character in UTF-16). */
const heldBytes = (s: string): number => 2 * s.length;

/** An event kept in memory: its JSON and what answering from it needs. */
export interface KeptEvent extends Pick<NostrEvent, "id" | "pubkey" | "created_at" | "kind"> {
  readonly json: string;
  /** What the JSON holds (heldBytes). */
  readonly bytes: number;
  /** NIP-40 expiration, NaN without one. */
  readonly expires: number;
}

/** A fanned-out event (its expiration as the ring read it). */
export const keptEvent = (e: NostrEvent, json: string, expires: number): KeptEvent => ({
  json,
  bytes: heldBytes(json),
  id: e.id,
  pubkey: e.pubkey,
  created_at: e.created_at,
  kind: e.kind,
  expires,
});

/** An event of a stored answer: read off serializeEvent's layout, parsed only for an expiration or another layout. */
export function keptFromJson(json: string): KeptEvent {
  let head = headOf(json);
  let expires = Number.NaN;
  if (!head || json.includes('"expiration"')) {
    const e = JSON.parse(json) as NostrEvent;
    head = e;
    expires = expirationOf(e) ?? Number.NaN;
  }
  return { json, bytes: heldBytes(json), id: head.id, pubkey: head.pubkey, created_at: head.created_at, kind: head.kind, expires };
}

/**
 * Keeping an answer costs the main thread its parsing; most filters are asked once. An answer is
 * kept the second time its filter is read from the store: the filters asked once are remembered,
 * as a 32-bit hash of their key (a filter may be kilobytes; two keys that share a hash only get
 * one answer kept a read early), up to `max` of them, then forgotten all at once.
 */
export class SecondAsk {
  private readonly once = new Set<number>();
  constructor(private readonly max = 8192) {}

  /** Was this key asked before (since the last time it was kept)? Remembers it if not. */
  again(key: string): boolean {
    const h = Bun.hash.crc32(key);
    if (this.once.delete(h)) return true;
    if (this.once.size >= this.max) this.once.clear();
    this.once.add(h);
    return false;
  }
}
