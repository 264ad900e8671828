// The storage decisions both backends make, as pure functions (no SQL): the NIP-01 order, the
// NIP-50 ranking window, which version of a replaceable or addressable event is kept, what a
// NIP-09 deletion or a NIP-62 request to vanish keeps from coming back, and what a deletion
// request may delete. Each writer (store/sqlite/write.ts, store/postgres/write.ts) looks the
// facts up in its own SQL and lets these decide; test/postgres/write-parity.pgtest.ts checks
// that the two agree.
import { undeletable, type Address } from "../nips/nip09.ts";
import { dTag, isHex64, type NostrEvent } from "../protocol/event.ts";
import type { Filter } from "../protocol/filter.ts";
import { isAddressable, isReplaceable } from "../protocol/kinds.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";

/** NIP-59 gift wrap: signed by a random key, addressed to its p-tagged recipient. */
export const GIFT_WRAP = 1059;

/** What events are ordered by. */
export interface Dated {
  created_at: number;
  id: string;
}

/** NIP-01 order: newest first; on equal created_at, the lowest id first. */
export const newestFirst = (a: Dated, b: Dated): number => b.created_at - a.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** NIP-50: results are ranked by relevance among this many newest matches. */
export const SEARCH_WINDOW = 5000;

/** The address of a replaceable ("" d) or addressable event; null for other kinds. */
export function addressOf(e: NostrEvent): Address | null {
  if (isAddressable(e.kind)) return { kind: e.kind, pubkey: e.pubkey, d: dTag(e) };
  return isReplaceable(e.kind) ? { kind: e.kind, pubkey: e.pubkey, d: "" } : null;
}

/**
 * A replaceable or addressable event against the stored versions of its address: the same event
 * ("duplicate"), one that loses to a stored version ("outdated"), or the new version, which
 * replaces them all. The version first in NIP-01 order wins: the newest; on equal created_at the
 * lowest id.
 */
export function replacement(e: Dated, stored: Iterable<Dated>): "duplicate" | "outdated" | "replaces" {
  for (const old of stored) {
    if (old.id === e.id) return "duplicate";
    if (newestFirst(old, e) < 0) return "outdated";
  }
  return "replaces";
}

/** The refusal of an "outdated" version. */
export const OUTDATED: Refusal = refuse("duplicate", "a newer version of this replaceable event is already stored");

const NONE: readonly string[] = [];

/** The recipients of a gift wrap (its p tags with a pubkey); none for other kinds. */
export const giftWrapRecipients = (e: NostrEvent): readonly string[] =>
  e.kind === GIFT_WRAP ? e.tags.filter((t) => t[0] === "p" && isHex64(t[1])).map((t) => t[1]!) : NONE;

/**
 * The tombstones a store holds. tombstoneRefusal asks only about one incoming event: its id,
 * its author, a gift wrap's recipients, its address.
 */
export interface Tombstones {
  /** The created_at up to which this pubkey asked to vanish (NIP-62), if it did. */
  vanishedUntil(pubkey: string): number | undefined;
  /** Did `by` ask to delete (NIP-09) the event with this id? */
  deleted(id: string, by: string): boolean;
  /** The created_at up to which the event's address was deleted (NIP-09 `a` tag), if it was. */
  addressDeletedUntil(a: Address): number | undefined;
}

/**
 * Why an event may not (re)enter, or undefined: its author asked to vanish after it, a gift
 * wrap's recipient did, its author (or a gift wrap's recipient) deleted its id, or its author
 * deleted its address after it. Deletions and requests to vanish cannot be deleted (NIP-09).
 */
export function tombstoneRefusal(e: NostrEvent, t: Tombstones): Refusal | undefined {
  const vanished = t.vanishedUntil(e.pubkey);
  if (vanished !== undefined && e.created_at <= vanished) return refuse("blocked", "this pubkey asked to vanish from this relay");
  const recipients = giftWrapRecipients(e);
  for (const p of recipients) {
    const until = t.vanishedUntil(p);
    if (until !== undefined && e.created_at <= until) return refuse("blocked", "the recipient asked to vanish from this relay");
  }
  if (undeletable(e.kind)) return undefined;
  if (t.deleted(e.id, e.pubkey)) return refuse("blocked", "this event was deleted by its author");
  if (recipients.some((p) => t.deleted(e.id, p))) return refuse("blocked", "this gift wrap was deleted by its recipient");
  const address = addressOf(e);
  const deleted = address === null ? undefined : t.addressDeletedUntil(address);
  if (deleted !== undefined && e.created_at <= deleted) return refuse("blocked", "this address was deleted by its author");
  return undefined;
}

/** A stored event a deletion request names by id. */
interface DeletionTarget {
  kind: number;
  pubkey: string;
  /** Is it p-tagged to the requester (a gift wrap addressed to it)? */
  tagsRequester: boolean;
  /** Has it an h tag (with its kind: a NIP-29 group's moderation record)? */
  inGroup: boolean;
}

/** NIP-29 moderation, join and leave events (9000-9022). */
export const GROUP_ACTIONS = { min: 9000, max: 9022 } as const;

/**
 * A group's moderation record (9000-9022 with an h tag): the group's state is rebuilt from these,
 * so neither its author's NIP-09 deletion nor a request to vanish removes it (9005 and 9008 are
 * the group's own deletion path); else a kind 5 of one's own 9007 or 9001 would, at the next
 * start, free the id or lift a removal. Both backends' vanish purges skip them too.
 */
export const groupRecord = (kind: number, inGroup: boolean): boolean => inGroup && kind >= GROUP_ACTIONS.min && kind <= GROUP_ACTIONS.max;

/**
 * What a NIP-09 deletion request does with an id it names (`target`: the stored event, or null):
 * `remove` the stored event when it is the requester's own or a gift wrap addressed to the
 * requester (NIP-59: signed by random keys), and `tombstone` the id for the requester, so it is
 * kept out from now on. A stored deletion or request to vanish, or a group's moderation record, is
 * left alone (neither).
 */
export function deletionOf(req: NostrEvent, target: DeletionTarget | null): { remove: boolean; tombstone: boolean } {
  if (target === null) return { remove: false, tombstone: true };
  if (undeletable(target.kind) || groupRecord(target.kind, target.inGroup)) return { remove: false, tombstone: false };
  return { remove: target.pubkey === req.pubkey || (target.kind === GIFT_WRAP && target.tagsRequester), tombstone: true };
}

/** NIP-29 `previous` windows (GroupRecords.recentByGroup): h rows newest first -> each group's first `perGroup` ids. */
export function newestPerGroup(rows: readonly { g: string; id: string }[], perGroup: number): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const { g, id } of rows) {
    let ids = out.get(g);
    if (!ids) out.set(g, (ids = []));
    if (ids.length < perGroup) ids.push(id);
  }
  return out;
}

/** The relay-signed group kinds NIP-29 reserves (39000-39009), which carry the group in their d. */
export const GROUP_METADATA = { min: 39000, max: 39009 } as const;

export const reachesGroupMetadata = (f: Filter): boolean =>
  !f.kinds || f.kinds.some((k) => k >= GROUP_METADATA.min && k <= GROUP_METADATA.max);

/** A filter that may match a group's records (9000-9022: who joined, left, was put or removed), which a hidden group hides as its metadata. */
export const reachesGroupRecords = (f: Filter): boolean =>
  !f.kinds || f.kinds.some((k) => k >= GROUP_ACTIONS.min && k <= GROUP_ACTIONS.max);
