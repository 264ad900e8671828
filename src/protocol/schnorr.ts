// BIP-340 with @noble/curves: verification (portable, pure JS, used inside the verify workers)
// and the relay's own signing key (what it publishes itself: NIP-29 group metadata and moderation).
import { createHash } from "node:crypto";
import { schnorr } from "@noble/curves/secp256k1.js";
import { canonicalForm, type NostrEvent } from "./event.ts";

export interface VerifyJob {
  id: string;
  pubkey: string;
  sig: string;
}

const bytes = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex, "hex"));

export function verifySchnorr(job: VerifyJob): boolean {
  try {
    return schnorr.verify(bytes(job.sig), bytes(job.id), bytes(job.pubkey));
  } catch {
    return false;
  }
}

/** The relay's own key pair (NIP-11 `self`). */
export interface RelayKey {
  readonly secret: Uint8Array;
  readonly pubkey: string;
  /** Where it came from, for messages: a file path, "config", "database" or "memory". */
  readonly where: string;
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

/** The x-only public key (64 hex) of a 32-byte secret key. */
export const pubkeyOf = (secret: Uint8Array): string => hex(schnorr.getPublicKey(secret));

/** A key pair from 64 hex; throws on anything else or a secret outside the curve's range. */
export function relayKeyFromHex(secretHex: string, where: string): RelayKey {
  if (!/^[0-9a-f]{64}$/.test(secretHex)) throw new Error("a secret key is 64 lowercase hex characters");
  const secret = bytes(secretHex);
  return { secret, pubkey: pubkeyOf(secret), where };
}

/** A fresh random key pair (kept only as long as its holder keeps it). */
export function freshRelayKey(where = "memory"): RelayKey {
  const secret = schnorr.utils.randomSecretKey();
  return { secret, pubkey: pubkeyOf(secret), where };
}

/** An event signed by `key`: its id (the NIP-01 hash) and a BIP-340 signature of it. */
export function signEvent(t: { kind: number; created_at: number; tags: string[][]; content: string }, key: RelayKey): NostrEvent {
  const draft: NostrEvent = {
    id: "",
    pubkey: key.pubkey,
    created_at: t.created_at,
    kind: t.kind,
    tags: t.tags,
    content: t.content,
    sig: "",
  };
  draft.id = createHash("sha256").update(canonicalForm(draft), "utf8").digest("hex");
  draft.sig = hex(schnorr.sign(bytes(draft.id), key.secret));
  return draft;
}
