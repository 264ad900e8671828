// NIP-29 at the store: Visibility.hiddenGroups leaves out the events of groups a reader may not
// see (an h tag naming one) and the relay's metadata of hidden groups (39000-39009 by the relay
// key, by d), in every walk: REQ (each index a filter can drive), COUNT (the count-everything
// shortcut too), NEG items and search; with a short list (tag index probes) and a long one
// (10,000 ids, the event's own tags against the list). And GroupRecords, what the group state
// is rebuilt from. Runs on Postgres too (test/postgres-suite.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { freshRelayKey, signEvent } from "../src/protocol/schnorr.ts";
import type { PostgresStore } from "../src/store/postgres/store.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { allRows, type ReadScope, type Store, type Visibility, type WriteRules } from "../src/store/types.ts";
import { openBulk } from "../src/cli/options.ts";
import { databaseFor, databaseUrl, dropDatabase, onPostgres } from "./postgres-env.ts";
import { now, openTestStore, signer, testConfig } from "./helpers.ts";

const RULES: WriteRules = { deletion: true, vanish: true, search: true, searchSkipKinds: new Set() };
const writeEvents = (s: Store, events: NostrEvent[]) =>
  s.writeBatch(
    events.map((event) => ({ event, json: serializeEvent(event) })),
    RULES,
  );

const dir = mkdtempSync(join(tmpdir(), "bunstr-group-vis-"));
let store: Store;

const relay = freshRelayKey();
const alice = signer();
const bob = signer();
const t = now() - 1000;
/** A group id that is 64 hex: the SQLite tag index keeps such values as bytes. */
const HEXGROUP = "ab".repeat(32);

const inGroup = (g: string, i: number, extra: string[][] = []) =>
  alice.sign({ kind: 9, content: `message ${i} in ${g} zebra`, created_at: t + i, tags: [["h", g], ...extra] });
/** Stored with two h tags (before groups were on: refused on write since), one of them hidden: hidden. */
const twoGroups = inGroup("open", 0, [["h", "secret"]]);
const secret = [inGroup("secret", 1), inGroup("secret", 2, [["t", "news"]]), inGroup(HEXGROUP, 3), twoGroups];
const open = [inGroup("open", 4), inGroup("open", 5, [["t", "news"]])];
const plain = [
  bob.sign({ kind: 1, content: "no group zebra", created_at: t + 6, tags: [["t", "news"]] }),
  // Text that looks like an h tag, in the content and in another tag's value: no group.
  bob.sign({ kind: 9, content: '["h","secret"] zebra', created_at: t + 7, tags: [["x", '["h","secret"]']] }),
];
const meta = (g: string, i: number) =>
  signEvent(
    {
      kind: 39000,
      created_at: t + 10 + i,
      tags: [
        ["d", g],
        ["name", g],
      ],
      content: "",
    },
    relay,
  );
const secretMeta = meta("secret", 0);
const openMeta = meta("open", 1);
/** Someone else's 39000 with d = secret: not the relay's, so not hidden by the metadata list. */
const forged = alice.sign({ kind: 39000, content: "", created_at: t + 20, tags: [["d", "secret"]] });
/**
 * Hidden groups (their metadata hidden, not their posts): "hid", and one with a 64-hex id; their
 * records (9000-9022) name members, so they are hidden as the metadata is.
 */
const HEXHID = "cd".repeat(32);
const record = (kind: number, g: string, i: number) => bob.sign({ kind, content: "", created_at: t + 30 + i, tags: [["h", g]] });
const hidRecords = [record(9021, "hid", 0), record(9022, HEXHID, 1), record(9000, "hid", 2)];
const hidPosts = [inGroup("hid", 40), inGroup(HEXHID, 41)];
const all: NostrEvent[] = [...secret, ...open, ...plain, secretMeta, openMeta, forged, ...hidRecords, ...hidPosts];
const hiddenIds = new Set([...secret, secretMeta, ...hidRecords].map((e) => e.id));
const visible = all.filter((e) => !hiddenIds.has(e.id));

beforeAll(async () => {
  store = await openTestStore(dir);
  await store.ready();
  await writeEvents(store, all);
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  if (onPostgres) await dropDatabase(databaseFor(dir));
});

/** Hidden: secret and HEXGROUP (events) and secret (metadata); `pad` more ids of groups that hold nothing here. */
function hidden(pad: number): Visibility {
  const filler = Array.from({ length: pad }, (_, i) => `g${i}`);
  return {
    restrictedKinds: [4, 1059],
    viewers: [],
    hiddenGroups: { events: [...filler, "secret", HEXGROUP], metadata: [...filler, "secret", "hid", HEXHID], relay: relay.pubkey },
  };
}

const scope = (v?: Visibility): ReadScope => ({ maxSeq: store.lastSeq(), now: 0, visibility: v });
const ids = (events: NostrEvent[]) => events.map((e) => e.id).sort();
async function query(filter: Record<string, unknown>, v?: Visibility): Promise<string[]> {
  const rows = await allRows(store.query({ ...scope(v), filters: [filter as never], limits: [1000] }));
  return rows.map((j) => (JSON.parse(j) as NostrEvent).id).sort();
}
const expected = (pred: (e: NostrEvent) => boolean, v: boolean) => ids((v ? visible : all).filter(pred));

const FILTERS: [string, Record<string, unknown>, (e: NostrEvent) => boolean][] = [
  ["everything (the time index)", {}, () => true],
  ["kinds (the kind index)", { kinds: [9] }, (e) => e.kind === 9],
  ["authors (the author index)", { authors: [alice.pubkey] }, (e) => e.pubkey === alice.pubkey],
  ["ids", { ids: all.map((e) => e.id) }, () => true],
  ["a tag (the tag index)", { "#t": ["news"] }, (e) => e.tags.some((x) => x[0] === "t" && x[1] === "news")],
  [
    "#h of a hidden and an open group",
    { "#h": ["secret", "open"] },
    (e) => e.tags.some((x) => x[0] === "h" && ["secret", "open"].includes(x[1]!)),
  ],
  ["group metadata", { kinds: [39000] }, (e) => e.kind === 39000],
  ["metadata by d", { kinds: [39000], "#d": ["secret", "open"] }, (e) => e.kind === 39000],
  ["records of hidden groups by #h", { "#h": ["hid", HEXHID] }, (e) => e.tags.some((x) => x[0] === "h" && ["hid", HEXHID].includes(x[1]!))],
  ["records by kind", { kinds: [9000, 9021, 9022] }, (e) => e.kind >= 9000 && e.kind <= 9022],
];

for (const [size, pad] of [
  ["a short list (index probes)", 0],
  ["10,000 hidden groups (their tags against the list)", 10_000],
] as const)
  describe(`hidden groups, ${size}`, () => {
    const v = hidden(pad);
    test.each(FILTERS)("REQ %s: hidden events and metadata are left out", async (_name, filter, pred) => {
      expect(await query(filter, v)).toEqual(expected(pred, true));
      // The same filter without the list: everything.
      expect(await query(filter)).toEqual(expected(pred, false));
    });

    test("COUNT: the hidden are not counted, the count-everything shortcut included", async () => {
      expect((await store.count({ ...scope(v), filters: [{}] })).count).toBe(visible.length);
      expect((await store.count({ ...scope(), filters: [{}] })).count).toBe(all.length);
      expect((await store.count({ ...scope(v), filters: [{ kinds: [9] }, { "#t": ["news"] }] })).count).toBe(
        visible.filter((e) => e.kind === 9 || e.tags.some((x) => x[0] === "t")).length,
      );
    });

    test("NEG items: the hidden are not among them", async () => {
      const items = await store.negentropyItems({ ...scope(v), filter: {}, max: 1000 });
      const got = Array.from({ length: items.timestamps.length }, (_, i) =>
        Buffer.from(items.ids.subarray(i * 32, i * 32 + 32)).toString("hex"),
      );
      expect(got.sort()).toEqual(ids(visible));
    });

    test("search: the hidden are not found", async () => {
      expect(await query({ search: "zebra" }, v)).toEqual(expected((e) => e.content.includes("zebra"), true));
      expect(await query({ search: "zebra" })).toEqual(expected((e) => e.content.includes("zebra"), false));
    });
  });

test("a filter naming only readable groups in #h gets them all, but not an event that names a hidden group beside", async () => {
  for (const pad of [0, 10_000]) expect(await query({ "#h": ["open"] }, hidden(pad))).toEqual(ids(open));
});

test("an in-memory SQLite store (its reads on the calling thread) hides the same", async () => {
  const mem = new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 1 });
  try {
    await mem.ready();
    await writeEvents(mem, all);
    for (const v of [hidden(0), hidden(10_000)]) {
      const rows = await allRows(mem.query({ maxSeq: mem.lastSeq(), now: 0, visibility: v, filters: [{}], limits: [1000] }));
      expect(rows.map((j) => (JSON.parse(j) as NostrEvent).id).sort()).toEqual(ids(visible));
      expect((await mem.count({ maxSeq: mem.lastSeq(), now: 0, visibility: v, filters: [{ kinds: [9] }] })).count).toBe(
        visible.filter((e) => e.kind === 9).length,
      );
    }
  } finally {
    await mem.close();
  }
});

test("empty lists hide nothing", async () => {
  const v: Visibility = { restrictedKinds: [], viewers: [], hiddenGroups: { events: [], metadata: [], relay: relay.pubkey } };
  expect(await query({}, v)).toEqual(ids(all));
  expect((await store.count({ ...scope(v), filters: [{}] })).count).toBe(all.length);
});

test("a REQ with 10,000 hidden groups over many events takes about as long as without (measured)", async () => {
  // Unsigned (the store checks no signatures): 20,000 events, a third of them in 997 groups.
  const more = Array.from(
    { length: 20_000 },
    (_, i): NostrEvent => ({
      id: randomBytes(32).toString("hex"),
      pubkey: bob.pubkey,
      created_at: t + 100 + i,
      kind: i % 3 === 0 ? 9 : 1,
      tags: i % 3 === 0 ? [["h", `g${i % 997}`]] : [],
      content: `note ${i}`,
      sig: "00".repeat(64),
    }),
  );
  await writeEvents(store, more);
  // Postgres plans by its statistics, which autovacuum gathers on a live database.
  if (onPostgres) await (store as PostgresStore).sql`ANALYZE`;
  const time = async (v?: Visibility) => {
    const start = performance.now();
    for (let i = 0; i < 5; i++) await allRows(store.query({ ...scope(v), filters: [{ kinds: [1, 9] }], limits: [1000] }));
    return (performance.now() - start) / 5;
  };
  await time();
  const without = await time();
  const withList = await time(hidden(10_000));
  console.log(
    `REQ {kinds:[1,9]} limit 1000 over ${all.length + more.length} events: ${without.toFixed(1)} ms, with 10,000 hidden groups ${withList.toFixed(1)} ms`,
  );
  const rows = await query({ kinds: [1, 9] }, hidden(10_000));
  // g0..g996 are all hidden: only bob's notes and the visible group events are left.
  expect(rows.length).toBe(
    Math.min(1000, more.filter((e) => e.kind === 1).length + visible.filter((e) => e.kind === 1 || e.kind === 9).length),
  );
  expect(withList).toBeLessThan(without * 5 + 50);
});

describe("GroupRecords", () => {
  test("inOrder: the kinds asked for, after a seq, in commit order, at most max", async () => {
    const first = await store.groups.inOrder([39000, 9], 0, 3);
    expect(first.map((r) => (JSON.parse(r.json) as NostrEvent).id)).toEqual([secret[0]!.id, secret[1]!.id, secret[2]!.id]);
    expect(first.map((r) => r.seq)).toEqual([...first.map((r) => r.seq)].sort((a, b) => a - b));
    const rest = await store.groups.inOrder([39000], first[2]!.seq, 10);
    expect(rest.map((r) => (JSON.parse(r.json) as NostrEvent).id)).toEqual([secretMeta.id, openMeta.id, forged.id]);
    // The JSON is the event as stored and served.
    expect(JSON.parse(rest[0]!.json)).toEqual(secretMeta);
  });

  test("a BulkStore (import, sync) reads the same", async () => {
    const config = testConfig(onPostgres ? { database: { engine: "postgres", postgres_url: databaseUrl(databaseFor(dir)) } } : {});
    const bulk = await openBulk(config, join(dir, "bunstr.sqlite"), "readonly");
    try {
      expect(await bulk.groups.inOrder([39000, 9], 0, 1000)).toEqual(await store.groups.inOrder([39000, 9], 0, 1000));
      expect(await bulk.groups.recentByGroup(3, 1000)).toEqual(await store.groups.recentByGroup(3, 1000));
    } finally {
      await bulk.close();
    }
  });

  test("recentByGroup: the newest ids of each group among the newest h rows", async () => {
    const recent = await store.groups.recentByGroup(1, 100_000);
    expect(recent.get("secret")).toEqual([secret[1]!.id]);
    expect(recent.get("open")).toEqual([open[1]!.id]);
    expect(recent.get(HEXGROUP)).toEqual([secret[2]!.id]);
    const two = await store.groups.recentByGroup(5, 100_000);
    expect(two.get("secret")).toEqual([secret[1]!.id, secret[0]!.id, twoGroups.id]);
  });
});
