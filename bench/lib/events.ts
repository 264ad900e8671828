// Events for reliability scenarios, made fast. Against a relay started with --no-verify,
// `unsignedEvent` builds events with a correct id (sha256 of the NIP-01 serialization, a few µs)
// and a dummy signature; `signedEvent` signs for real (nostr-tools, ~1 ms each) for the runs that
// keep signature checks on.
import { createHash, randomBytes } from "node:crypto";
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import type { NostrEvent } from "../../src/protocol/event.ts";

export interface EventTemplate {
  kind?: number;
  created_at?: number;
  tags?: string[][];
  content: string;
}

const DUMMY_SIG = "0".repeat(128);
const nowSec = () => Math.floor(Date.now() / 1000);

/** A random 64-hex "pubkey" (the relay checks its shape only when started with --no-verify). */
export const fakePubkey = (): string => randomBytes(32).toString("hex");

/** An event with a valid id and a dummy signature: accepted only by a relay started with --no-verify. */
export function unsignedEvent(pubkey: string, t: EventTemplate): NostrEvent {
  const kind = t.kind ?? 1;
  const created_at = t.created_at ?? nowSec();
  const tags = t.tags ?? [];
  // ASCII-safe serialization: for content without control characters JSON.stringify is NIP-01's form.
  const id = createHash("sha256")
    .update(JSON.stringify([0, pubkey, created_at, kind, tags, t.content]), "utf8")
    .digest("hex");
  return { id, pubkey, created_at, kind, tags, content: t.content, sig: DUMMY_SIG };
}

/** A really signed event (nostr-tools), as a plain object. */
export function signedEvent(sk: Uint8Array, t: EventTemplate): NostrEvent {
  const e = finalizeEvent({ kind: t.kind ?? 1, created_at: t.created_at ?? nowSec(), tags: t.tags ?? [], content: t.content }, sk);
  return { id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig };
}

export const newSecretKey = (): Uint8Array => generateSecretKey();

/** The seven NIP-01 fields as one string, to compare an event served back with the one published. */
export const eventKey = (e: NostrEvent): string => JSON.stringify([e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig]);
