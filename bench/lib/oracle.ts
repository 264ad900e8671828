// An in-memory reference relay for the bench: fed events in order, it keeps what NIP-01 says a
// relay stores, and answers REQ filter lists with exactly what a correct relay returns.
//
// Storage (NIP-01):
//   regular kinds                         kept (each id once)
//   replaceable 0, 3, 10000–19999         only the newest per (pubkey, kind); equal created_at: lowest id
//   addressable 30000–39999               the same per (pubkey, kind, first d tag value, "" without one)
//   ephemeral 20000–29999                 not stored
// (No NIP-09 deletions, NIP-40 expirations or NIP-62 vanish: the bench corpus has none of them.)
//
// Answers: per filter, the stored events for which bench/lib/match.ts naiveMatch() holds, newest
// first, ties by lowest id (nip01Order), at most the filter's limit (as the relay applies it: a
// missing limit is `defaultLimit`, a bigger one is clamped to `maxLimit`, and all of a REQ's limits
// are scaled down to fit `maxEventsPerReq`; defaults = the relay's config defaults). A REQ's answer
// is the union of its filters' answers without duplicates, in nip01Order: bunstr merges multi-filter
// results by time (src/store/sqlite/query.ts runQuery), so the order of the whole answer is defined.
//
// The indexes (by author, kind, tag, id) only pick candidates, each list kept in nip01Order; every
// event returned passed naiveMatch.
import type { NostrEvent } from "../../src/protocol/event.ts";
import { naiveMatch, naiveOf, nip01Order, type Naive, type RawFilter } from "./match.ts";

export const isReplaceableKind = (k: number): boolean => k === 0 || k === 3 || (k >= 10000 && k < 20000);
export const isEphemeralKind = (k: number): boolean => k >= 20000 && k < 30000;
export const isAddressableKind = (k: number): boolean => k >= 30000 && k < 40000;

/** The first d tag's value ("" without one), as NIP-01 addresses an addressable event. */
export const dTagOf = (e: NostrEvent): string => {
  for (const t of e.tags) if (t[0] === "d") return t[1] ?? "";
  return "";
};

/** What storage decisions depend on: enough to count what a relay keeps (Oracle.addMeta). */
export interface EventMeta {
  id: string;
  pubkey: string;
  created_at: number;
  kind: number;
  /** The d tag value of an addressable event (see dTagOf); ignored for other kinds. */
  d?: string;
}

export const metaOf = (e: NostrEvent): EventMeta => ({
  id: e.id,
  pubkey: e.pubkey,
  created_at: e.created_at,
  kind: e.kind,
  d: isAddressableKind(e.kind) ? dTagOf(e) : undefined,
});

/** The slot a replaceable / addressable event competes for, undefined for other kinds. */
export function slotKey(e: EventMeta | NostrEvent): string | undefined {
  if (isReplaceableKind(e.kind)) return `${e.kind}:${e.pubkey}`;
  if (isAddressableKind(e.kind)) return `${e.kind}:${e.pubkey}:${"tags" in e ? dTagOf(e) : (e.d ?? "")}`;
  return undefined;
}

/** True when `a` wins its slot against `b`: newer, or as new with the lower id. */
const beats = (a: { created_at: number; id: string }, b: { created_at: number; id: string }): boolean =>
  a.created_at > b.created_at || (a.created_at === b.created_at && a.id < b.id);

export type AddOutcome =
  /** stored (a regular event, or the newest version so far) */
  | "stored"
  /** stored, and it replaced an older version */
  | "replaced"
  /** not stored: a newer (or tied, lower-id) version is already stored */
  | "older"
  /** not stored: this id was added before */
  | "duplicate"
  /** not stored: ephemeral */
  | "ephemeral";

export interface OracleOptions {
  /** Keep events and indexes so the oracle can answer queries (default). False: only count what is stored. */
  keepEvents?: boolean;
  /** The relay's [limits] default_limit (500). */
  defaultLimit?: number;
  /** The relay's [limits] max_limit (5000). */
  maxLimit?: number;
  /** The relay's [limits] max_events_per_req (10000). */
  maxEventsPerReq?: number;
  /** Drop removed (replaced) events from all index lists after this many removals (default 20,000). */
  sweepEvery?: number;
}

interface List {
  events: NostrEvent[];
  /** Unsorted appends since the last sort. */
  dirty: boolean;
  /** The oracle's removal count when the list was last filtered. */
  stale: number;
}

export class Oracle {
  readonly keepEvents: boolean;
  readonly defaultLimit: number;
  readonly maxLimit: number;
  readonly maxEventsPerReq: number;
  private readonly sweepEvery: number;
  /** Stored events by id (keepEvents only). */
  private readonly byId = new Map<string, NostrEvent>();
  /** The current version of each replaceable / addressable slot. */
  private readonly slots = new Map<string, { id: string; created_at: number; event?: NostrEvent }>();
  /** Every id added (to spot duplicates). Counting mode keeps only slot events' ids here. */
  private readonly seen = new Set<string>();
  /** Ids added but not stored now: replaced, older than the stored version, or ephemeral. */
  private readonly gone = new Set<string>();
  private readonly all: List = { events: [], dirty: false, stale: 0 };
  private readonly byAuthor = new Map<string, List>();
  private readonly byKind = new Map<number, List>();
  /** Tag name -> value -> events with such a tag (any position's t[1], as naiveMatch reads it). */
  private readonly byTag = new Map<string, Map<string, List>>();
  private stored = 0;
  private added = 0;

  constructor(opts: OracleOptions = {}) {
    this.keepEvents = opts.keepEvents ?? true;
    this.defaultLimit = opts.defaultLimit ?? 500;
    this.maxLimit = opts.maxLimit ?? 5000;
    this.maxEventsPerReq = opts.maxEventsPerReq ?? 10000;
    this.sweepEvery = opts.sweepEvery ?? 20_000;
  }

  /** Events stored now. */
  get size(): number {
    return this.stored;
  }

  /** Events added (including replaced, older and ephemeral ones). */
  get addedCount(): number {
    return this.added;
  }

  /**
   * Adds one event, applying NIP-01 storage rules. In counting mode (keepEvents false) duplicate
   * regular events are not detected (the corpus has none), to keep memory flat.
   */
  add(e: NostrEvent): AddOutcome {
    return this.addMeta(e, e);
  }

  /**
   * Adds an event known only by its meta (counting mode only: a relay's storage decisions need
   * no more), e.g. read from the head of a corpus line without parsing the rest.
   */
  addMeta(m: EventMeta): AddOutcome;
  addMeta(e: EventMeta, full: NostrEvent | undefined): AddOutcome;
  addMeta(e: EventMeta, full?: NostrEvent): AddOutcome {
    if (this.keepEvents && !full) throw new Error("oracle: keeps events, so it needs whole events (add)");
    this.added++;
    const slot = slotKey(e);
    if (this.keepEvents || slot !== undefined || isEphemeralKind(e.kind)) {
      if (this.seen.has(e.id)) return "duplicate";
      this.seen.add(e.id);
    }
    if (isEphemeralKind(e.kind)) {
      this.gone.add(e.id);
      return "ephemeral";
    }
    let outcome: AddOutcome = "stored";
    if (slot !== undefined) {
      const cur = this.slots.get(slot);
      if (cur && !beats(e, cur)) {
        this.gone.add(e.id);
        return "older";
      }
      if (cur) {
        this.gone.add(cur.id);
        this.stored--;
        if (cur.event) this.unindex(cur.event);
        outcome = "replaced";
      }
      this.slots.set(slot, { id: e.id, created_at: e.created_at, event: this.keepEvents ? full : undefined });
    }
    this.stored++;
    if (full && this.keepEvents) this.index(full);
    return outcome;
  }

  /** Is this (added) event stored now? Counting mode assumes the id was added. */
  has(id: string): boolean {
    return this.keepEvents ? this.byId.has(id) : this.seenButStored(id);
  }

  /** Was this event added but is not stored (replaced, older than the stored version, ephemeral)? */
  isGone(id: string): boolean {
    return this.gone.has(id);
  }

  /** The stored event with this id (keepEvents only). */
  get(id: string): NostrEvent | undefined {
    return this.byId.get(id);
  }

  /** Stored events of one kind, nip01Order (keepEvents only). */
  ofKind(kind: number): readonly NostrEvent[] {
    const l = this.byKind.get(kind);
    return l ? this.sorted(l) : [];
  }

  /** Stored events with a tag (name, value), nip01Order (keepEvents only). */
  withTag(name: string, value: string): readonly NostrEvent[] {
    const l = this.byTag.get(name)?.get(value);
    return l ? this.sorted(l) : [];
  }

  /** Stored events of an author, nip01Order (keepEvents only). */
  ofAuthor(pubkey: string): readonly NostrEvent[] {
    const l = this.byAuthor.get(pubkey);
    return l ? this.sorted(l) : [];
  }

  /** Distinct values of a tag over stored events (keepEvents only). */
  tagValues(name: string): string[] {
    const out: string[] = [];
    for (const [v, l] of this.byTag.get(name) ?? []) if (this.sorted(l).length > 0) out.push(v);
    return out;
  }

  /** Authors with stored events (keepEvents only). */
  authors(): string[] {
    return [...this.byAuthor].filter(([, l]) => this.sorted(l).length > 0).map(([a]) => a);
  }

  /** The per-filter limits the relay applies to a REQ (src/relay/read/stored.ts). */
  limitsFor(filters: readonly RawFilter[]): number[] {
    const per = filters.map((f) => Math.min(typeof f.limit === "number" ? f.limit : this.defaultLimit, this.maxLimit));
    const total = per.reduce((a, b) => a + b, 0);
    if (total <= this.maxEventsPerReq) return per;
    return per.map((n) => (n === 0 ? 0 : Math.max(1, Math.floor((n * this.maxEventsPerReq) / total))));
  }

  /** The answer to one filter with this limit: matching stored events, nip01Order, at most `limit`. */
  answerFilter(f: RawFilter, limit: number): NostrEvent[] {
    if (!this.keepEvents) throw new Error("oracle: created with keepEvents false, cannot answer queries");
    if (limit <= 0) return [];
    const n = naiveOf(f);
    const out: NostrEvent[] = [];
    if (n.ids) {
      for (const id of new Set(n.ids)) {
        const e = this.byId.get(id);
        if (e && naiveMatch(n, e)) out.push(e);
      }
    } else {
      // Each candidate list is in nip01Order: merge them (a heap of cursors), newest first, until
      // `limit` distinct matching events are out. Only events reached are checked.
      const heap = new CursorHeap();
      for (const list of this.candidates(n)) {
        const evs = this.sorted(list);
        const c: Cursor = { evs, k: n.until === undefined ? 0 : firstAtOrBefore(evs, n.until), cur: undefined };
        if (advance(c, n)) heap.push(c);
      }
      const seen = new Set<string>();
      while (out.length < limit && heap.size > 0) {
        const c = heap.top();
        const e = c.cur!;
        if (!seen.has(e.id)) seen.add(e.id), out.push(e);
        c.k++;
        if (advance(c, n)) heap.replaceTop(c);
        else heap.pop();
      }
      return out;
    }
    out.sort(nip01Order);
    return out.length > limit ? out.slice(0, limit) : out;
  }

  /** The answer to a REQ: each filter's answer (limits as the relay applies them), merged, deduplicated, nip01Order. */
  answer(filters: readonly RawFilter[]): NostrEvent[] {
    const limits = this.limitsFor(filters);
    const byId = new Map<string, NostrEvent>();
    filters.forEach((f, i) => {
      for (const e of this.answerFilter(f, limits[i]!)) byId.set(e.id, e);
    });
    return [...byId.values()].sort(nip01Order);
  }

  /** The candidate lists of the most selective indexed condition. */
  private candidates(n: Naive): List[] {
    const options: List[][] = [];
    if (n.authors) options.push(n.authors.map((a) => this.byAuthor.get(a)).filter((l): l is List => l !== undefined));
    for (const [name, values] of n.tags) {
      const m = this.byTag.get(name);
      options.push(m ? values.map((v) => m.get(v)).filter((l): l is List => l !== undefined) : []);
    }
    if (n.kinds) options.push(n.kinds.map((k) => this.byKind.get(k)).filter((l): l is List => l !== undefined));
    if (options.length === 0) return [this.all];
    let best = options[0]!;
    let bestCost = Infinity;
    for (const o of options) {
      let cost = 0;
      for (const l of o) cost += l.events.length;
      if (cost < bestCost) (best = o), (bestCost = cost);
    }
    return [...new Set(best)];
  }

  private index(e: NostrEvent): void {
    this.byId.set(e.id, e);
    const put = <K>(m: Map<K, List>, k: K) => {
      let l = m.get(k);
      if (!l) m.set(k, (l = { events: [], dirty: false, stale: 0 }));
      if (l.events[l.events.length - 1] === e) return; // the same tag twice
      l.events.push(e);
      l.dirty = true;
    };
    this.all.events.push(e);
    this.all.dirty = true;
    put(this.byAuthor, e.pubkey);
    put(this.byKind, e.kind);
    for (const t of e.tags) {
      if (t.length < 2) continue;
      let m = this.byTag.get(t[0]!);
      if (!m) this.byTag.set(t[0]!, (m = new Map()));
      put(m, t[1]!);
    }
  }

  /**
   * Removed events stay in their lists until the next sort of each list (a replaced follow list
   * is in hundreds of p-tag lists); cursors skip them (`live`).
   */
  private unindex(e: NostrEvent): void {
    this.byId.delete(e.id);
    this.removedSinceSort++;
    // Removed events would stay alive in lists nobody sorts (every p-tag list of a replaced follow
    // list): sweep all lists now and then.
    if (this.removedSinceSort - this.sweptAt >= this.sweepEvery) this.sweep();
  }

  private sweptAt = 0;

  /** Drops removed events from every list (keeps each list's order state). */
  private sweep(): void {
    const lists: List[] = [this.all, ...this.byAuthor.values(), ...this.byKind.values()];
    for (const m of this.byTag.values()) for (const l of m.values()) lists.push(l);
    for (const l of lists) {
      if (l.stale === this.removedSinceSort) continue;
      l.events = l.events.filter(this.live);
      l.stale = this.removedSinceSort;
    }
    this.sweptAt = this.removedSinceSort;
  }

  private readonly live = (e: NostrEvent): boolean => this.byId.get(e.id) === e;
  private removedSinceSort = 0;

  /** The list in nip01Order; events removed meanwhile are dropped when it is re-sorted. */
  private sorted(l: List): NostrEvent[] {
    if (l.dirty || l.stale !== this.removedSinceSort) {
      l.events = l.events.filter(this.live);
      if (l.dirty) l.events.sort(nip01Order);
      l.dirty = false;
      l.stale = this.removedSinceSort;
    }
    return l.events;
  }

  private seenButStored(id: string): boolean {
    return !this.gone.has(id);
  }
}

/** Index of the first event with created_at <= until in a nip01Order (descending) list. */
function firstAtOrBefore(evs: readonly NostrEvent[], until: number): number {
  let lo = 0;
  let hi = evs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (evs[mid]!.created_at > until) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

interface Cursor {
  evs: readonly NostrEvent[];
  /** Position of `cur` in evs. */
  k: number;
  cur: NostrEvent | undefined;
}

/** Moves the cursor to the next event (from position k on) that matches; false when there is none. */
function advance(c: Cursor, n: Naive): boolean {
  for (; c.k < c.evs.length; c.k++) {
    const e = c.evs[c.k]!;
    if (n.since !== undefined && e.created_at < n.since) break;
    if (n.kinds && !n.kinds.includes(e.kind)) continue; // a cheap pre-check; naiveMatch decides
    if (naiveMatch(n, e)) {
      c.cur = e;
      return true;
    }
  }
  c.cur = undefined;
  return false;
}

/** A binary min-heap of cursors by their current event in nip01Order. */
class CursorHeap {
  private readonly a: Cursor[] = [];
  get size(): number {
    return this.a.length;
  }
  top(): Cursor {
    return this.a[0]!;
  }
  push(c: Cursor): void {
    const a = this.a;
    a.push(c);
    for (let i = a.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (nip01Order(a[i]!.cur!, a[p]!.cur!) >= 0) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): void {
    const last = this.a.pop()!;
    if (this.a.length > 0) this.replaceTop(last);
  }
  /** Puts `c` at the top and sifts it down. */
  replaceTop(c: Cursor): void {
    const a = this.a;
    a[0] = c;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const m = r < a.length && nip01Order(a[r]!.cur!, a[l]!.cur!) < 0 ? r : l;
      if (nip01Order(a[m]!.cur!, a[i]!.cur!) >= 0) break;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
  }
}
