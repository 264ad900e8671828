// REQs for replaceable events by author and kind (a profile: `kinds [0]`, one author; follow and
// relay lists), answered on the main thread with no reader and no SQLite: the store holds at most
// one event per author and replaceable kind (a newer version deletes the older), so knowing that
// one, or that there is none, for every pair a filter names is knowing the store's answer.
//
// Where the entries come from, and why each is the store's:
// - Fanout: a fanned-out replaceable event is the version the store now holds for its pair (an
//   outdated one is refused and never fanned out; one its own batch deleted is not passed here:
//   FeedIndex.add). Fanout follows the store's commit order.
// - A stored read (relay/read/stored.ts): a REQ the entries could not answer, read through a reader,
//   fills them when nothing was committed while it ran (`Store.changes.mark`: our writer had no call
//   in flight and no other connection committed), so the answer is one state of the store. An
//   answer without a pair's event says the store holds none (null).
// - Deletions the store names drop the entry of the deleted event; what it cannot name (another
//   process wrote) clears them all (store/types.ts ChangeWatch, as for relay/answers/feeds.ts).
//
// Bounded in bytes (the JSON held, and a little per entry), least recently used out first.
// Restricted kinds are never answered here, NIP-40 expiry is checked at answer time.
import type { NostrEvent } from "../../protocol/event.ts";
import type { CompiledFilter } from "../../protocol/filter.ts";
import { isReplaceable } from "../../protocol/kinds.ts";
import { newestFirst } from "../../store/semantics.ts";
import { type KeptEvent, keptEvent, keptFromJson, SecondAsk } from "./keep.ts";

/** Bytes of JSON the entries may hold (relay/answers/keep.ts): ~700 profiles of the bench corpus. */
const MAX_BYTES = 1024 * 1024;
/** A bigger event is not held (most follow lists: hundreds of pubkeys): its pair stays unknown. */
const MAX_EVENT_BYTES = 4 * 1024;
/** What an entry costs beside its JSON: the map entries and the entry's object. */
const ENTRY_BYTES = 160;
/** A filter naming more author and kind pairs than this goes to the store. */
const MAX_PAIRS = 64;

/** By kind: the stored event, or null when the store holds none. */
type Author = Map<number, KeptEvent | null>;

export class ReplaceableIndex {
  /** By pubkey, least recently used first (Map order). */
  private readonly authors = new Map<string, Author>();
  private bytes = 0;
  private readonly asked = new SecondAsk();
  /** Whether the null entries were read with NIP-40 expiry applied (a reload may turn it off). */
  private expiry = true;

  /** A newly fanned-out event the store holds (not one its own batch deleted), its NIP-40 expiration as the ring read it. */
  stored(e: NostrEvent, json: string, expires: number, gated = false): void {
    if (!isReplaceable(e.kind)) return;
    // Only some may read it: the pair is no longer known (its readers go to the store).
    if (gated) {
      const author = this.authors.get(e.pubkey);
      if (author?.has(e.kind)) this.unset(author, e.pubkey, e.kind);
      return;
    }
    this.set(e.pubkey, e.kind, keptEvent(e, json, expires));
  }

  /** Events the store deleted, each `id + pubkey` in hex. */
  forget(idsAndPubkeys: readonly string[]): void {
    for (const key of idsAndPubkeys) {
      const pubkey = key.slice(64);
      const author = this.authors.get(pubkey);
      if (!author) continue;
      const id = key.slice(0, 64);
      for (const [kind, h] of author) if (h?.id === id) this.unset(author, pubkey, kind);
    }
  }

  /** The store changed in ways it could not name. */
  reset(): void {
    this.authors.clear();
    this.bytes = 0;
  }

  /**
   * The store's answer to a filter of replaceable kinds and authors, newest first, or undefined
   * when a pair is not known. `now`: NIP-40's, 0 = no expiry; `restricted`: kinds only some may read.
   */
  answer(f: CompiledFilter, limit: number, now: number, restricted: ReadonlySet<number>): string[] | undefined {
    if (!answerable(f, restricted) || limit <= 0) return undefined;
    this.expiryIs(now > 0);
    const found: KeptEvent[] = [];
    for (const pubkey of f.authors!) {
      const author = this.authors.get(pubkey);
      if (!author) return undefined;
      for (const kind of f.kinds!) {
        const h = author.get(kind);
        if (h === undefined) return undefined;
        if (
          h &&
          (f.since === undefined || h.created_at >= f.since) &&
          (f.until === undefined || h.created_at <= f.until) &&
          !(now > 0 && h.expires <= now)
        )
          found.push(h);
      }
    }
    for (const pubkey of f.authors!) this.touch(pubkey);
    return found
      .sort(newestFirst)
      .slice(0, limit)
      .map((h) => h.json);
  }

  /**
   * Would the store's answer to this filter fill entries (every pair, none cut by the limit, no
   * time bounds that could hide one)? Yes the second time it is asked (relay/answers/keep.ts SecondAsk).
   */
  wants(f: CompiledFilter, limit: number, restricted: ReadonlySet<number>): boolean {
    if (!answerable(f, restricted) || f.since !== undefined || f.until !== undefined || f.authors!.size * f.kinds!.size > limit)
      return false;
    return this.asked.again(`${[...f.kinds!].join(",")}:${[...f.authors!].join(",")}`);
  }

  /** The store's answer (event JSONs) to a filter `wants` allowed, read while nothing was committed. */
  fill(f: CompiledFilter, jsons: readonly string[], now: number): void {
    this.expiryIs(now > 0);
    const events = jsons.map(keptFromJson);
    const pair = (pubkey: string, kind: number) => `${kind}:${pubkey}`;
    const seen = new Set(events.map((e) => pair(e.pubkey, e.kind)));
    // Two events for one pair: not a store this index understands (rows from elsewhere).
    if (seen.size !== events.length) return;
    for (const pubkey of f.authors!) for (const kind of f.kinds!) if (!seen.has(pair(pubkey, kind))) this.set(pubkey, kind, null);
    for (const e of events) this.set(e.pubkey, e.kind, e);
  }

  /** Bytes held (for tests and the bound). */
  get size(): number {
    return this.bytes;
  }

  private expiryIs(on: boolean): void {
    if (on === this.expiry) return;
    // A null read with expiry on may hide an expired event the store would now serve.
    for (const [pubkey, author] of this.authors) for (const [kind, h] of author) if (h === null) this.unset(author, pubkey, kind);
    this.expiry = on;
  }

  private set(pubkey: string, kind: number, h: KeptEvent | null): void {
    let author = this.authors.get(pubkey);
    const old = author?.get(kind);
    if (author && old !== undefined) this.unset(author, pubkey, kind);
    if (h && h.bytes > MAX_EVENT_BYTES) return;
    author = this.authors.get(pubkey);
    if (!author) this.authors.set(pubkey, (author = new Map()));
    author.set(kind, h);
    this.bytes += cost(h);
    this.touch(pubkey);
    for (const [oldest, a] of this.authors) {
      if (this.bytes <= MAX_BYTES) break;
      for (const k of [...a.keys()]) this.unset(a, oldest, k);
    }
  }

  private unset(author: Author, pubkey: string, kind: number): void {
    this.bytes -= cost(author.get(kind) ?? null);
    author.delete(kind);
    if (author.size === 0) this.authors.delete(pubkey);
  }

  private touch(pubkey: string): void {
    const author = this.authors.get(pubkey);
    if (!author) return;
    this.authors.delete(pubkey);
    this.authors.set(pubkey, author);
  }
}

/** A filter of only authors and replaceable kinds anyone may read, few pairs. */
function answerable(f: CompiledFilter, restricted: ReadonlySet<number>): boolean {
  if (!f.authors || !f.kinds || f.ids || f.tags.length > 0 || f.search !== undefined || f.neverMatch) return false;
  if (f.authors.size * f.kinds.size > MAX_PAIRS) return false;
  for (const k of f.kinds) if (!isReplaceable(k) || restricted.has(k)) return false;
  return true;
}

const cost = (h: KeptEvent | null): number => ENTRY_BYTES + (h ? h.bytes : 0);
