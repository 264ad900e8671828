// Answers to one tag value (a thread: `{"#e": [id], limit}`; a hashtag: `{"#t": [topic], limit}`)
// kept after the store gave them, and kept true as events come and go, so that the next REQ of
// the same filter is answered on the main thread with no reader and no SQLite. Clients ask for
// the same threads and hashtags over and over: 43% of issue 15's threads and 75% of its hashtags
// repeat an earlier REQ within 5,000 (bench/RESULTS.md).
//
// Why a kept answer stays the store's:
// - It is taken from a stored read that nothing was committed during (Store.changes.mark), of an
//   anonymous connection (the answer restricted kinds are hidden from), and it holds the newest
//   `limit` events with the tag value, or all of them when fewer. (The filter's second such
//   read, relay/answers/keep.ts SecondAsk: most filters are asked once.)
// - A newly stored event with the tag value (fanout, in commit order; not one its own batch
//   deleted: FeedIndex.add) goes in at its place, and pushes the oldest out of a full answer.
//   One of a restricted kind is not shown to anonymous readers and is left out. A group's event
//   (NIP-29: policy/visibility.ts groupGated) drops the answers it would go in: what anonymous
//   readers may see of a group changes with it (a group turns private), so no answer holds one.
// - An event the store deletes drops every answer holding it (a full one would be short of the
//   next older event, which only the store knows); what the store cannot name clears them all.
// - A NIP-40 expiration past in a full answer sends the REQ to the store; in a short one the
//   event is left out, as the store leaves it.
//
// Bounded in bytes (the JSON held, a little per answer and per event: relay/answers/keep.ts), least
// recently used first.
import type { NostrEvent } from "../../protocol/event.ts";
import type { CompiledFilter } from "../../protocol/filter.ts";
import { newestFirst } from "../../store/semantics.ts";
import { type KeptEvent, keptEvent, keptFromJson, SecondAsk } from "./keep.ts";

/** Bytes of JSON the answers may hold (relay/answers/keep.ts). */
const MAX_BYTES = 4 * 1024 * 1024;
/** An answer bigger than this is not kept. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** Nor one asking for more events than this. */
const MAX_LIMIT = 500;
/** What an answer and an event in it cost beside the JSON: the maps' entries and the objects. */
const ANSWER_BYTES = 200;
const ITEM_BYTES = 120;

interface Answer {
  readonly key: string;
  readonly name: string;
  readonly tag: string;
  readonly limit: number;
  /** Newest first, in NIP-01 order (created_at descending, then id). */
  readonly items: KeptEvent[];
  bytes: number;
}

/**
 * A tag value's key: SQLite stores a lone UTF-16 surrogate as U+FFFD, so the store does not tell
 * "\ud800" from "\uFFFD" in a tag value (test/tag-rows.test.ts), and neither do the keys.
 */
const tagKey = (name: string, value: string): string => `${name}:${value.toWellFormed()}`;

export class TagAnswers {
  /** By filter key (tag and limit), least recently used first (Map order). */
  private readonly answers = new Map<string, Answer>();
  /** The answers of each tag value (one per limit asked). */
  private readonly byTag = new Map<string, Set<Answer>>();
  /** The answers each event is in. */
  private readonly byId = new Map<string, Set<Answer>>();
  private bytes = 0;
  private readonly asked = new SecondAsk();
  /** How many answers are kept for each tag name. */
  private readonly names = new Map<string, number>();

  /**
   * The store's answer to an anonymous reader's filter of one tag value, newest first, or
   * undefined when it is not kept. `now`: NIP-40's, 0 = no expiry.
   */
  answer(f: CompiledFilter, limit: number, now: number, restricted: ReadonlySet<number>): string[] | undefined {
    const key = answerKey(f, limit);
    const a = key === undefined ? undefined : this.answers.get(key);
    if (!a) return undefined;
    const out: string[] = [];
    for (const item of a.items) {
      // An answer kept before a reload restricted its kind.
      if (restricted.has(item.kind)) return this.drop(a);
      if (now > 0 && item.expires <= now) {
        if (a.items.length === a.limit) return this.drop(a);
        continue;
      }
      out.push(item.json);
    }
    this.answers.delete(a.key);
    this.answers.set(a.key, a);
    return out;
  }

  /** Would an anonymous reader's stored answer to this filter be kept? Yes the second time it is asked (SecondAsk). */
  wants(f: CompiledFilter, limit: number): boolean {
    const key = answerKey(f, limit);
    return key !== undefined && this.asked.again(key);
  }

  /** Keeps the store's answer (event JSONs, newest first) to such a filter, read while nothing was committed. */
  fill(f: CompiledFilter, limit: number, jsons: readonly string[], restricted: ReadonlySet<number>): void {
    const key = answerKey(f, limit)!;
    if (this.answers.has(key) || jsons.length > limit) return;
    const items = jsons.map(keptFromJson);
    if (items.some((item) => restricted.has(item.kind))) return;
    const [name, values] = f.tags[0]!;
    const a: Answer = { key, name, tag: tagKey(name, [...values][0]!), limit, items, bytes: ANSWER_BYTES };
    for (const item of items) a.bytes += ITEM_BYTES + item.bytes;
    if (a.bytes > MAX_ANSWER_BYTES) return;
    this.answers.set(key, a);
    this.names.set(name, (this.names.get(name) ?? 0) + 1);
    this.bytes += a.bytes;
    let same = this.byTag.get(a.tag);
    if (!same) this.byTag.set(a.tag, (same = new Set()));
    same.add(a);
    for (const item of items) this.holds(item.id, a);
    this.bound();
  }

  /**
   * A newly fanned-out event the store holds (not one its own batch deleted). `restricted`: of a
   * kind anonymous readers do not see (relay/read/live.ts liveFeed); `group`: a group's event,
   * which drops the answers it would go in.
   */
  stored(e: NostrEvent, json: string, expires: number, restricted: boolean, group = false): void {
    if (this.answers.size === 0 || (restricted && !group)) return;
    let item: KeptEvent | undefined;
    for (const t of e.tags) {
      // Most tags are of names no answer is kept for (a follow list's hundreds of "p").
      if (t[1] === undefined || t[0] === undefined || !this.names.has(t[0])) continue;
      const same = this.byTag.get(tagKey(t[0], t[1]));
      if (!same) continue;
      if (group) {
        for (const a of [...same]) this.drop(a);
        continue;
      }
      item ??= keptEvent(e, json, expires);
      for (const a of same) this.insert(a, item);
    }
    this.bound();
  }

  /** Events the store deleted, each `id + pubkey` in hex. */
  forget(idsAndPubkeys: readonly string[]): void {
    for (const key of idsAndPubkeys) for (const a of this.byId.get(key.slice(0, 64)) ?? []) this.drop(a);
  }

  /** The store changed in ways it could not name. */
  reset(): void {
    this.answers.clear();
    this.names.clear();
    this.byTag.clear();
    this.byId.clear();
    this.bytes = 0;
  }

  /** Bytes held (for tests and the bound). */
  get size(): number {
    return this.bytes;
  }

  private insert(a: Answer, item: KeptEvent): void {
    // Twice: an event with the tag value twice, or fanned out after a read that already saw it.
    if (this.byId.get(item.id)?.has(a)) return;
    const items = a.items;
    // From the front: a fanned-out event is most often the newest.
    let at = 0;
    while (at < items.length && newestFirst(items[at]!, item) < 0) at++;
    items.splice(at, 0, item);
    a.bytes += ITEM_BYTES + item.bytes;
    this.bytes += ITEM_BYTES + item.bytes;
    this.holds(item.id, a);
    if (items.length <= a.limit) return;
    const out = items.pop()!;
    a.bytes -= ITEM_BYTES + out.bytes;
    this.bytes -= ITEM_BYTES + out.bytes;
    this.release(out.id, a);
  }

  private holds(id: string, a: Answer): void {
    let answers = this.byId.get(id);
    if (!answers) this.byId.set(id, (answers = new Set()));
    answers.add(a);
  }

  private release(id: string, a: Answer): void {
    const answers = this.byId.get(id);
    answers?.delete(a);
    if (answers?.size === 0) this.byId.delete(id);
  }

  private drop(a: Answer): undefined {
    if (this.answers.get(a.key) !== a) return undefined;
    this.answers.delete(a.key);
    const left = this.names.get(a.name)! - 1;
    if (left === 0) this.names.delete(a.name);
    else this.names.set(a.name, left);
    this.bytes -= a.bytes;
    const same = this.byTag.get(a.tag)!;
    same.delete(a);
    if (same.size === 0) this.byTag.delete(a.tag);
    for (const item of a.items) this.release(item.id, a);
    return undefined;
  }

  private bound(): void {
    for (const a of this.answers.values()) {
      if (this.bytes <= MAX_BYTES) return;
      this.drop(a);
    }
  }
}

/** The key of a filter of exactly one tag value and a limit, or undefined for any other filter. */
function answerKey(f: CompiledFilter, limit: number): string | undefined {
  if (f.tags.length !== 1 || f.ids || f.authors || f.kinds || f.search !== undefined || f.neverMatch) return undefined;
  if (f.since !== undefined || f.until !== undefined || limit <= 0 || limit > MAX_LIMIT) return undefined;
  const [name, values] = f.tags[0]!;
  // A single letter (compileFilter), as the store indexes tags (store/sqlite/write.ts indexedTag).
  if (values.size !== 1) return undefined;
  return `${limit}:${tagKey(name, [...values][0]!)}`;
}
