// REQs the catch-up ring answers alone, with no reader and no SQLite: one filter of authors or
// of hashtags (`#t`), whose `limit` newest matches are all in the ring, the last of them newer
// than every stored event outside it (bench/RESULTS.md, "REQs answered from the ring").
//
// Why the answer is the store's:
// - Every event stored since start reached the ring (the store's commit feed, in commit order:
//   relay/read/live.ts) and is indexed here by author and by hashtag, in the store's order.
// - Every stored event outside the index has created_at <= `watermark`: it was stored before
//   the store told us its newest created_at (reset), or was evicted from the ring (which raises
//   the watermark to its created_at), or did not have the fixed layout (raised the same way).
// - Every event the store deletes is taken out (forget: the store names each one it deletes,
//   NIP-09, NIP-62, bans, purges, expiry); what the store cannot name (another process wrote,
//   a deletion too big to list) clears the index and raises the watermark (reset).
// - A newer version of a replaceable or addressable event deletes the old one in the store,
//   which names it like any deletion. Restricted kinds (DMs) are never answered here: the answer
//   gives up when one would be in it. NIP-40 expiry is checked against the request's time as the
//   store does.
import { fixedLayout, ID_AT, PUBKEY_AT, type NostrEvent } from "../../protocol/event.ts";
import type { CompiledFilter } from "../../protocol/filter.ts";
import { isEphemeral } from "../../protocol/kinds.ts";

/** A filter with more authors or hashtags than this goes to the store. */
const MAX_ANSWER_LISTS = 64;
/** Nor one asking for more events than this. */
const MAX_ANSWER_LIMIT = 500;
/** An event with more hashtags than this is not listed by them (hashtag answers older than it go to the store). */
const MAX_HASHTAGS = 16;
/** Named deletions kept while their batch may still be fanned out (the store names at most 2,048 a call). */
const MAX_UNSEEN = 4096;
/**
 * Entries an answer may take from its lists (other kinds, too new for `until`, expired ones
 * included) before it gives up and goes to the store: the bound on the main thread's work per
 * REQ (~0.35 ms at worst, bench/RESULTS.md).
 */
const MAX_STEPS = 1024;

/** The ring's slots, by seq % size (relay/fanout/ring.ts CatchUpRing). */
export interface Slots {
  readonly json: readonly (string | undefined)[];
  readonly kinds: Float64Array;
  /** 1: only some may read the event (policy/visibility.ts gated). */
  readonly gated: Uint8Array;
  readonly times: Float64Array;
  /** NIP-40 expiration, NaN without one. */
  readonly expires: Float64Array;
}

/**
 * A hashtag's list key. SQLite stores a lone UTF-16 surrogate as U+FFFD, so the store does not
 * tell "\ud800" from "\uFFFD" in a tag value (test/tag-rows.test.ts): neither do the lists.
 */
const hashtagKey = (value: string): string => `#${value.toWellFormed()}`;

export class FeedIndex {
  /**
   * Seqs by author (the pubkey) and by hashtag ("#" + value), oldest first in the store's order
   * (created_at ascending, ties by id descending): an answer reads them from the end.
   */
  private readonly lists = new Map<string, number[]>();
  /** By slot: whether the event is listed (by its author), and the hashtag lists it is in. */
  private readonly listed: Uint8Array;
  private readonly hashtagKeys: (string[] | undefined)[];
  /** Every stored event outside the index has created_at at or below this. */
  private watermark = Number.POSITIVE_INFINITY;
  /** And every one with a hashtag outside the hashtag lists (too many hashtags), at or below this. */
  private tagWatermark = Number.NEGATIVE_INFINITY;
  /**
   * The store tells a batch's deletions before the batch is fanned out (store/types.ts
   * ChangeWatch): an event the same batch stored and deleted (a note and its NIP-09 request
   * together, a replaced version) comes after its deletion. These are the named ids not found
   * in the index, and whether a reset came, until the batch's fanout ends (batchFannedOut).
   */
  private readonly unseen = new Set<string>();
  private resetting = false;

  constructor(private readonly slots: Slots) {
    this.listed = new Uint8Array(slots.json.length);
    this.hashtagKeys = new Array(slots.json.length).fill(undefined);
  }

  /**
   * A newly fanned-out event (in its slot already). The list keys are the parsed event's own
   * strings: a slice of the JSON would keep the whole JSON alive as long as the list lasts.
   * Returns whether the event is known to be stored as its batch left the store (not ephemeral,
   * not deleted by its own batch, not in a batch the store could not account for).
   */
  add(seq: number, json: string, e: Pick<NostrEvent, "pubkey" | "tags">): boolean {
    const slot = this.slot(seq);
    const t = this.slots.times[slot]!;
    if (isEphemeral(this.slots.kinds[slot]!)) return false; // never stored
    if (!fixedLayout(json) || this.resetting) {
      this.watermark = Math.max(this.watermark, t);
      return false;
    }
    if (this.unseen.size > 0 && this.unseen.delete(json.slice(ID_AT, ID_AT + 64))) return false;
    this.listed[slot] = 1;
    this.insert(e.pubkey, seq);
    let keys: string[] | undefined;
    for (const tag of e.tags) {
      if (tag[0] !== "t" || tag[1] === undefined) continue;
      const key = hashtagKey(tag[1]);
      if (keys?.includes(key)) continue;
      // Past MAX_HASHTAGS the rest is not looked at: an event may have thousands of tags.
      if ((keys ??= []).push(key) > MAX_HASHTAGS) {
        this.tagWatermark = Math.max(this.tagWatermark, t);
        return true;
      }
    }
    if (!keys) return true;
    this.hashtagKeys[slot] = keys;
    for (const key of keys) this.insert(key, seq);
    return true;
  }

  private insert(key: string, seq: number): void {
    let list = this.lists.get(key);
    if (!list) this.lists.set(key, (list = []));
    // Most events are the newest of their list: the search starts from the end.
    let lo = 0;
    let hi = list.length;
    if (hi > 0 && !this.before(seq, list[hi - 1]!)) lo = hi;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.before(seq, list[mid]!)) hi = mid;
      else lo = mid + 1;
    }
    list.splice(lo, 0, seq);
  }

  /** The event leaves the ring (called before its slot is cleared). */
  evict(seq: number): void {
    this.watermark = Math.max(this.watermark, this.slots.times[this.slot(seq)]!);
    this.drop(seq);
  }

  /** Events the store deleted, each `id + pubkey` in hex. */
  forget(idsAndPubkeys: readonly string[]): void {
    // Purges and sweeps between batches name events long gone from the ring: only the last
    // call's names can still be fanned out (one batch in flight), so older ones may go.
    if (this.unseen.size + idsAndPubkeys.length > MAX_UNSEEN) this.unseen.clear();
    for (const key of idsAndPubkeys) {
      const id = key.slice(0, 64);
      const seq = this.lists.get(key.slice(64))?.find((s) => this.slots.json[this.slot(s)]!.startsWith(id, ID_AT));
      if (seq !== undefined) this.drop(seq);
      else this.unseen.add(id);
    }
  }

  /**
   * The store changed in ways it could not name: nothing indexed so far answers any more.
   * `batch`: told by a write batch, whose events (some deleted by it) are fanned out next: they
   * are not indexed.
   */
  reset(maxCreatedAt: number, batch = false): void {
    this.resetting = batch;
    this.lists.clear();
    this.listed.fill(0);
    this.hashtagKeys.fill(undefined);
    this.watermark = this.watermark === Number.POSITIVE_INFINITY ? maxCreatedAt : Math.max(this.watermark, maxCreatedAt);
  }

  /** The writer queue has fanned out a batch: what its deletions and resets were told for is past. */
  batchFannedOut(): void {
    this.unseen.clear();
    this.resetting = false;
  }

  /**
   * The store's answer to a single filter of authors or of hashtags, `limit` events newest
   * first, or undefined when the index cannot be sure of it. `now`: NIP-40's, 0 = no expiry;
   * `restricted`: kinds only some may read, which the answer gives up on.
   */
  answer(f: CompiledFilter, limit: number, now: number, restricted: ReadonlySet<number>): string[] | undefined {
    if (this.watermark === Number.POSITIVE_INFINITY || limit <= 0 || limit > MAX_ANSWER_LIMIT) return undefined;
    if (f.ids || f.search !== undefined || f.neverMatch) return undefined;
    // Tag conditions: only hashtags, which the lists hold.
    if (f.tags.length > 1 || (f.tags.length === 1 && f.tags[0]![0] !== "t")) return undefined;
    const hashtags = f.tags.length === 1 ? new Set([...f.tags[0]![1]].map(hashtagKey)) : undefined;
    const drivers = f.authors ?? hashtags;
    if (!drivers || drivers.size > MAX_ANSWER_LISTS) return undefined;
    const floor = hashtags ? Math.max(this.watermark, this.tagWatermark) : this.watermark;
    // A k-way merge from the lists' ends: a heap of the lists by their next entry, newest on top.
    const lists: number[][] = [];
    const at: number[] = [];
    for (const key of drivers) {
      const list = this.lists.get(key);
      if (list) lists.push(list), at.push(list.length - 1);
    }
    const heap = lists.map((_, i) => i);
    const newer = (i: number, j: number) => this.before(lists[j]![at[j]!]!, lists[i]![at[i]!]!);
    const sink = (from: number) => {
      for (let i = from; ; ) {
        const l = 2 * i + 1;
        let top = i;
        if (l < heap.length && newer(heap[l]!, heap[top]!)) top = l;
        if (l + 1 < heap.length && newer(heap[l + 1]!, heap[top]!)) top = l + 1;
        if (top === i) return;
        const swap = heap[i]!;
        heap[i] = heap[top]!;
        heap[top] = swap;
        i = top;
      }
    };
    for (let i = (heap.length >> 1) - 1; i >= 0; i--) sink(i);
    const { json, kinds, times, expires } = this.slots;
    const out: string[] = [];
    let lastTime = 0;
    let lastSeq = -1;
    for (let steps = 0; out.length < limit && heap.length > 0; steps++) {
      if (steps === MAX_STEPS) return undefined;
      const i = heap[0]!;
      const seq = lists[i]![at[i]!--]!;
      if (at[i]! < 0) {
        // That list is done: its slot goes to the heap's last.
        heap[0] = heap[heap.length - 1]!;
        heap.pop();
      }
      sink(0);
      // An event with two of the hashtags asked for is in two lists, and comes out twice in a row.
      if (seq === lastSeq) continue;
      lastSeq = seq;
      const slot = this.slot(seq);
      const t = times[slot]!;
      if (f.since !== undefined && t < f.since) break;
      if (f.until !== undefined && t > f.until) continue;
      if (f.kinds && !f.kinds.has(kinds[slot]!)) continue;
      // Read by author, the hashtags are checked here (an event with too many has none listed:
      // it is at or below the hashtag floor).
      if (hashtags && f.authors && !this.hashtagKeys[slot]?.some((k) => hashtags.has(k))) continue;
      if (now > 0 && expires[slot]! <= now) continue;
      if (restricted.has(kinds[slot]!) || this.slots.gated[slot] === 1) return undefined;
      out.push(json[slot]!);
      lastTime = t;
    }
    // Full: the last is newer than anything outside. Short: every event the filter allows is.
    if (out.length === limit) return lastTime > floor ? out : undefined;
    return (f.since ?? 0) > floor ? out : undefined;
  }

  /** Takes the event out of every list it is in. */
  private drop(seq: number): void {
    const slot = this.slot(seq);
    if (!this.listed[slot]) return;
    this.listed[slot] = 0;
    this.unlist(this.slots.json[slot]!.slice(PUBKEY_AT, PUBKEY_AT + 64), seq);
    for (const key of this.hashtagKeys[slot] ?? []) this.unlist(key, seq);
    this.hashtagKeys[slot] = undefined;
  }

  private unlist(key: string, seq: number): void {
    const list = this.lists.get(key);
    if (!list) return;
    const i = list.lastIndexOf(seq);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.lists.delete(key);
  }

  private slot(seq: number): number {
    return seq % this.slots.json.length;
  }

  /** Does the event at seq a come before the one at b in a list (older; the same second and a higher id)? */
  private before(a: number, b: number): boolean {
    const sa = this.slot(a);
    const sb = this.slot(b);
    const ta = this.slots.times[sa]!;
    const tb = this.slots.times[sb]!;
    if (ta !== tb) return ta < tb;
    const ja = this.slots.json[sa]!;
    const jb = this.slots.json[sb]!;
    for (let i = ID_AT; i < ID_AT + 64; i++) {
      const d = ja.charCodeAt(i) - jb.charCodeAt(i);
      if (d !== 0) return d > 0;
    }
    return false;
  }
}
