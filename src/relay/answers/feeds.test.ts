import { expect, test } from "bun:test";
import { expirationOf } from "../../nips/nip40.ts";
import { serializeEvent, type NostrEvent } from "../../protocol/event.ts";
import { compileFilter, matchFilter } from "../../protocol/filter.ts";
import { isAddressable, isEphemeral, isReplaceable } from "../../protocol/kinds.ts";
import { CatchUpRing } from "../fanout/ring.ts";
import { FeedIndex } from "./feeds.ts";

const NONE = new Set<number>();

/** A ring and its index of feeds, fed as the relay feeds them: the ring first, then the index (relay/read/live.ts liveFeed). */
function feedRing(size: number) {
  const ring = new CatchUpRing(size, 1 << 20);
  const feeds = new FeedIndex(ring);
  ring.indexedBy(feeds);
  const add = (seq: number, e: NostrEvent, json: string) => {
    ring.add(seq, e, json);
    feeds.add(seq, json, e);
  };
  return { feeds, add };
}

// The ring's answers against a model of the store: events stored before start, events fanned
// out since (a small ring, so most are evicted), deletions the store names (also of versions a
// newer one replaces, and within the batch that stored them), changes it cannot name (another
// process's writes), expiry, ephemeral and restricted kinds, hashtags (an event with too many),
// ties on created_at. Every answer the ring gives must be the store's; some must be given.
test.each([7, 11, 23, 99])("every answer the ring gives is the store's (NIP-01 order, ties by id), seed %d", (first) => {
  let seed = first;
  // The high bits of the LCG: its low bits repeat with short periods (rand(2) would alternate).
  const rand = (n: number) => Math.floor(((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * n);
  const hex = (i: number) => i.toString(16).padStart(64, "0");
  const authors = Array.from({ length: 6 }, (_, i) => hex(1000 + i));
  const kinds = [1, 1, 1, 1, 6, 7, 0, 30023, 20001, 4];
  const hashtags = ["a", "b", "c", "d"];
  const restricted = new Set([4]);
  let nextId = 1;
  let clock = 1000;
  const event = (createdAt: number, kind = kinds[rand(kinds.length)]!): NostrEvent => {
    const tags: string[][] = [];
    if (rand(10) === 0) tags.push(["expiration", String(createdAt + rand(30))]);
    for (let i = rand(3); i > 0; i--) tags.push(["t", hashtags[rand(hashtags.length)]!]);
    if (rand(40) === 0) for (let i = 0; i < 20; i++) tags.push(["t", `many${i}`], ["t", hashtags[i % 4]!]);
    // Ids not in created_at order, so ties are settled by id.
    return {
      id: hex(((nextId++ * 7919) % 100_003) + 1),
      pubkey: authors[rand(authors.length)]!,
      created_at: createdAt,
      kind,
      tags,
      content: `c${nextId}`,
      sig: "0".repeat(128),
    };
  };

  // The store: what an anonymous REQ would see.
  const stored = new Map<string, NostrEvent>();
  const newer = (a: NostrEvent, b: NostrEvent) => a.created_at > b.created_at || (a.created_at === b.created_at && a.id < b.id);
  /** Stores as the writer does; returns the versions it replaced (deleted), or undefined if not stored. */
  const store = (e: NostrEvent): NostrEvent[] | undefined => {
    if (isEphemeral(e.kind)) return undefined;
    if (!isReplaceable(e.kind) && !isAddressable(e.kind)) {
      stored.set(e.id, e);
      return [];
    }
    const same = [...stored.values()].filter((o) => o.pubkey === e.pubkey && o.kind === e.kind);
    if (same.some((o) => !newer(e, o))) return undefined;
    for (const o of same) stored.delete(o.id);
    stored.set(e.id, e);
    return same;
  };
  for (let i = 0; i < 40; i++) store(event(clock - rand(200)));
  const newest = () => Math.max(-1, ...[...stored.values()].map((e) => e.created_at));
  const { feeds, add } = feedRing(40);
  feeds.reset(newest());
  let seq = 0;
  /** A write batch of one event, as the relay runs it: deletions told, then the fanout. */
  const batch = (e: NostrEvent, alsoDeleted: NostrEvent[] = []) => {
    const replaced = store(e);
    if (replaced === undefined && !isEphemeral(e.kind)) return; // refused: an older version
    const gone = [...(replaced ?? []), ...alsoDeleted];
    if (gone.length > 0) feeds.forget(gone.map((o) => o.id + o.pubkey));
    add(++seq, e, serializeEvent(e));
    feeds.batchFannedOut();
  };

  const oracle = (raw: Record<string, unknown>, now: number): string[] => {
    const f = compileFilter(raw, { maxValues: 100 });
    return [...stored.values()]
      .filter((e) => matchFilter(f, e) && !restricted.has(e.kind))
      .filter((e) => now === 0 || (expirationOf(e) ?? Number.POSITIVE_INFINITY) > now)
      .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? -1 : 1))
      .slice(0, raw.limit as number)
      .map((e) => e.id);
  };
  const someOf = <T>(xs: T[]) => [...new Set(Array.from({ length: 1 + rand(3) }, () => xs[rand(xs.length)]!))];

  let answered = 0;
  let full = 0;
  let asked = 0;
  const shapes = new Set<string>();
  for (let step = 0; step < 5000; step++) {
    const op = rand(20);
    if (op < 9) {
      // A new event, mostly newer than the last, sometimes in the same second or older.
      clock += rand(2);
      batch(event(clock - (rand(8) === 0 ? rand(50) : 0)));
    } else if (op === 9) {
      // A batch that stores a note and deletes it (the note with its NIP-09 request).
      clock += rand(2);
      const e = event(clock, 1);
      stored.set(e.id, e);
      stored.delete(e.id);
      feeds.forget([e.id + e.pubkey]);
      add(++seq, e, serializeEvent(e));
      feeds.batchFannedOut();
    } else if (op === 10 && stored.size > 0) {
      // The store deletes an event (NIP-09, a ban, a purge), mostly a recent one, and names it;
      // or another process deletes one, and the store can only say that something changed.
      const ids = [...stored.keys()];
      const gone = stored.get(ids[Math.max(0, ids.length - 1 - rand(rand(3) === 0 ? ids.length : 30))]!)!;
      stored.delete(gone.id);
      if (rand(40) > 0) feeds.forget([gone.id + gone.pubkey]);
      else feeds.reset(newest());
    } else if (op === 11) {
      // A batch finds that another process stored an old event, and says so before its fanout;
      // its own event may be one it deleted too.
      const old = event(clock - rand(100), 1);
      stored.set(old.id, old);
      clock += rand(2);
      const e = event(clock, 1);
      const kept = rand(2) === 0;
      if (kept) stored.set(e.id, e);
      feeds.reset(newest(), true);
      add(++seq, e, serializeEvent(e));
      feeds.batchFannedOut();
    } else {
      const raw: Record<string, unknown> = { limit: 1 + rand(8) };
      const shape = rand(4);
      if (shape !== 1) raw.authors = someOf(authors);
      if (shape !== 0) raw["#t"] = someOf(hashtags);
      if (rand(3) > 0) raw.kinds = someOf(kinds);
      if (rand(4) === 0) raw.since = clock - rand(40);
      if (rand(6) === 0) raw.until = clock - rand(10);
      const now = rand(3) === 0 ? 0 : clock + rand(20);
      asked++;
      const got = feeds.answer(compileFilter(raw, { maxValues: 100 }), raw.limit as number, now, restricted);
      if (got === undefined) continue;
      const ids = got.map((j) => (JSON.parse(j) as NostrEvent).id);
      expect({ step, raw, now, ids }).toEqual({ step, raw, now, ids: oracle(raw, now) });
      answered++;
      if (ids.length === raw.limit) full++;
      shapes.add(`${raw.authors ? "authors" : ""}${raw["#t"] ? "#t" : ""}${raw.kinds ? "+kinds" : ""}`);
    }
  }
  if (process.env.RING_TEST_COUNTS) console.log({ asked, answered, full, shapes });
  // The ring answers a share of them, full answers among them (not only empty ones), of each shape.
  expect(answered).toBeGreaterThan(asked / 20);
  expect(full).toBeGreaterThan(asked / 30);
  expect(shapes.size).toBe(6);
});

test("no answers until the store has said what it holds, nor for other shapes of filter", () => {
  const { feeds, add } = feedRing(16);
  const pubkey = "a".repeat(64);
  const e: NostrEvent = { id: "1".repeat(64), pubkey, created_at: 10, kind: 1, tags: [], content: "", sig: "0".repeat(128) };
  const feed = compileFilter({ authors: [pubkey], kinds: [1], limit: 1 }, { maxValues: 100 });
  const at = (id: string, created_at: number) => ({ ...e, id: id.repeat(64), created_at });
  add(1, at("2", 9), serializeEvent(at("2", 9)));
  expect(feeds.answer(feed, 1, 0, NONE)).toBeUndefined();
  // What was added before the store said (at start) is not indexed: the store may hold it or not.
  feeds.reset(5);
  expect(feeds.answer(feed, 1, 0, NONE)).toBeUndefined();
  add(2, e, serializeEvent(e));
  expect(feeds.answer(feed, 1, 0, NONE)).toEqual([serializeEvent(e)]);
  // Neither by author nor by hashtag, or with a tag the lists do not hold: the store's.
  for (const raw of [
    { kinds: [1], limit: 1 },
    { authors: [pubkey], kinds: [1], ids: [e.id], limit: 1 },
    { authors: [pubkey], "#e": [e.id], limit: 1 },
    { "#t": ["x"], "#p": [pubkey], limit: 1 },
  ])
    expect(feeds.answer(compileFilter(raw, { maxValues: 100 }), 1, 0, NONE)).toBeUndefined();
  // JSON of another layout cannot be indexed: answers that would reach it go to the store.
  const other = { ...e, id: "3".repeat(64), created_at: 11 };
  add(3, other, JSON.stringify({ pubkey, id: other.id, created_at: 11, kind: 1, tags: [], content: "", sig: other.sig }));
  expect(feeds.answer(feed, 1, 0, NONE)).toBeUndefined();
  add(4, at("4", 12), serializeEvent(at("4", 12)));
  expect(feeds.answer(feed, 1, 0, NONE)).toHaveLength(1);
  // Older than what the store held at start: the store's to answer.
  feeds.reset(12);
  expect(feeds.answer(feed, 1, 0, NONE)).toBeUndefined();
  // The same second as the newest stored outside the ring: that one may have the lower id.
  feeds.reset(20);
  add(5, at("5", 20), serializeEvent(at("5", 20)));
  expect(feeds.answer(feed, 1, 0, NONE)).toBeUndefined();
  add(6, at("6", 21), serializeEvent(at("6", 21)));
  expect(feeds.answer(feed, 1, 0, NONE)).toHaveLength(1);
  // Everything since a second the store may hold more of: the store's; since the next one: ours.
  const since = (t: number) => compileFilter({ authors: [pubkey], kinds: [1], since: t, limit: 5 }, { maxValues: 100 });
  expect(feeds.answer(since(20), 5, 0, NONE)).toBeUndefined();
  expect(feeds.answer(since(21), 5, 0, NONE)).toHaveLength(1);
});
