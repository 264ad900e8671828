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
import { PostgresStore } from "../../src/store/postgres/store.ts";
import { SqliteStore } from "../../src/store/sqlite.ts";
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
  return JSON.parse(JSON.stringify(finalizeEvent({ kind, created_at, tags, content: `v ${rand().toString(36).slice(2, 8)}` }, sk))) as NostrEvent;
}

const describeOutcome = (o: WriteOutcome) => (o.stored ? "stored" : o.duplicate ? "duplicate" : o.reason);

test("40 seeded batches: the same outcomes and the same stored set as the SQLite writer", async () => {
  const made: NostrEvent[] = [];
  let replaced = 0;
  for (let b = 0; b < 40; b++) {
    const batch = Array.from({ length: 5 + Math.floor(rand() * 40) }, () => {
      const e = gen(made);
      made.push(e);
      return { event: e, json: serializeEvent(e) };
    });
    const want = sqlite.writeBatch(batch, RULES).map(describeOutcome);
    const got = (await pg.writeBatch(batch, RULES)).map(describeOutcome);
    expect(got).toEqual(want);
    replaced += want.filter((w) => w.startsWith("duplicate: a newer")).length;
  }
  const job = { filters: [{}], limits: [100_000], maxSeq: Number.MAX_SAFE_INTEGER, now: 0 };
  const sqliteIds = (await allRows(sqlite.query({ ...job, maxSeq: sqlite.lastSeq() }))).map((j) => j.slice(7, 71)).sort();
  const pgIds = (await allRows(pg.query({ ...job, maxSeq: pg.lastSeq() }))).map((j) => j.slice(7, 71)).sort();
  expect(pgIds).toEqual(sqliteIds);
  // Not vacuous: versions were refused as older, and both stores kept a mix.
  expect(replaced).toBeGreaterThan(20);
  expect(sqliteIds.length).toBeGreaterThan(20);
});
