import { expect, test } from "bun:test";
import { expirationOf } from "../nips/nip40.ts";
import { serializeEvent, type NostrEvent } from "../protocol/event.ts";
import { compileFilter, matchFilter } from "../protocol/filter.ts";
import { CatchUpRing } from "./ring.ts";
import { isRegular } from "./ring-answer.ts";

// The ring's answers against a model of the store: events stored before start, events fanned
// out since (a small ring, so most are evicted), deletions the store names, changes it cannot
// name (another process's insert of an old event), expiry, replaceable and ephemeral kinds, ties
// on created_at. Every answer the ring gives must be the store's; some must be given.
test.each([7, 11, 23, 99])("every feed the ring answers is the store's answer (NIP-01 order, ties by id), seed %d", (first) => {
  let seed = first;
  // The high bits of the LCG: its low bits repeat with short periods (rand(2) would alternate).
  const rand = (n: number) => Math.floor(((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * n);
  const hex = (i: number) => i.toString(16).padStart(64, "0");
  const authors = Array.from({ length: 6 }, (_, i) => hex(1000 + i));
  const kinds = [1, 1, 1, 6, 7, 0, 30023, 20001];
  let nextId = 1;
  let clock = 1000;
  const event = (createdAt: number): NostrEvent => {
    const tags: string[][] = [];
    if (rand(10) === 0) tags.push(["expiration", String(createdAt + rand(30))]);
    // Ids not in created_at order, so ties are settled by id.
    return {
      id: hex(((nextId++ * 7919) % 100_003) + 1),
      pubkey: authors[rand(authors.length)]!,
      created_at: createdAt,
      kind: kinds[rand(kinds.length)]!,
      tags,
      content: `c${nextId}`,
      sig: "0".repeat(128),
    };
  };

  // The store: what a REQ would see. Ephemeral kinds are never stored.
  const stored = new Map<string, NostrEvent>();
  for (let i = 0; i < 40; i++) {
    const e = event(clock - rand(200));
    if (e.kind < 20000 || e.kind >= 30000) stored.set(e.id, e);
  }
  const newest = () => Math.max(-1, ...[...stored.values()].map((e) => e.created_at));
  const ring = new CatchUpRing(40, 1 << 20);
  ring.feeds.reset(newest());
  let seq = 0;

  const oracle = (raw: Record<string, unknown>, now: number): string[] => {
    const f = compileFilter(raw, { maxValues: 100 });
    const limit = raw.limit as number;
    return [...stored.values()]
      .filter((e) => matchFilter(f, e))
      .filter((e) => now === 0 || (expirationOf(e) ?? Number.POSITIVE_INFINITY) > now)
      .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? -1 : 1))
      .slice(0, limit)
      .map((e) => e.id);
  };

  let answered = 0;
  let full = 0;
  let asked = 0;
  for (let step = 0; step < 4000; step++) {
    const op = rand(20);
    if (op < 9) {
      // A new event, mostly newer than the last, sometimes in the same second or older.
      clock += rand(2);
      const e = event(clock - (rand(8) === 0 ? rand(50) : 0));
      if (e.kind < 20000 || e.kind >= 30000) stored.set(e.id, e);
      ring.add(++seq, e.kind, e.created_at, serializeEvent(e), expirationOf(e) ?? Number.NaN);
    } else if (op === 11 && rand(2) === 0) {
      // A batch that stores an event and deletes it (a note with its NIP-09 request): the store
      // names the deletion before the batch is fanned out. Sometimes the same batch finds that
      // another process wrote (a reset before the fanout) and that one stored an old event.
      clock += rand(2);
      const e = event(clock);
      e.kind = 1;
      if (rand(3) === 0) {
        // The batch's check finds another process's old event, and says so before the fanout.
        const old = event(clock - rand(100));
        old.kind = 1;
        stored.set(old.id, old);
        if (rand(2) === 0) stored.set(e.id, e);
        ring.feeds.reset(newest(), true);
      } else ring.feeds.forget([e.id + e.pubkey]);
      ring.add(++seq, e.kind, e.created_at, serializeEvent(e));
      ring.feeds.batchFannedOut();
    } else if (op < 11 && stored.size > 0) {
      // The store deletes an event (NIP-09, a ban, a purge), mostly a recent one, and names it;
      // or another process deletes one, and the store can only say that something changed.
      const ids = [...stored.keys()];
      const gone = stored.get(ids[Math.max(0, ids.length - 1 - rand(rand(3) === 0 ? ids.length : 30))]!)!;
      stored.delete(gone.id);
      if (rand(40) > 0) ring.feeds.forget([gone.id + gone.pubkey]);
      else ring.feeds.reset(newest());
    } else if (op === 11 && rand(4) === 0) {
      // Another process stores an old event: the store says only its newest created_at.
      const e = event(clock - rand(100));
      e.kind = 1;
      stored.set(e.id, e);
      ring.feeds.reset(newest());
    } else {
      const raw: Record<string, unknown> = {
        authors: [...new Set(Array.from({ length: 1 + rand(3) }, () => authors[rand(authors.length)]!))],
        kinds: [...new Set(Array.from({ length: 1 + rand(2) }, () => kinds[rand(kinds.length)]!))],
        limit: 1 + rand(8),
      };
      if (rand(4) === 0) raw.since = clock - rand(40);
      if (rand(6) === 0) raw.until = clock - rand(10);
      const now = rand(3) === 0 ? 0 : clock + rand(20);
      asked++;
      const got = ring.feeds.answer(compileFilter(raw, { maxValues: 100 }), raw.limit as number, now);
      if (got === undefined) continue;
      expect((raw.kinds as number[]).every(isRegular)).toBe(true);
      const ids = got.map((j) => (JSON.parse(j) as NostrEvent).id);
      expect({ step, raw, now, ids }).toEqual({ step, raw, now, ids: oracle(raw, now) });
      answered++;
      if (ids.length === raw.limit) full++;
    }
  }
  if (process.env.RING_TEST_COUNTS) console.log({ asked, answered, full });
  // The ring answers a share of them, full answers among them (not only empty ones).
  expect(asked).toBeGreaterThan(1000);
  expect(answered).toBeGreaterThan(asked / 20);
  expect(full).toBeGreaterThan(asked / 30);
});

test("no answers until the store has said what it holds, nor for other shapes of filter", () => {
  const ring = new CatchUpRing(16, 1 << 20);
  const pubkey = "a".repeat(64);
  const e: NostrEvent = { id: "1".repeat(64), pubkey, created_at: 10, kind: 1, tags: [], content: "", sig: "0".repeat(128) };
  const feed = compileFilter({ authors: [pubkey], kinds: [1], limit: 1 }, { maxValues: 100 });
  ring.add(1, 1, 9, serializeEvent({ ...e, id: "2".repeat(64), created_at: 9 }));
  expect(ring.feeds.answer(feed, 1, 0)).toBeUndefined();
  // What was added before the store said (at start) is not indexed: the store may hold it or not.
  ring.feeds.reset(5);
  expect(ring.feeds.answer(feed, 1, 0)).toBeUndefined();
  ring.add(2, 1, 10, serializeEvent(e));
  expect(ring.feeds.answer(feed, 1, 0)).toEqual([serializeEvent(e)]);
  for (const raw of [
    { authors: [pubkey], limit: 1 },
    { kinds: [1], limit: 1 },
    { authors: [pubkey], kinds: [1, 0], limit: 1 },
    { authors: [pubkey], kinds: [1], "#t": ["x"], limit: 1 },
    { authors: [pubkey], kinds: [1], ids: [e.id], limit: 1 },
  ])
    expect(ring.feeds.answer(compileFilter(raw, { maxValues: 100 }), 1, 0)).toBeUndefined();
  // JSON of another layout cannot be indexed: answers that would reach it go to the store.
  const other = { ...e, id: "3".repeat(64), created_at: 11 };
  ring.add(3, 1, 11, JSON.stringify({ pubkey, id: other.id, created_at: 11, kind: 1, tags: [], content: "", sig: other.sig }));
  expect(ring.feeds.answer(feed, 1, 0)).toBeUndefined();
  ring.add(4, 1, 12, serializeEvent({ ...e, id: "4".repeat(64), created_at: 12 }));
  expect(ring.feeds.answer(feed, 1, 0)).toHaveLength(1);
  // Older than what the store held at start: the store's to answer.
  ring.feeds.reset(12);
  expect(ring.feeds.answer(feed, 1, 0)).toBeUndefined();
  // The same second as the newest stored outside the ring: that one may have the lower id.
  ring.feeds.reset(20);
  ring.add(5, 1, 20, serializeEvent({ ...e, id: "5".repeat(64), created_at: 20 }));
  expect(ring.feeds.answer(feed, 1, 0)).toBeUndefined();
  ring.add(6, 1, 21, serializeEvent({ ...e, id: "6".repeat(64), created_at: 21 }));
  expect(ring.feeds.answer(feed, 1, 0)).toHaveLength(1);
});
