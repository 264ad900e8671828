// The live-subscription index: for an event, find the candidate filters without looking at
// every subscription. Each filter is indexed under one field (ids, then authors, then its first
// tag, then one NIP-50 search term, then kinds, else "others"); a candidate is confirmed with a
// full match. Search filters under kinds made every event re-read (tokenized) once per search
// filter: 8,000 of them froze the relay on four 60 KB notes. Under a term, an event's words are
// computed once (nips/nip50.ts eventWords) and only the filters filed under one of them are
// confirmed, against those same words.
import { eventWords } from "../../nips/nip50.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import { matchFilter, type CompiledFilter } from "../../protocol/filter.ts";

export interface Indexed<G> {
  /** Shared by all entries of one group: `mark` dedupes a group within one match() call. */
  holder: { readonly group: G; mark: number };
  filter: CompiledFilter;
}

type Bucket<G> = Set<Indexed<G>>;
/** A key's entries: most keys have one (a feed's authors), kept without a Set of its own. */
type Slot<G> = Indexed<G> | Bucket<G>;

export class LiveIndex<G> {
  private readonly ids = new Map<string, Slot<G>>();
  private readonly authors = new Map<string, Slot<G>>();
  private readonly tags = new Map<string, Slot<G>>();
  /** Search filters by their index term (CompiledSearch.indexTerm). */
  private readonly words = new Map<string, Slot<G>>();
  /**
   * The skipKinds of the filters under `words`, by content (one per configuration in use), with
   * how many filters hold each: an event of a kind all of them skip is not tokenized (a DM never
   * matches a search, and once any live search existed, every fanned-out event was read).
   */
  private readonly wordSkips = new Map<string, { kinds: ReadonlySet<number>; n: number }>();
  private readonly kinds = new Map<number, Slot<G>>();
  private readonly others: Bucket<G> = new Set();
  private stamp = 0;

  /** Indexes every filter of a group; returns the entries to pass back to remove(). */
  add(group: G, filters: readonly CompiledFilter[]): Indexed<G>[] {
    const entries: Indexed<G>[] = [];
    const holder = { group, mark: 0 };
    for (const filter of filters) {
      if (filter.neverMatch) continue;
      const entry = { holder, filter };
      this.eachKey(filter, (map, key) => put(map, key, entry));
      if (this.underWord(filter)) this.countSkips(filter.search!.skipKinds, 1);
      entries.push(entry);
    }
    return entries;
  }

  remove(entries: readonly Indexed<G>[]): void {
    for (const entry of entries) {
      this.eachKey(entry.filter, (map, key) => drop(map, key, entry));
      if (this.underWord(entry.filter)) this.countSkips(entry.filter.search!.skipKinds, -1);
    }
  }

  /** Filed under a search term (eachKey's order: ids, authors, tags first). */
  private underWord(f: CompiledFilter): boolean {
    return !f.ids && !f.authors && f.tags.length === 0 && f.search?.indexTerm !== undefined;
  }

  private countSkips(kinds: ReadonlySet<number> | undefined, by: 1 | -1): void {
    const set = kinds ?? NO_KINDS;
    const key = [...set].sort((a, b) => a - b).join(",");
    const s = this.wordSkips.get(key) ?? { kinds: set, n: 0 };
    s.n += by;
    if (s.n > 0) this.wordSkips.set(key, s);
    else this.wordSkips.delete(key);
  }

  /** Every search filed under a word skips this kind. */
  private skippedByAll(kind: number): boolean {
    for (const s of this.wordSkips.values()) if (!s.kinds.has(kind)) return false;
    return true;
  }

  /** Calls `hit` once per group with a filter matching the event. */
  match(e: NostrEvent, hit: (group: G) => void): void {
    const stamp = ++this.stamp;
    const one = (entry: Indexed<G>) => {
      const h = entry.holder;
      if (h.mark === stamp || !matchFilter(entry.filter, e)) return;
      h.mark = stamp;
      hit(h.group);
    };
    const check = (slot: Slot<G> | undefined) => {
      if (slot === undefined) return;
      if (slot instanceof Set) for (const entry of slot) one(entry);
      else one(slot);
    };
    check(this.ids.get(e.id));
    check(this.authors.get(e.pubkey));
    for (const t of e.tags) if (t.length > 1 && t[0]!.length === 1) check(this.tags.get(t[0] + t[1]!));
    if (this.words.size > 0 && !this.skippedByAll(e.kind)) {
      // From the smaller side: a 60 KB note has thousands of words, a relay a few search terms.
      const words = eventWords(e);
      if (this.words.size < words.size) {
        for (const [term, slot] of this.words) if (words.has(term)) check(slot);
      } else for (const w of words) check(this.words.get(w));
    }
    check(this.kinds.get(e.kind));
    check(this.others);
  }

  /** Calls `fn` with each (map, key) a filter is indexed under (a callback: no tuple per key; a join indexes a feed's 50 authors). */
  private eachKey(f: CompiledFilter, fn: (map: Map<any, Slot<G>> | Bucket<G>, key: unknown) => void): void {
    if (f.ids) for (const id of f.ids) fn(this.ids, id);
    else if (f.authors) for (const a of f.authors) fn(this.authors, a);
    else if (f.tags.length > 0) {
      const [name, values] = f.tags[0]!;
      for (const v of values) fn(this.tags, name + v);
    } else if (f.search?.indexTerm !== undefined) fn(this.words, f.search.indexTerm);
    else if (f.kinds) for (const k of f.kinds) fn(this.kinds, k);
    else fn(this.others, undefined);
  }
}

const NO_KINDS: ReadonlySet<number> = new Set();

function put<G>(map: Map<unknown, Slot<G>> | Bucket<G>, key: unknown, entry: Indexed<G>): void {
  if (map instanceof Set) return void map.add(entry);
  const b = map.get(key);
  if (b === undefined) map.set(key, entry);
  else if (b instanceof Set) b.add(entry);
  else if (b !== entry) map.set(key, new Set([b, entry]));
}

function drop<G>(map: Map<unknown, Slot<G>> | Bucket<G>, key: unknown, entry: Indexed<G>): void {
  if (map instanceof Set) return void map.delete(entry);
  const b = map.get(key);
  if (b === entry) return void map.delete(key);
  if (!(b instanceof Set)) return;
  b.delete(entry);
  if (b.size === 0) map.delete(key);
  else if (b.size === 1) map.set(key, b.values().next().value!);
}
