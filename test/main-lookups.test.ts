// Point lookups read on the main thread first (store/sqlite/quick.ts): the same answers as the
// readers give, and the reads that would hold the main thread too long go to the readers whole.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { MAIN_MMAP_BYTES, SqliteStore } from "../src/store/sqlite/store.ts";
import { allRows, type PendingWrite } from "../src/store/types.ts";
import { storeJob as job } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-lookups-"));
const path = join(dir, "bunstr.sqlite");
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const author = (k: number) => hex64(`pubkey ${k % 50}`);
const root = hex64("the thread's root");
// 5,000 notes of 50 authors; every 10th replies to one root; 300 under the tag "big", of 2 KB each
// (600 KB: past the bytes a lookup may read on the main thread); one profile per author.
const notes: NostrEvent[] = Array.from({ length: 5000 }, (_, k) => ({
  id: hex64(`event ${k}`),
  pubkey: author(k),
  created_at: 1_700_000_000 + k,
  kind: 1,
  tags: [...(k % 10 === 0 ? [["e", root]] : []), ...(k < 300 ? [["t", "big"]] : [])],
  content: k < 300 ? `big ${k} ${"y".repeat(2000)}` : `note ${k}`,
  sig: "ab".repeat(64),
}));
const profiles: NostrEvent[] = Array.from({ length: 50 }, (_, k) => ({
  id: hex64(`profile ${k}`),
  pubkey: author(k),
  created_at: 1_700_000_000 + k,
  kind: 0,
  tags: [],
  content: JSON.stringify({ name: `author ${k}` }),
  sig: "ab".repeat(64),
}));
let store: SqliteStore;
let readersOnly: SqliteStore;

beforeAll(async () => {
  const writer = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1 });
  writer.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
  const all = [...notes, ...profiles];
  for (let i = 0; i < all.length; i += 1000) {
    const batch: PendingWrite[] = all.slice(i, i + 1000).map((event) => ({ event, json: JSON.stringify(event) }));
    await writer.writeBatch(batch, rules);
  }
  await writer.close();
  store = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1, writerThread: true });
  readersOnly = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1, writerThread: true, mainThreadLookups: false });
  await store.ready?.();
  await readersOnly.ready?.();
}, 60_000);

afterAll(async () => {
  await store?.close();
  await readersOnly?.close();
  rmSync(dir, { recursive: true, force: true });
});

const counts = () => ({ ...store.lookups!.counts });

test("ids, a thread and profiles are answered on the main thread, each the same as the readers' answer", async () => {
  const lookups = [
    job({ ids: [notes[5]!.id, notes[4000]!.id, notes[2500]!.id, hex64("not stored")] }, 4),
    job({ "#e": [root] }, 200),
    job({ "#e": [root] }, 20),
    job({ authors: [author(3), author(7)], kinds: [0] }, 10),
    job({ "#t": ["big"] }, 5),
    job({ ids: [notes[9]!.id], kinds: [0] }, 1),
  ];
  // Without the time bound: a first read prepares its statements, and a CI box may be slow.
  const limits = store.lookups!.limits;
  const perLookupMs = limits.perLookupMs;
  limits.perLookupMs = 60_000;
  const before = counts();
  for (const j of lookups) {
    const mine = await allRows(store.query(j, { owner: {} }));
    expect(mine).toEqual(await allRows(readersOnly.query(j, { owner: {} })));
  }
  expect(counts()).toEqual({ answered: before.answered + lookups.length, handedOn: before.handedOn });
  limits.perLookupMs = perLookupMs;
  // And what they are: NIP-01 order, newest first, limits kept.
  expect(await allRows(store.query(lookups[0]!, { owner: {} }))).toEqual(
    [notes[4000]!, notes[2500]!, notes[5]!].map((e) => JSON.stringify(e)),
  );
  expect(await allRows(store.query(lookups[2]!, { owner: {} }))).toHaveLength(20);
});

test("a lookup that reads more than its share of bytes goes to the readers, and its answer is whole", async () => {
  const before = counts();
  const rows = await allRows(store.query(job({ "#t": ["big"] }, 200), { owner: {} }));
  expect(counts()).toEqual({ answered: before.answered, handedOn: before.handedOn + 1 });
  expect(rows).toEqual(
    notes
      .slice(100, 300)
      .reverse()
      .map((e) => JSON.stringify(e)),
  );
});

test("a read that is not a point lookup never runs on the main thread", async () => {
  const before = counts();
  expect(await allRows(store.query(job({ kinds: [1] }, 10), { owner: {} }))).toHaveLength(10);
  expect(counts()).toEqual(before);
});

test("once the second's share is spent, lookups go to the readers until the next second", async () => {
  const limits = store.lookups!.limits;
  const share = limits.shareMs;
  limits.shareMs = 0;
  try {
    const before = counts();
    const j = job({ ids: [notes[77]!.id] }, 1);
    expect(await allRows(store.query(j, { owner: {} }))).toEqual([JSON.stringify(notes[77])]);
    expect(counts()).toEqual({ answered: before.answered, handedOn: before.handedOn + 1 });
  } finally {
    limits.shareMs = share;
  }
});

test("a lookup still reading when its time is up goes to the readers whole", async () => {
  const limits = store.lookups!.limits;
  const perLookupMs = limits.perLookupMs;
  limits.perLookupMs = 0; // up after its first step: the index entries, before the events
  try {
    const before = counts();
    const j = job({ "#e": [root] }, 30);
    expect(await allRows(store.query(j, { owner: {} }))).toEqual(await allRows(readersOnly.query(j, { owner: {} })));
    expect(counts()).toEqual({ answered: before.answered, handedOn: before.handedOn + 1 });
  } finally {
    limits.perLookupMs = perLookupMs;
  }
});

test("a client whose query budget says stop is not read on the main thread: the readers' line has it", async () => {
  const before = counts();
  const rows = await allRows(store.query(job({ ids: [notes[1]!.id] }, 1), { owner: {}, stop: () => "rate-limited: query budget spent" }));
  // The readers stop a read between slices; this one is done in its first.
  expect(rows).toEqual([JSON.stringify(notes[1])]);
  expect(counts()).toEqual({ answered: before.answered, handedOn: before.handedOn + 1 });
});

test("the main thread's connection maps the file, and its lookups see what the writer thread commits after", async () => {
  expect((store.db.query("PRAGMA mmap_size").get() as { mmap_size: number }).mmap_size).toBe(MAIN_MMAP_BYTES);
  const later: NostrEvent = { ...notes[0]!, id: hex64("committed after the map"), created_at: 1_800_000_000, content: "later" };
  const j = job({ ids: [later.id] }, 1);
  expect(await allRows(store.query(j, { owner: {} }))).toEqual([]);
  const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
  await store.writeBatch([{ event: later, json: JSON.stringify(later) }], rules);
  const before = counts();
  expect(await allRows(store.query(j, { owner: {} }))).toEqual([JSON.stringify(later)]);
  expect(counts()).toEqual({ answered: before.answered + 1, handedOn: before.handedOn });
});
