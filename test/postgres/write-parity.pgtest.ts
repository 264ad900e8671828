// The Postgres writer against the SQLite writer on the same batches: every outcome (stored,
// duplicate, refused and why) and what is left stored must be the same. Seeded batches of
// regular events and versions of a few replaceable and addressable addresses (many in one
// batch, ties on created_at, repeats), deletions and requests to vanish between them.
// Run by test/postgres-suite.ts (Postgres needed).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import { serializeEvent, type NostrEvent } from "../../src/protocol/event.ts";
import { refuse, refusalText } from "../../src/protocol/reasons.ts";
import { PostgresStore } from "../../src/store/postgres/store.ts";
import { SqliteStore } from "../../src/store/sqlite/store.ts";
import { allRows, type WriteOutcome, type WriteRules } from "../../src/store/types.ts";
import { prng } from "../../bench/lib/stats.ts";
import { createDatabase, databaseFor, dropDatabase } from "../postgres-env.ts";

const RULES: WriteRules = { deletion: true, vanish: true, search: true, searchSkipKinds: new Set([4, 1059]) };
const dir = mkdtempSync(join(tmpdir(), "bunstr-parity-"));
let sqlite: SqliteStore;
let pg: PostgresStore;

beforeAll(async () => {
  sqlite = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  pg = await PostgresStore.open({ url: await createDatabase(databaseFor(dir)), poolSize: 2 });
});
afterAll(async () => {
  await sqlite.close();
  await pg.close();
  await dropDatabase(databaseFor(dir));
  rmSync(dir, { recursive: true, force: true });
});

const rand = prng(0x9a71);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const keys = Array.from({ length: 3 }, () => generateSecretKey());
const BASE = 1_700_000_000;

function gen(made: NostrEvent[]): NostrEvent {
  const sk = pick(keys);
  const r = rand();
  const created_at = BASE + Math.floor(rand() * 6); // few seconds: ties
  if (r < 0.05 && made.length > 0) return pick(made); // the same event again
  let kind = 1;
  let tags: string[][] = [["t", pick(["a", "b"])]];
  if (r < 0.3) kind = pick([0, 3, 10002]);
  else if (r < 0.55) (kind = 30023), (tags = [["d", pick(["x", "y", ""])]]);
  else if (r < 0.6 && made.length > 0) {
    const mine = made.filter((e) => e.pubkey === getPublicKey(sk));
    if (mine.length > 0) {
      const t = pick(mine);
      kind = 5;
      tags = rand() < 0.5 ? [["e", t.id]] : [["a", `${t.kind}:${t.pubkey}:${t.tags.find((x) => x[0] === "d")?.[1] ?? ""}`]];
    }
  } else if (r < 0.62) (kind = 62), (tags = [["relay", "ALL_RELAYS"]]);
  return JSON.parse(
    JSON.stringify(finalizeEvent({ kind, created_at, tags, content: `v ${rand().toString(36).slice(2, 8)}` }, sk)),
  ) as NostrEvent;
}

const describeOutcome = (o: WriteOutcome) => (o.stored ? "stored" : o.duplicate ? "duplicate" : refusalText(o.refusal));

test("40 seeded batches: the same outcomes and the same stored set as the SQLite writer", async () => {
  const made: NostrEvent[] = [];
  let replaced = 0;
  let carriedOut = 0;
  for (let b = 0; b < 40; b++) {
    const batch = Array.from({ length: 5 + Math.floor(rand() * 40) }, () => {
      const e = gen(made);
      made.push(e);
      // Some requests to vanish come refused for their author's standing: carried out, not stored.
      const vanishOnly = e.kind === 62 && rand() < 0.5 ? refuse("restricted", "this pubkey is not allowed to publish here") : undefined;
      return { event: e, json: serializeEvent(e), vanishOnly };
    });
    const want = (await sqlite.writeBatch(batch, RULES)).map(describeOutcome);
    const got = (await pg.writeBatch(batch, RULES)).map(describeOutcome);
    expect(got).toEqual(want);
    replaced += want.filter((w) => w.startsWith("duplicate: a newer")).length;
    carriedOut += want.filter((w) => w.includes("the request to vanish was carried out")).length;
  }
  // Deletions left to steps (none this small, but the stored sets are compared after them).
  while (await sqlite.purgeStep(5));
  while (await pg.purgeStep(5));
  const job = { filters: [{}], limits: [100_000], maxSeq: Number.MAX_SAFE_INTEGER, now: 0 };
  const sqliteIds = (await allRows(sqlite.query({ ...job, maxSeq: sqlite.lastSeq() }))).map((j) => j.slice(7, 71)).sort();
  const pgIds = (await allRows(pg.query({ ...job, maxSeq: pg.lastSeq() }))).map((j) => j.slice(7, 71)).sort();
  expect(pgIds).toEqual(sqliteIds);
  // Not vacuous: versions were refused as older, and both stores kept a mix.
  expect(replaced).toBeGreaterThan(20);
  expect(carriedOut).toBeGreaterThan(0);
  expect(sqliteIds.length).toBeGreaterThan(20);
});

test("a request to vanish of 3,000 events: its batch deletes the first 500, steps outside the sequence lock the rest", async () => {
  const sk = generateSecretKey();
  const pubkey = getPublicKey(sk);
  const fake = (k: number): NostrEvent => ({
    id: k.toString(16).padStart(8, "0") + pubkey.slice(8),
    pubkey,
    created_at: BASE - 5000 + k,
    kind: 1,
    tags: [["t", "x"]],
    content: `n ${k}`,
    sig: "0".repeat(128),
  });
  for (let k = 0; k < 3000; k += 1000)
    await pg.writeBatch(
      Array.from({ length: 1000 }, (_, j) => ({ event: fake(k + j), json: serializeEvent(fake(k + j)) })),
      RULES,
    );
  const left = async () => (await pg.sql`SELECT count(*)::int AS n FROM events WHERE pubkey = decode(${pubkey}, 'hex')`)[0].n as number;
  expect(await left()).toBe(3000);
  let told = 0;
  pg.onPurge = () => void told++;
  const vanish = JSON.parse(
    JSON.stringify(finalizeEvent({ kind: 62, created_at: BASE, tags: [["relay", "ALL_RELAYS"]], content: "" }, sk)),
  ) as NostrEvent;
  expect((await pg.writeBatch([{ event: vanish, json: serializeEvent(vanish) }], RULES))[0]!.stored).toBe(true);
  expect(told).toBe(1);
  expect(await left()).toBe(3001 - 500);
  // Nothing it covers is accepted meanwhile; other writes go on.
  const old = fake(4000); // created before the request
  expect((await pg.writeBatch([{ event: old, json: serializeEvent(old) }], RULES))[0]).toEqual({
    stored: false,
    duplicate: false,
    refusal: { prefix: "blocked", message: "this pubkey asked to vanish from this relay" },
  });
  let steps = 0;
  while (await pg.purgeStep(5)) steps++;
  expect(steps).toBeGreaterThanOrEqual(5); // 2,500 left, 500 a step (and one that finds the purge done)
  expect(steps).toBeLessThanOrEqual(6);
  expect(await left()).toBe(1);
  expect((await pg.sql`SELECT count(*)::int AS n FROM purges`)[0].n).toBe(0);
  pg.onPurge = undefined;
});

test("gift wraps deleted by their recipients or authors, deletions of deletions, recipients who vanish: the same outcomes and stored set", async () => {
  const rand = prng(0x61f7);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const people = Array.from({ length: 5 }, () => generateSecretKey());
  const wrappers = Array.from({ length: 4 }, () => generateSecretKey()); // NIP-59: a wrap's random signing keys
  const sign = (sk: Uint8Array, kind: number, tags: string[][]): NostrEvent =>
    JSON.parse(
      JSON.stringify(
        finalizeEvent({ kind, created_at: BASE + 100 + Math.floor(rand() * 6), tags, content: `w ${rand().toString(36).slice(2, 8)}` }, sk),
      ),
    ) as NostrEvent;
  const made: NostrEvent[] = [];
  const next = (): NostrEvent => {
    const r = rand();
    if (r < 0.2 && made.length > 0) return pick(made); // again: a duplicate, or refused as deleted
    if (r < 0.55) return sign(pick(wrappers), 1059, [["p", getPublicKey(pick(people))]]);
    const wraps = made.filter((e) => e.kind === 1059);
    if (r < 0.7 && wraps.length > 0) {
      // A wrap deleted, mostly by its recipient.
      const w = pick(wraps);
      const to = people.find((sk) => getPublicKey(sk) === w.tags[0]![1]) ?? pick(people);
      return sign(rand() < 0.7 ? to : pick([...people, ...wrappers]), 5, [["e", w.id]]);
    }
    // A deletion of something made (a wrap, a deletion, a note), by a person or a wrap's signer:
    // its own event, a wrap addressed to it, or neither.
    if (r < 0.85 && made.length > 0) return sign(rand() < 0.6 ? pick(people) : pick(wrappers), 5, [["e", pick(made).id]]);
    if (r < 0.865) return sign(pick(people), 62, [["relay", "ALL_RELAYS"]]);
    return sign(pick(people), 1, []);
  };
  const seen: string[] = [];
  for (let b = 0; b < 20; b++) {
    const batch = Array.from({ length: 5 + Math.floor(rand() * 15) }, () => {
      const e = next();
      made.push(e);
      return { event: e, json: serializeEvent(e) };
    });
    const want = (await sqlite.writeBatch(batch, RULES)).map(describeOutcome);
    expect((await pg.writeBatch(batch, RULES)).map(describeOutcome)).toEqual(want);
    seen.push(...want);
  }
  while (await sqlite.purgeStep(5));
  while (await pg.purgeStep(5));
  const authors = [...people, ...wrappers].map((sk) => getPublicKey(sk));
  const job = { filters: [{ authors }], limits: [100_000], maxSeq: Number.MAX_SAFE_INTEGER, now: 0 };
  const sqliteIds = (await allRows(sqlite.query({ ...job, maxSeq: sqlite.lastSeq() }))).map((j) => j.slice(7, 71)).sort();
  const pgIds = (await allRows(pg.query({ ...job, maxSeq: pg.lastSeq() }))).map((j) => j.slice(7, 71)).sort();
  expect(pgIds).toEqual(sqliteIds);
  // Not vacuous: every kind of refusal came up, and both stores kept a mix.
  const count = (reason: string) => seen.filter((o) => o === reason).length;
  expect(count("blocked: this gift wrap was deleted by its recipient")).toBeGreaterThan(0);
  expect(count("blocked: this event was deleted by its author")).toBeGreaterThan(0);
  expect(count("blocked: the recipient asked to vanish from this relay")).toBeGreaterThan(0);
  expect(count("duplicate")).toBeGreaterThan(0);
  expect(sqliteIds.length).toBeGreaterThan(20);
});

test("a kind 5 of 200 events of 300 tags: its batch deletes a first chunk, steps the rest, and its outcome waits for its purge", async () => {
  const sk = generateSecretKey();
  const pubkey = getPublicKey(sk);
  const heavy = (k: number): NostrEvent => ({
    id: k.toString(16).padStart(8, "0") + pubkey.slice(8),
    pubkey,
    created_at: BASE - 9000 + k,
    kind: 1,
    tags: Array.from({ length: 300 }, (_, j) => ["t", `h${k}x${j}`]),
    content: `heavy ${k}`,
    sig: "0".repeat(128),
  });
  const writes = Array.from({ length: 200 }, (_, k) => ({ event: heavy(k), json: serializeEvent(heavy(k)) }));
  for (let k = 0; k < 200; k += 100) {
    await pg.writeBatch(writes.slice(k, k + 100), RULES);
    await sqlite.writeBatch(writes.slice(k, k + 100), RULES);
  }
  const del = JSON.parse(
    JSON.stringify(finalizeEvent({ kind: 5, created_at: BASE, tags: writes.map((w) => ["e", w.event.id]), content: "" }, sk)),
  ) as NostrEvent;
  const purged: number[] = [];
  pg.onPurged = (ids) => purged.push(...ids);
  try {
    const [o] = await pg.writeBatch([{ event: del, json: serializeEvent(del) }], RULES);
    expect(o!.stored && o!.purge).toBeNumber();
    const left = async () => (await pg.sql`SELECT count(*)::int AS n FROM events WHERE pubkey = decode(${pubkey}, 'hex')`)[0].n as number;
    // A chunk is ~256 KB of JSON: ~40 of these ~6 KB events, not 200 of them under the sequence lock.
    const first = await left();
    expect(first).toBeGreaterThan(100);
    expect(first).toBeLessThan(201);
    // Nothing it deletes is accepted again meanwhile.
    const again = (await pg.writeBatch([writes[199]!], RULES))[0]!;
    expect(again.stored).toBe(false);
    let steps = 0;
    while (await pg.purgeStep(5)) steps++;
    expect(steps).toBeGreaterThan(2);
    expect(await left()).toBe(1);
    expect(purged).toEqual([(o as { purge: number }).purge]);
    expect((await pg.sql`SELECT count(*)::int AS n FROM purge_targets`)[0].n).toBe(0);
    // The SQLite writer: the same outcome and what is left, the purge done in its steps.
    const [s] = await sqlite.writeBatch([{ event: del, json: serializeEvent(del) }], RULES);
    expect(s!.stored).toBe(true);
    while (await sqlite.purgeStep(5));
    const job = { filters: [{ authors: [pubkey] }], limits: [1000], maxSeq: Number.MAX_SAFE_INTEGER, now: 0 };
    const ids = async (store: PostgresStore | SqliteStore) =>
      (await allRows(store.query({ ...job, maxSeq: store.lastSeq() }))).map((j) => j.slice(7, 71));
    expect(await ids(sqlite)).toEqual([del.id]);
    expect(await ids(pg)).toEqual([del.id]);
  } finally {
    pg.onPurged = undefined;
  }
});
