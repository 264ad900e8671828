// NIP-29 at the store: Visibility.groups leaves out the events of gated groups (group_gates:
// an h tag naming one) the reader is not a member of, and the relay's metadata (39000-39009 by
// one of the relay's keys, by d) of groups whose metadata is gated, in every walk: REQ (each
// index a filter can drive), COUNT (the count-everything shortcut too), NEG items and search;
// for an anonymous reader (no memberships), a member (a short list) and a member of many (a
// temp table). The writer raises a gate with the 9002 or 9008 that gates, in its transaction;
// the state's corrections do not undo a later raise. And GroupRecords, what the group state is
// rebuilt from. Runs on Postgres too (test/postgres-suite.ts).
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
const formerRelay = freshRelayKey();
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
/** The hidden group's metadata signed by a key the relay had before: hidden too (review finding 8). */
const formerMeta = signEvent({ kind: 39001, created_at: t + 12, tags: [["d", "secret"]], content: "" }, formerRelay);
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
const all: NostrEvent[] = [...secret, ...open, ...plain, secretMeta, openMeta, forged, formerMeta, ...hidRecords, ...hidPosts];
const hiddenIds = new Set([...secret, secretMeta, formerMeta, ...hidRecords].map((e) => e.id));
const visible = all.filter((e) => !hiddenIds.has(e.id));
/** The gated groups that hold events here: private (events and metadata), private, hidden, hidden. */
const GATES = [
  { group: "secret", events: true, metadata: true },
  { group: HEXGROUP, events: true, metadata: false },
  { group: "hid", events: false, metadata: true },
  { group: HEXHID, events: false, metadata: true },
];
/** Gated groups that hold nothing here (the sybil's 10,000 private groups). */
const FILLER = Array.from({ length: 10_000 }, (_, i) => ({ group: `g${i}`, events: true, metadata: true }));

beforeAll(async () => {
  store = await openTestStore(dir);
  await store.ready();
  await writeEvents(store, all);
  await store.admin.setGroupGates([...GATES, ...FILLER], { seq: store.lastSeq() });
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  if (onPostgres) await dropDatabase(databaseFor(dir));
});

/** A reader who is a member of `members` (gated groups), besides `pad` more that hold nothing here. */
function reader(members: string[], pad = 0): Visibility {
  return {
    restrictedKinds: [4, 1059],
    viewers: [],
    groups: { members: [...FILLER.slice(0, pad).map((g) => g.group), ...members], relays: [relay.pubkey, formerRelay.pubkey] },
  };
}
/** An anonymous reader (or one who is a member of no gated group that holds events here). */
const hidden = (pad: number): Visibility => reader([], pad);

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
  ["no memberships (10,000 gated groups)", 0],
  ["300 memberships elsewhere (a temp table)", 300],
] as const)
  describe(`gated groups, ${size}`, () => {
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
  for (const pad of [0, 300]) expect(await query({ "#h": ["open"] }, hidden(pad))).toEqual(ids(open));
});

describe("a member reads its gated groups", () => {
  for (const [size, pad] of [
    ["inline", 0],
    ["among 300 (a temp table)", 300],
  ] as const) {
    test(`of secret, ${size}: its events and metadata, not HEXGROUP's`, async () => {
      const v = reader(["secret"], pad);
      const seen = all.filter(
        (e) => (!secret.includes(e) && !hidRecords.includes(e)) || e.tags.some((x) => x[0] === "h" && x[1] === "secret"),
      );
      expect(await query({}, v)).toEqual(ids(seen));
      expect((await store.count({ ...scope(v), filters: [{ kinds: [9] }] })).count).toBe(seen.filter((e) => e.kind === 9).length);
    });
    test(`of HEXGROUP (an id the tag index keeps as bytes), ${size}`, async () => {
      const v = reader([HEXGROUP], pad);
      expect(await query({ kinds: [9] }, v)).toEqual(ids(visible.filter((e) => e.kind === 9).concat(secret[2]!)));
    });
  }
});

test("metadata signed by a former relay key is hidden as the current key's; without that key among the relay's, not", async () => {
  expect(await query({ kinds: [39001] }, hidden(0))).toEqual([]);
  const currentOnly: Visibility = { restrictedKinds: [], viewers: [], groups: { members: [], relays: [relay.pubkey] } };
  expect(await query({ kinds: [39001] }, currentOnly)).toEqual([formerMeta.id]);
});

describe("group_gates", () => {
  const admin = signer();
  const edit = (g: string, flags: string[], at: number) =>
    admin.sign({ kind: 9002, content: "", created_at: t + at, tags: [["h", g], ...flags.map((f) => [f])] });
  const gate = async (g: string) => (await store.groups.gates!()).find((x) => x.group === g);

  test("the writer raises a gate with the 9002 or 9008 that gates, in its own batch", async () => {
    const post = alice.sign({ kind: 9, content: "said after it turned private", created_at: t + 31, tags: [["h", "turned"]] });
    await writeEvents(store, [edit("turned", ["private"], 30), post]);
    expect(await gate("turned")).toEqual({ group: "turned", events: true, metadata: false });
    // Read by no one but its members from the commit on: the state has not seen the 9002 yet.
    expect(await query({ "#h": ["turned"] }, hidden(0))).toEqual([]);
    await writeEvents(store, [edit("veiled", ["hidden"], 32)]);
    expect(await gate("veiled")).toEqual({ group: "veiled", events: false, metadata: true });
    await writeEvents(store, [admin.sign({ kind: 9008, content: "", created_at: t + 33, tags: [["h", "gone"]] })]);
    expect(await gate("gone")).toEqual({ group: "gone", events: true, metadata: true });
    // A 9002 that opens raises nothing (the state lowers, after judging it).
    await writeEvents(store, [edit("opened", ["public"], 34)]);
    expect(await gate("opened")).toBeUndefined();
  });

  test("a correction as of an event is not applied over a row a later commit raised", async () => {
    const first = edit("race", ["private"], 40);
    await writeEvents(store, [first]);
    // The state lowers as of `first` (say it skipped it) ...
    await store.admin.setGroupGates([{ group: "race", events: false, metadata: false }], { id: first.id });
    expect(await gate("race")).toBeUndefined();
    // ... but a later 9002 raised it again before the correction arrived: it stays up.
    const second = edit("race", ["private"], 41);
    await writeEvents(store, [second]);
    await store.admin.setGroupGates([{ group: "race", events: false, metadata: false }], { id: first.id });
    expect(await gate("race")).toEqual({ group: "race", events: true, metadata: false });
    await store.admin.setGroupGates([{ group: "race", events: false, metadata: false }], { id: second.id });
    expect(await gate("race")).toBeUndefined();
  });
});

test("an in-memory SQLite store (its reads on the calling thread) hides the same", async () => {
  const mem = new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 1 });
  try {
    await mem.ready();
    await writeEvents(mem, all);
    await mem.admin.setGroupGates([...GATES, ...FILLER], { seq: mem.lastSeq() });
    for (const v of [hidden(0), hidden(300)]) {
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

test("a member of every gated group that holds events here reads everything", async () => {
  const v = reader(["secret", HEXGROUP, "hid", HEXHID]);
  expect(await query({ authors: [alice.pubkey, bob.pubkey] }, v)).toEqual(
    ids(all.filter((e) => e.pubkey !== relay.pubkey && e.pubkey !== formerRelay.pubkey)),
  );
  expect(await query({ kinds: [39000, 39001] }, v)).toEqual(ids(all.filter((e) => e.kind >= 39000)));
});

test("a REQ with 10,000 gated groups over many events takes about as long as without (measured)", async () => {
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
  const withList = await time(hidden(0));
  console.log(
    `REQ {kinds:[1,9]} limit 1000 over ${all.length + more.length} events: ${without.toFixed(1)} ms, with 10,000 gated groups ${withList.toFixed(1)} ms`,
  );
  const rows = await query({ kinds: [1, 9] }, hidden(0));
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
