// Issue 36: COUNT counts each event once without remembering which it counted (store/sqlite/query.ts
// countJob: a walk leaves out what earlier filters match, a tag walk what the filter's earlier
// values reached). Random filter sets over a small store with many overlaps, against a count by
// hand; the NIP-45 registers likewise.
import { describe, expect, test } from "bun:test";
import { Hll } from "../src/nips/nip45.ts";
import { queryBudget, type BudgetState } from "../src/relay/connection/budget.ts";
import { newSession } from "../src/relay/connection/session.ts";
import { compileFilter, matchAny, type Filter } from "../src/protocol/filter.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { countJob, runToEnd, StatementCache } from "../src/store/sqlite/query.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { storeEvents, testConfig } from "./helpers.ts";

const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const authors = Array.from({ length: 6 }, (_, i) => hex64(`author ${i}`));
const topics = ["a", "b", "c", "d"];
const refs = Array.from({ length: 4 }, (_, i) => hex64(`ref ${i}`));
const base = 1_700_000_000;

/** A deterministic pseudo-random source (xorshift), so a failure is reproducible. */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

function fixture(): { store: SqliteStore; events: NostrEvent[] } {
  const store = new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 1 });
  const r = rng(7);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const events: NostrEvent[] = [];
  for (let i = 0; i < 1500; i++) {
    const tags: string[][] = [];
    // Several t and p tags each (one event reached by several values), repeats included.
    for (let k = Math.floor(r() * 4); k > 0; k--) tags.push(["t", pick(topics)]);
    for (let k = Math.floor(r() * 3); k > 0; k--) tags.push(["p", pick(refs)]);
    events.push({
      id: hex64(`event ${i}`),
      pubkey: pick(authors),
      // Few distinct seconds: many ties of created_at.
      created_at: base + Math.floor(r() * 40),
      kind: pick([1, 6, 7, 7, 1111]),
      tags,
      content: `${pick(["apple", "pear", "plum"])} ${i}`,
      sig: "ab".repeat(64),
    });
  }
  storeEvents(store, events, { deletion: false, vanish: false, search: true, searchSkipKinds: new Set() });
  return { store, events };
}

function randomFilter(r: () => number): Filter {
  const some = <T>(xs: readonly T[]) => {
    const out = xs.filter(() => r() < 0.4);
    // Now and then a repeated value.
    if (out.length > 0 && r() < 0.2) out.push(out[0]!);
    return out.length > 0 ? out : [xs[0]!];
  };
  const f: Filter = {};
  if (r() < 0.35) f.authors = some(authors);
  if (r() < 0.45) f.kinds = some([1, 6, 7, 1111]);
  if (r() < 0.4) f["#t"] = some(topics);
  if (r() < 0.25) f["#p"] = some(refs);
  if (r() < 0.2) f.since = base + Math.floor(r() * 30);
  if (r() < 0.2) f.until = base + 10 + Math.floor(r() * 30);
  if (r() < 0.05) f.ids = [hex64(`event ${Math.floor(r() * 1500)}`), hex64(`event ${Math.floor(r() * 1500)}`)];
  return f;
}

describe("COUNT is exact without a set of what it counted", () => {
  const { store, events } = fixture();
  const cache = new StatementCache(store.db);
  const count = (filters: Filter[], hllOffset?: number) =>
    runToEnd(countJob(cache, { filters, maxSeq: Number.MAX_SAFE_INTEGER, now: 0, hllOffset }));
  const byHand = (filters: Filter[]) => {
    const compiled = filters.map((f) => compileFilter(f, { maxValues: 1000 }));
    return events.filter((e) => matchAny(compiled, e));
  };

  test("random sets of one to four overlapping filters", () => {
    const r = rng(36);
    let nonTrivial = 0;
    for (let i = 0; i < 300; i++) {
      const filters = Array.from({ length: 1 + Math.floor(r() * 4) }, () => randomFilter(r));
      const expected = byHand(filters).length;
      if (expected > 0 && expected < events.length) nonTrivial++;
      expect({ filters, count: count(filters).count }).toEqual({ filters, count: expected });
    }
    expect(nonTrivial).toBeGreaterThan(200);
  });

  test("a filter of everything among others, first or last", () => {
    expect(count([{}, { kinds: [1] }]).count).toBe(events.length);
    expect(count([{ kinds: [1] }, {}]).count).toBe(events.length);
    expect(count([{ "#t": ["a", "b"] }, {}, { authors: [authors[0]!] }]).count).toBe(events.length);
  });

  test("with a NIP-50 search among the filters, before or after the others", () => {
    const apples = (e: NostrEvent) => e.content.startsWith("apple ");
    const expected = events.filter((e) => apples(e) || e.kind === 7 || e.pubkey === authors[1]).length;
    expect(count([{ search: "apple" }, { kinds: [7] }, { authors: [authors[1]!] }]).count).toBe(expected);
    expect(count([{ kinds: [7] }, { authors: [authors[1]!] }, { search: "apple" }]).count).toBe(expected);
    expect(count([{ search: "apple" }, { search: "apple", kinds: [7] }]).count).toBe(events.filter(apples).length);
  });

  test("the HLL registers of a tag filter with several values: each event's pubkey once", () => {
    for (const filter of [{ "#t": ["a", "b", "c"] }, { "#p": [refs[0]!, refs[1]!, refs[0]!], kinds: [1, 7] }] as Filter[]) {
      const hll = new Hll(12);
      const matched = byHand([filter]);
      for (const e of matched) hll.add(Buffer.from(e.pubkey, "hex"));
      expect(count([filter], 12)).toEqual({ count: matched.length, hll: hll.hex() });
    }
  });
});

test("a COUNT reserves what this connection's COUNTs cost, not what its REQs do", () => {
  const ctx: BudgetState = {
    config: testConfig(),
    readCostEstimate: 5,
    countCostEstimate: 5,
    queryGroups: new Map(),
    negGroups: new Map(),
  };
  const s = newSession("203.0.113.7", "relay.example");
  const reserve = (kind: "read" | "count") => {
    const before = s.queryBudget.tokens;
    const read = queryBudget(ctx, s, kind)!;
    const reserved = before - s.queryBudget.tokens;
    read.onEnd!(0);
    return reserved;
  };
  // Cheap REQs, then one COUNT that ran 400 ms.
  for (let i = 0; i < 20; i++) queryBudget(ctx, s, "read")!.onEnd!(1);
  const count = queryBudget(ctx, s, "count")!;
  count.onCost!(400);
  count.onEnd!(400);
  expect(reserve("count")).toBeCloseTo(400, 0);
  expect(reserve("read")).toBeLessThan(5);
});
