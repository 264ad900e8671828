// The replaceable events index alone: its bound in bytes, which entries it keeps, what it forgets.
// Its answers against a real store are in test/replaceable-answer.test.ts.
import { expect, test } from "bun:test";
import { serializeEvent, type NostrEvent } from "../../protocol/event.ts";
import { compileFilter } from "../../protocol/filter.ts";
import { ReplaceableIndex } from "./replaceable.ts";

const NONE = new Set<number>();
let next = 0;
const hex = (n: number) => n.toString(16).padStart(64, "0");

function event(pubkey: number, kind: number, content: string, created_at = 1_700_000_000, tags: string[][] = []): NostrEvent {
  return { id: hex(++next), pubkey: hex(pubkey), created_at, kind, tags, content, sig: "0".repeat(128) };
}

const ask = (index: ReplaceableIndex, pubkeys: number[], kinds = [0], now = 0) =>
  index.answer(compileFilter({ authors: pubkeys.map(hex), kinds }, { maxValues: 100 }), 500, now, NONE);

test("bounded in bytes: the least recently used author goes first", () => {
  const index = new ReplaceableIndex();
  const body = "x".repeat(1000);
  for (let p = 1; p <= 10_000; p++) {
    const e = event(p, 0, body);
    index.stored(e, serializeEvent(e), Number.NaN);
    if (p === 10) expect(ask(index, [1])).toHaveLength(1); // author 1 used again
    if (p % 100 === 0) expect(index.size).toBeLessThanOrEqual(1024 * 1024);
  }
  expect(ask(index, [10_000])).toHaveLength(1);
  expect(ask(index, [2])).toBeUndefined();
  // Used at p = 10, it outlived authors 2..10 and more, but not ten thousand newer ones.
  expect(ask(index, [1])).toBeUndefined();
  const kept = Array.from({ length: 10_000 }, (_, i) => i + 1).filter((p) => ask(index, [p]) !== undefined);
  expect(kept.length).toBeGreaterThan(300);
  expect(kept[0]).toBe(10_001 - kept.length);
});

test("an event too big to hold leaves its pair unknown, also after an older version was held", () => {
  const index = new ReplaceableIndex();
  const small = event(1, 3, "");
  index.stored(small, serializeEvent(small), Number.NaN);
  expect(ask(index, [1], [3])).toEqual([serializeEvent(small)]);
  const big = event(
    1,
    3,
    "",
    1_700_000_001,
    Array.from({ length: 300 }, (_, i) => ["p", hex(i)]),
  );
  index.stored(big, serializeEvent(big), Number.NaN);
  expect(ask(index, [1], [3])).toBeUndefined();
});

test("a deletion forgets the deleted event only; nulls are read again when NIP-40 is turned off", () => {
  const index = new ReplaceableIndex();
  const profile = event(1, 0, "{}");
  const relays = event(1, 10002, "");
  for (const e of [profile, relays]) index.stored(e, serializeEvent(e), Number.NaN);
  const f = compileFilter({ authors: [hex(2)], kinds: [0] }, { maxValues: 100 });
  expect(index.wants(f, 500, NONE)).toBe(false); // asked once
  expect(index.wants(f, 500, NONE)).toBe(true);
  index.fill(f, [], 1_700_000_000);
  expect(ask(index, [2], [0], 1_700_000_000)).toEqual([]);
  // Another event of the author (a note) deleted: nothing held changes.
  index.forget([hex(999) + hex(1)]);
  expect(ask(index, [1], [0, 10002], 1_700_000_000)).toHaveLength(2);
  index.forget([relays.id + hex(1)]);
  expect(ask(index, [1], [0, 10002], 1_700_000_000)).toBeUndefined();
  expect(ask(index, [1], [0], 1_700_000_000)).toEqual([serializeEvent(profile)]);
  // A null read with expiry applied may hide an expired event the store would serve without.
  expect(ask(index, [2], [0], 0)).toBeUndefined();
  expect(ask(index, [1], [0], 0)).toEqual([serializeEvent(profile)]);
});

test("fills only from answers that tell every pair", () => {
  const index = new ReplaceableIndex();
  // Asked twice: kept the second time (relay/answers/keep.ts SecondAsk).
  const fills = (raw: object, limit = 500, restricted = NONE) => {
    const f = compileFilter(raw, { maxValues: 100 });
    return [index.wants(f, limit, restricted), index.wants(f, limit, restricted)].join();
  };
  expect(fills({ authors: [hex(1)], kinds: [0] })).toBe("false,true");
  expect(fills({ authors: [hex(1), hex(2)], kinds: [0, 3] }, 3)).toBe("false,false");
  expect(fills({ authors: [hex(1)], kinds: [0], since: 5 })).toBe("false,false");
  expect(fills({ authors: [hex(1)], kinds: [0, 1] })).toBe("false,false");
  expect(fills({ authors: [hex(1)], kinds: [10050] }, 500, new Set([10050]))).toBe("false,false");
  expect(fills({ authors: [hex(1)], kinds: [30023] })).toBe("false,false");
  expect(fills({ kinds: [0] })).toBe("false,false");
  // Two versions of one pair in an answer (rows this index does not understand): nothing kept.
  const f = compileFilter({ authors: [hex(1)], kinds: [0] }, { maxValues: 100 });
  index.fill(f, [serializeEvent(event(1, 0, "a")), serializeEvent(event(1, 0, "b"))], 0);
  expect(ask(index, [1])).toBeUndefined();
});
