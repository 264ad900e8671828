// NIP-09 deletion requests: what a kind 5 event asks to delete. Only references to the
// requester's own events count; the relay enforces the pubkey match when it deletes.
import type { NostrEvent } from "../protocol/event.ts";
import { isAddressable, isReplaceable } from "../protocol/kinds.ts";

export const DELETION_KIND = 5;

export interface Address {
  kind: number;
  pubkey: string;
  /** The d tag; "" for replaceable (non-addressable) kinds. */
  d: string;
}

const HEX64 = /^[0-9a-f]{64}$/;

/** Parses `<kind>:<pubkey>:<d>` (NIP-01 `a` tag value); undefined if malformed. */
function parseAddress(value: string): Address | undefined {
  const first = value.indexOf(":");
  const second = value.indexOf(":", first + 1);
  if (first < 1 || second < 0) return undefined;
  const kindText = value.slice(0, first);
  const kind = Number(kindText);
  const pubkey = value.slice(first + 1, second);
  if (!/^\d+$/.test(kindText) || kind > 65535 || !HEX64.test(pubkey)) return undefined;
  if (!isAddressable(kind) && !isReplaceable(kind)) return undefined;
  return { kind, pubkey, d: isAddressable(kind) ? value.slice(second + 1) : "" };
}

interface DeletionTargets {
  /** Ids from `e` tags (deleted only where the stored event has the requester's pubkey). */
  ids: string[];
  /** Addresses from `a` tags that belong to the requester. */
  addresses: Address[];
}

export function deletionTargets(e: NostrEvent): DeletionTargets {
  const ids: string[] = [];
  const addresses: Address[] = [];
  for (const t of e.tags) {
    const v = t[1];
    if (v === undefined) continue;
    if (t[0] === "e" && HEX64.test(v)) ids.push(v);
    else if (t[0] === "a") {
      const a = parseAddress(v);
      if (a && a.pubkey === e.pubkey) addresses.push(a);
    }
  }
  return { ids, addresses };
}

/** Kinds a deletion request cannot delete: other deletion requests and requests to vanish. */
export const undeletable = (kind: number): boolean => kind === DELETION_KIND || kind === 62;
