// The reader pool's line (store/sqlite/readers.ts, lanes.ts): a point lookup's first slice goes
// before the heavier jobs its address group has waiting, and its answer is the same.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { isPointLookup } from "../src/store/sqlite/lanes.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { allRows, type PendingWrite } from "../src/store/types.ts";
import { storeJob as job } from "./helpers.ts";

const N = 20_000;
const dir = mkdtempSync(join(tmpdir(), "bunstr-lanes-"));
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const events: NostrEvent[] = Array.from({ length: N }, (_, k) => ({
  id: hex64(`event ${k}`),
  pubkey: hex64(`pubkey ${k % 100}`),
  created_at: 1_700_000_000 + k,
  kind: 1,
  tags: [["t", "all"]],
  content: `note ${k} ${"x".repeat(200)}`,
  sig: "ab".repeat(64),
}));
let store: SqliteStore;

beforeAll(async () => {
  const writer = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  writer.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
  for (let i = 0; i < N; i += 2000) {
    const batch: PendingWrite[] = events.slice(i, i + 2000).map((event) => ({ event, json: JSON.stringify(event) }));
    await writer.writeBatch(batch, rules);
  }
  await writer.close();
  // One reader, so the order its jobs run in is the order of the line; every read in that line
  // (a point lookup is otherwise answered on the main thread first: quick.ts, main-lookups.test.ts).
  store = new SqliteStore({
    path: join(dir, "bunstr.sqlite"),
    synchronous: "normal",
    readerWorkers: 1,
    writerThread: true,
    mainThreadLookups: false,
  });
  await store.ready?.();
}, 60_000);

afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("which filters are point lookups", () => {
  const id = "ab".repeat(32);
  expect(isPointLookup([{ ids: [id, id] }], [2])).toBe(true);
  expect(isPointLookup([{ ids: Array(21).fill(id) }], [21])).toBe(false);
  expect(isPointLookup([{ "#e": [id] }], [200])).toBe(true);
  expect(isPointLookup([{ "#e": [id] }], [500])).toBe(false);
  expect(isPointLookup([{ "#e": [id, id] }], [100])).toBe(false);
  expect(isPointLookup([{ "#t": ["a"], authors: [id] }], [100])).toBe(false);
  expect(isPointLookup([{ kinds: [0, 3, 10002], authors: [id] }], [10])).toBe(true);
  expect(isPointLookup([{ kinds: [1], authors: [id] }], [10])).toBe(false);
  expect(isPointLookup([{ kinds: [0], authors: Array(5).fill(id) }], [10])).toBe(false);
  expect(isPointLookup([{ ids: [id] }, { ids: [id] }], [1, 1])).toBe(false);
  expect(isPointLookup([{ ids: [id], search: "x" }], [1])).toBe(false);
});

test("a point lookup's first slice goes before the heavy jobs its group has waiting, with the same answer", async () => {
  const order: string[] = [];
  // Heavy reads of one address group: many slices each (5,000 events of 300+ bytes).
  const heavy = Array.from({ length: 6 }, async (_, i) => {
    let first = true;
    for await (const _batch of store.query(job({ kinds: [1] }, 5000), { owner: {}, group: "g" })) {
      if (first) order.push(`heavy${i}`), (first = false);
    }
  });
  const ids = [events[5]!.id, events[17_000]!.id, events[12_345]!.id];
  const lookup = (async () => {
    const rows = await allRows(store.query(job({ ids }, 3), { owner: {}, group: "g" }));
    order.push("lookup");
    return rows;
  })();
  const rows = await lookup;
  await Promise.all(heavy);
  // The reader held two slices when the lookup came (SLICES_AHEAD): it came right after them,
  // not after the four other heavy jobs' first slices.
  expect(order.indexOf("lookup")).toBeLessThanOrEqual(2);
  expect(order.length).toBe(7);
  // NIP-01 order: newest first.
  expect(rows).toEqual([events[17_000]!, events[12_345]!, events[5]!].map((e) => JSON.stringify(e)));
}, 60_000);
