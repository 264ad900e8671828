// Differential test of REQ filters: a naive NIP-01 matcher written here from the spec text is
// the reference; the SQL path (runQuery) and the live path (LiveIndex) must agree with it on
// thousands of seeded random filters over a seeded random event set. Deterministic: fixed seed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { canonicalFilterKey, compileFilter, type CompiledFilter } from "../src/protocol/filter.ts";
import { ProtocolError } from "../src/protocol/reasons.ts";
import { LiveIndex } from "../src/relay/fanout/monitors.ts";
import { openDatabase, tagValueText } from "../src/store/sqlite/db.ts";
import { PostgresStore } from "../src/store/postgres/store.ts";
import { planStatements, planTuning, runQuery, StatementCache } from "../src/store/sqlite/query.ts";
import { allRows, type PendingWrite, type QueryJob, type WriteOutcome, type WriteRules } from "../src/store/types.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { prng } from "../bench/lib/stats.ts";
import { createDatabase, databaseFor, dropDatabase, onPostgres } from "./postgres-env.ts";
import { naiveMatch, naiveOf, naiveQuery, nip01Order, type Naive, type RawFilter } from "../bench/lib/match.ts";

/** Plain NIP-01 storage: no deletions, vanishing or search indexing in this comparison. */
const RULES: WriteRules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set() };

// ---------------------------------------------------------------------------------------------
// Deterministic randomness

const SEED = 0x5eed_b057;

const mulberry32 = prng;

let rand = mulberry32(SEED);
/** Each test restarts its own stream, so running one test alone (-t) sees the same cases. */
const reseed = (offset: number): void => {
  rand = mulberry32(SEED + offset);
};
const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const chance = (p: number): boolean => rand() < p;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const hex64 = (): string => {
  let s = "";
  for (let i = 0; i < 8; i++)
    s += Math.floor(rand() * 0x100000000)
      .toString(16)
      .padStart(8, "0");
  return s;
};
/** 0..n values drawn (with possible repeats) from a pool. */
const some = <T>(pool: readonly T[], min: number, max: number): T[] => Array.from({ length: int(min, max) }, () => pick(pool));

// ---------------------------------------------------------------------------------------------
// The event set

const N_EVENTS = 2000;
const N_FILTERS = 10_000;
const N_MULTI = 1_000;
const DEFAULT_LIMIT = 50;
const BASE = 1_700_000_000;
const SPAN = 40; // created_at in BASE..BASE+SPAN: many ties

const pubkeys = Array.from({ length: 6 }, hex64);
const strangerKeys = Array.from({ length: 3 }, hex64); // never authors, sometimes in p tags
const ids = new Set<string>();
while (ids.size < N_EVENTS) ids.add(hex64());
const idList = [...ids];
const unknownIds = Array.from({ length: 5 }, hex64);
const ePool = [...idList.slice(0, 6), ...unknownIds.slice(0, 3)];
const pPool = [...pubkeys, ...strangerKeys];
const tPool = ["nostr", "bitcoin", "art", "music", "Nostr", "", "zap"];
const TPool = ["Art", "art", "X"]; // the uppercase "T" tag: a different tag name than "t"
const dPool = ["", "a", "b", "post-1", "post-2"];
const regularKinds = [1, 7, 4, 1984];

function genEvents(): NostrEvent[] {
  const out: NostrEvent[] = [];
  const addresses = new Set<string>();
  // One kind-0 (replaceable) per author: unique, so none replaces another.
  for (const pk of pubkeys)
    out.push({
      id: idList[out.length]!,
      pubkey: pk,
      created_at: BASE + int(0, SPAN),
      kind: 0,
      tags: [],
      content: "{}",
      sig: "0".repeat(128),
    });
  while (out.length < N_EVENTS) {
    const pubkey = pick(pubkeys);
    let kind = chance(0.08) ? 30023 : pick(regularKinds);
    const tags: string[][] = [];
    if (kind === 30023) {
      const d = pick(dPool);
      const addr = `${pubkey}:${d}`;
      if (addresses.has(addr))
        kind = 1; // keep addresses unique: no replacement happens
      else {
        addresses.add(addr);
        tags.push(d === "" && chance(0.5) ? ["d"] : ["d", d]); // ["d"] alone is the d "" address too
      }
    }
    for (let i = int(0, 3); i > 0; i--) {
      const r = rand();
      if (r < 0.3) tags.push(chance(0.3) ? ["e", pick(ePool), "wss://relay.example.com", "reply"] : ["e", pick(ePool)]);
      else if (r < 0.55) tags.push(["p", pick(pPool)]);
      else if (r < 0.85) tags.push(["t", pick(tPool)]);
      else if (r < 0.9) tags.push(["T", pick(TPool)]);
      else if (r < 0.95)
        tags.push(["emoji", pick(tPool), "https://example.com/e.png"]); // multi-letter: never indexed
      else tags.push([pick(["e", "p", "t"])]); // a tag with no value matches nothing
    }
    // The same tag twice, and two values of one tag.
    if (chance(0.08)) {
      const v = pick(tPool);
      tags.push(["t", v], ["t", v]);
    }
    if (chance(0.08)) tags.push(["t", pick(tPool)], ["t", pick(tPool)]);
    if (chance(0.05)) {
      const v = pick(ePool);
      tags.push(["e", v], ["e", v, "", "root"]);
    }
    // Shuffle tag order a bit so the duplicate/matching tags are not always last.
    for (let i = tags.length - 1; i > 0; i--) {
      const j = int(0, i);
      [tags[i], tags[j]] = [tags[j]!, tags[i]!];
    }
    out.push({
      id: idList[out.length]!,
      pubkey,
      created_at: BASE + int(0, SPAN),
      kind,
      tags,
      content: `note ${out.length}`,
      sig: "0".repeat(128),
    });
  }
  // Write order differs from created_at order and from id order.
  for (let i = out.length - 1; i > 0; i--) {
    const j = int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// The reference is bench/lib/match.ts: NIP-01's filter text read literally, arrays only.

/** The id of a row as runQuery returns it (the stored form starts {"id":"<64 hex>"; checked below). */
const idOf = (json: string): string => json.slice(7, 71);

// ---------------------------------------------------------------------------------------------
// Random filters: valid ones (compileFilter must accept every one of them).

function genFilter(): RawFilter {
  const f: RawFilter = {};
  const keys: [string, () => unknown][] = [];
  if (chance(0.12))
    keys.push([
      "ids",
      () => (chance(0.05) ? [] : some([...idList.slice(0, 40), ...unknownIds], 1, 5).concat(chance(0.5) ? [pick(idList)] : [])),
    ]);
  if (chance(0.35)) keys.push(["authors", () => (chance(0.05) ? [] : some([...pubkeys, ...strangerKeys], 1, 3))]);
  if (chance(0.4)) keys.push(["kinds", () => (chance(0.05) ? [] : some([0, 1, 7, 4, 1984, 30023, 3, 9735], 1, 3))]);
  if (chance(0.25)) keys.push(["#e", () => (chance(0.05) ? [] : some([...ePool, unknownIds[4]!], 1, 3))]);
  if (chance(0.25)) keys.push(["#p", () => (chance(0.05) ? [] : some(pPool, 1, 3))]);
  if (chance(0.3)) keys.push(["#t", () => (chance(0.05) ? [] : some([...tPool, "absent"], 1, 3))]);
  if (chance(0.07)) keys.push(["#d", () => (chance(0.05) ? [] : some([...dPool, "c"], 1, 2))]);
  if (chance(0.05)) keys.push(["#T", () => some(TPool, 1, 2)]);
  if (chance(0.3)) keys.push(["since", () => BASE + int(-3, SPAN + 3)]);
  if (chance(0.3)) keys.push(["until", () => BASE + int(-3, SPAN + 3)]);
  if (chance(0.5)) keys.push(["limit", () => (chance(0.1) ? 0 : chance(0.06) ? 5000 : int(1, 40))]);
  // Random key order: the SQL driver and the live index both pick "the first tag".
  for (let i = keys.length - 1; i > 0; i--) {
    const j = int(0, i);
    [keys[i], keys[j]] = [keys[j]!, keys[i]!];
  }
  for (const [k, gen] of keys) f[k] = gen();
  return f;
}

const effectiveLimit = (c: CompiledFilter): number => (c.neverMatch ? 0 : (c.limit ?? DEFAULT_LIMIT));

// ---------------------------------------------------------------------------------------------

let dir: string;
let db: Database;
let events: NostrEvent[];
/** The events in NIP-01 order, sorted once: filtering keeps the order. */
let ordered: NostrEvent[];
const seqOf = new Map<string, number>();
let maxSeq = 0;
const compileLimits = { maxValues: 1000 };

/** The stored query under test: SQLite's runQuery, or (BUNSTR_TEST_STORE=postgres) the Postgres store's. */
let run: (job: QueryJob) => Promise<string[]>;
let pg: PostgresStore | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "bunstr-diff-"));
  reseed(100); // the value pools above used the first stream
  events = genEvents();
  ordered = [...events].sort(nip01Order);
  let write: (batch: PendingWrite[]) => Promise<WriteOutcome[]>;
  if (onPostgres) {
    pg = await PostgresStore.open({ url: await createDatabase(databaseFor(dir)), poolSize: 4 });
    write = (batch) => pg!.writeBatch(batch, RULES);
    run = (job) => allRows(pg!.query(job));
  } else {
    db = openDatabase({ path: join(dir, "diff.sqlite"), synchronous: "normal" });
    const writer = new SqliteWriter(db);
    const cache = new StatementCache(db);
    write = async (batch) => writer.writeBatch(batch, RULES);
    run = async (job) => runQuery(cache, job);
  }
  for (let i = 0; i < events.length; i += 100) {
    const batch = events.slice(i, i + 100);
    const outcomes = await write(batch.map((event) => ({ event, json: serializeEvent(event) })));
    outcomes.forEach((o, j) => {
      if (!o.stored) throw new Error(`event ${batch[j]!.id} was not stored: ${JSON.stringify(o)}`);
      seqOf.set(batch[j]!.id, o.seq);
    });
  }
  maxSeq = Math.max(...seqOf.values());
});

afterAll(async () => {
  db?.close();
  await pg?.close();
  if (pg) await dropDatabase(databaseFor(dir));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("differential: naive NIP-01 matcher vs SQL vs live index", () => {
  test("the stored set is exactly the generated set", async () => {
    expect((await run({ filters: [{}], limits: [N_EVENTS + 1], maxSeq, now: 0 })).length).toBe(N_EVENTS);
    expect(seqOf.size).toBe(N_EVENTS);
    expect(maxSeq).toBe(Math.max(...seqOf.values()));
    // Sanity of the generator: ties, duplicate tags and multi-value hits exist.
    const byTs = new Map<number, number>();
    for (const e of events) byTs.set(e.created_at, (byTs.get(e.created_at) ?? 0) + 1);
    expect([...byTs.values()].filter((n) => n > 1).length).toBeGreaterThan(30);
    const dupTag = events.filter((e) =>
      e.tags.some((t, i) => t.length > 1 && e.tags.some((u, j) => j > i && u[0] === t[0] && u[1] === t[1])),
    );
    expect(dupTag.length).toBeGreaterThan(100);
    expect(events.filter((e) => e.kind === 30023).length).toBeGreaterThan(15);
  });

  test(`${N_FILTERS} random filters: runQuery and LiveIndex agree with the reference`, async () => {
    const filters: { raw: RawFilter; c: CompiledFilter }[] = [];
    const failures: string[] = [];
    const fail = (msg: string) => {
      if (failures.length < 5) failures.push(msg);
    };
    // For the live check below: which filters the reference accepts, per event (limit aside).
    const acceptedBy = new Map<string, number[]>(events.map((e) => [e.id, []]));
    reseed(1);
    const counts = { filters: 0, neverMatch: 0, nonEmpty: 0, truncated: 0, tieBroken: 0, snapshot: 0, snapshotDiffers: 0, fullScans: 0 };

    for (let i = 0; i < N_FILTERS; i++) {
      const raw = genFilter();
      let c: CompiledFilter;
      try {
        c = compileFilter(raw, compileLimits);
      } catch (e) {
        fail(`compileFilter rejected a valid filter ${JSON.stringify(raw)}: ${(e as Error).message}`);
        continue;
      }
      const g = filters.push({ raw, c }) - 1;
      counts.filters++;
      if (c.neverMatch) counts.neverMatch++;
      const limit = effectiveLimit(c);
      const naive = naiveOf(raw);
      const all = ordered.filter((e) => naiveMatch(naive, e)); // already in NIP-01 order
      for (const e of all) acceptedBy.get(e.id)!.push(g);
      const expected = all.slice(0, limit).map((e) => e.id);
      if (c.neverMatch && all.length > 0) fail(`neverMatch set but the reference matches ${all.length} events: ${JSON.stringify(raw)}`);
      if (expected.length > 0) counts.nonEmpty++;
      if (all.length > limit && limit > 0) counts.truncated++;
      for (let k = 1; k < expected.length; k++)
        if (all[k]!.created_at === all[k - 1]!.created_at) {
          counts.tieBroken++;
          break;
        }
      if (Object.keys(raw).filter((k) => k !== "limit").length === 0) counts.fullScans++;

      const got = (await run({ filters: [c.source], limits: [limit], maxSeq, now: 0 })).map(idOf);
      if (JSON.stringify(got) !== JSON.stringify(expected))
        fail(
          `SQL disagrees for filter #${i} ${JSON.stringify(raw)} (limit ${limit}):\n  expected ${JSON.stringify(expected)}\n  got      ${JSON.stringify(got)}`,
        );

      // neverMatch filters get limit 0 from the relay; the SQL must also find nothing on its own.
      if (c.neverMatch) {
        const own = await run({ filters: [c.source], limits: [c.limit || DEFAULT_LIMIT], maxSeq, now: 0 });
        if (own.length !== 0) fail(`SQL returns ${own.length} events for never-matching filter ${JSON.stringify(raw)}`);
      }

      // A REQ snapshot: only events committed at or before a seq.
      if (i % 20 === 0 && limit > 0) {
        counts.snapshot++;
        const cut = int(0, maxSeq);
        const exp = all
          .filter((e) => seqOf.get(e.id)! <= cut)
          .slice(0, limit)
          .map((e) => e.id);
        if (JSON.stringify(exp) !== JSON.stringify(expected)) counts.snapshotDiffers++;
        const snap = (await run({ filters: [c.source], limits: [limit], maxSeq: cut, now: 0 })).map(idOf);
        if (JSON.stringify(snap) !== JSON.stringify(exp))
          fail(
            `SQL disagrees at maxSeq ${cut} for ${JSON.stringify(raw)} (limit ${limit}):\n  expected ${JSON.stringify(exp)}\n  got      ${JSON.stringify(snap)}`,
          );
      }
    }

    // Rows come back in the stored form, byte for byte.
    const byId = new Map(events.map((e) => [e.id, e]));
    const everything = await run({ filters: [{}], limits: [N_EVENTS], maxSeq, now: 0 });
    if (everything.length !== N_EVENTS) fail(`{} with limit ${N_EVENTS} returned ${everything.length} rows`);
    for (const j of everything) {
      const e = byId.get((JSON.parse(j) as NostrEvent).id)!;
      if (j !== serializeEvent(e) || idOf(j) !== e.id) fail(`stored json differs for ${e.id}: ${j}`);
    }

    // The live path: every filter is its own group; the groups hit must be exactly the filters
    // the reference accepts (limit plays no part), each reported once.
    const index = new LiveIndex<number>();
    const entries = filters.map(({ c }, g) => index.add(g, [c]));
    let liveHits = 0;
    let liveChecks = 0;
    const removed = new Set<number>();
    const checkLive = (label: string, sample: readonly NostrEvent[]) => {
      for (const e of sample) {
        const hits: number[] = [];
        index.match(e, (g) => hits.push(g));
        const got = [...hits].sort((a, b) => a - b);
        const expected = acceptedBy.get(e.id)!.filter((g) => !removed.has(g)); // ascending already
        liveChecks++;
        liveHits += hits.length;
        if (new Set(hits).size !== hits.length)
          fail(`${label}: LiveIndex reported a group twice for event ${JSON.stringify(e)}: ${JSON.stringify(got)}`);
        if (JSON.stringify([...new Set(got)]) !== JSON.stringify(expected)) {
          const missing = expected.filter((g) => !hits.includes(g));
          const extra = got.filter((g) => !expected.includes(g));
          const first = missing[0] ?? extra[0]!;
          fail(
            `${label}: live match disagrees for event ${JSON.stringify(e)}\n  missing groups ${JSON.stringify(missing.slice(0, 10))}, extra ${JSON.stringify(extra.slice(0, 10))}\n  first failing filter: ${JSON.stringify(filters[first]!.raw)}`,
          );
        }
      }
    };
    checkLive("all filters", events);
    const hitsBeforeRemoval = liveHits;
    // Unsubscribe every third filter: they must stop matching, the rest must be unaffected.
    for (let g = 0; g < filters.length; g += 3) {
      index.remove(entries[g]!);
      removed.add(g);
    }
    checkLive(
      "after remove",
      events.filter((_, k) => k % 4 === 0),
    ); // a quarter is plenty here

    expect(failures[0]).toBeUndefined();
    expect(failures).toEqual([]);
    // Not vacuous: enough filters of every interesting sort went through.
    expect(counts.filters).toBe(N_FILTERS);
    expect(counts.neverMatch).toBeGreaterThan(300);
    expect(counts.nonEmpty).toBeGreaterThan(3000);
    expect(counts.truncated).toBeGreaterThan(1000);
    expect(counts.tieBroken).toBeGreaterThan(1000);
    expect(counts.snapshot).toBeGreaterThan(300);
    expect(counts.snapshotDiffers).toBeGreaterThan(100);
    expect(counts.fullScans).toBeGreaterThan(50);
    expect(liveChecks).toBe(N_EVENTS + N_EVENTS / 4);
    expect(hitsBeforeRemoval).toBeGreaterThan(100_000);
    expect(liveHits - hitsBeforeRemoval).toBeGreaterThan(20_000);
    console.log(
      `differential: ${counts.filters} filters (${counts.neverMatch} never-matching, ${counts.nonEmpty} non-empty, ${counts.truncated} cut by limit, ${counts.tieBroken} with created_at ties, ${counts.snapshot} also at a snapshot seq, ${counts.snapshotDiffers} of them changed by it, ${counts.fullScans} without conditions); live: ${liveChecks} event checks, ${liveHits} group hits`,
    );
    // ~30 s of CPU on a 2-core machine; beside other jobs (load 8-10) it took 65 s: a correctness
    // test, not a benchmark, so its timeout leaves that room.
  }, 180_000);

  test("long author lists (feeds): the recent-window plan and its fallback agree with the reference", async () => {
    reseed(3);
    const failures: string[] = [];
    let full = 0;
    let short = 0;
    const saved = planTuning.recentWindow;
    try {
      // Windows smaller and larger than the 2,000 events: the window alone answers, falls back
      // to the full plan, or covers everything.
      for (const window of [20, 150, 700, 1999, 5000]) {
        planTuning.recentWindow = window;
        for (let i = 0; i < 300; i++) {
          const raw: RawFilter = { authors: [...some(pubkeys, 1, 6), ...Array.from({ length: int(17, 40) }, hex64)] };
          if (chance(0.6)) raw.kinds = some(regularKinds, 1, 3);
          if (chance(0.2)) raw["#t"] = some(tPool, 1, 2);
          if (chance(0.3)) raw.since = BASE + int(0, SPAN);
          if (chance(0.3)) raw.until = BASE + int(0, SPAN);
          const limit = int(1, 120);
          const expected = naiveQuery(raw, events, limit).map((e) => e.id);
          if (expected.length === limit) full++;
          else short++;
          const got = (await run({ filters: [compileFilter(raw, compileLimits).source], limits: [limit], maxSeq, now: 0 })).map(idOf);
          if (JSON.stringify(got) !== JSON.stringify(expected) && failures.length < 5)
            failures.push(
              `window ${window}, ${JSON.stringify({ ...raw, authors: (raw.authors as string[]).length })} limit ${limit}:\n  expected ${JSON.stringify(expected)}\n  got      ${JSON.stringify(got)}`,
            );
        }
      }
    } finally {
      planTuning.recentWindow = saved;
    }
    expect(failures).toEqual([]);
    expect(full).toBeGreaterThan(300);
    expect(short).toBeGreaterThan(100);
  }, 60_000);

  test(`${N_MULTI} multi-filter REQs: runQuery equals the union of per-filter answers, LiveIndex hits each REQ once`, async () => {
    const failures: string[] = [];
    reseed(2);
    let overlapping = 0;
    let nonEmpty = 0;
    // The same REQs as live subscriptions: one group per REQ, hit once when any filter matches.
    const index = new LiveIndex<number>();
    const reqs: Naive[][] = [];
    const reqRaws: RawFilter[][] = [];
    let compared = 0;
    for (let i = 0; i < N_MULTI; i++) {
      const raws = Array.from({ length: int(2, 3) }, genFilter);
      const cs = raws.map((r) => compileFilter(r, compileLimits));
      index.add(i, cs);
      reqs.push(raws.map(naiveOf));
      reqRaws.push(raws);
      const limits = cs.map(effectiveLimit);
      const union = new Map<string, NostrEvent>();
      let total = 0;
      raws.forEach((r, k) => {
        for (const e of naiveQuery(r, events, limits[k]!)) {
          union.set(e.id, e);
          total++;
        }
      });
      if (total > union.size) overlapping++;
      const expected = [...union.values()].sort(nip01Order).map((e) => e.id);
      if (expected.length > 0) nonEmpty++;
      const got = (await run({ filters: cs.map((c) => c.source), limits, maxSeq, now: 0 })).map(idOf);
      compared++;
      if (JSON.stringify(got) !== JSON.stringify(expected) && failures.length < 5)
        failures.push(
          `REQ #${i} ${JSON.stringify(raws)} limits ${JSON.stringify(limits)}:\n  expected ${JSON.stringify(expected)}\n  got      ${JSON.stringify(got)}`,
        );
    }
    let liveHits = 0;
    let liveChecks = 0;
    for (const e of events) {
      liveChecks++;
      const hits: number[] = [];
      index.match(e, (g) => hits.push(g));
      hits.sort((a, b) => a - b);
      liveHits += hits.length;
      const expected: number[] = [];
      reqs.forEach((ns, g) => {
        if (ns.some((n) => naiveMatch(n, e))) expected.push(g);
      });
      if (JSON.stringify(hits) !== JSON.stringify(expected) && failures.length < 5) {
        const g =
          expected.find((x) => !hits.includes(x)) ?? hits.find((x) => !expected.includes(x)) ?? hits.find((x, k) => hits[k + 1] === x)!;
        failures.push(
          `live REQ groups disagree for event ${JSON.stringify(e)}: expected ${expected.length} groups, got ${hits.length}; first failing REQ #${g}: ${JSON.stringify(reqRaws[g])}`,
        );
      }
    }
    expect(failures[0]).toBeUndefined();
    expect(compared).toBe(N_MULTI);
    expect(liveChecks).toBe(N_EVENTS);
    expect(liveHits).toBeGreaterThan(50_000);
    expect(nonEmpty).toBeGreaterThan(N_MULTI / 2);
    expect(overlapping).toBeGreaterThan(100);
    console.log(
      `differential: ${N_MULTI} multi-filter REQs (${nonEmpty} non-empty, ${overlapping} with overlapping filters); live: ${liveHits} group hits`,
    );
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------
// Lone surrogates and replacement chains. A lone UTF-16 surrogate is valid,
// escaped, in an event's JSON; SQLite keeps it as U+FFFD in the tag and d columns, Postgres does
// not index it (store/postgres/text.ts). Chains of replaceable and addressable versions, many
// written one per batch, make SQLite reuse the seq of the version just replaced: a tag row the
// delete left behind would then match the new version. The values below stay distinct after
// U+FFFD normalization (the stores cannot tell "\ud800" from "\uFFFD"; the reference could).

const ODD_VALUES = [
  "\ud800",
  "spoof\ud800",
  "a\udc00b",
  "\udfff\ud800x",
  "x\ud83d",
  "\uFFFD\uFFFD\uFFFD",
  "\uFFFDz",
  "\ud83d\ude00",
  "plain",
  "ü",
];
const ODD_D = ["", "post", "\ud800\ud800", "x\udc00y", "\uFFFD"];
const ODD_KINDS = [0, 3, 10002, 30023, 1, 7];

describe("differential: lone surrogates and replacement chains", () => {
  let oddDir: string;
  let oddDb: Database | undefined;
  let oddPg: PostgresStore | undefined;
  afterAll(async () => {
    oddDb?.close();
    await oddPg?.close();
    if (oddPg) await dropDatabase(databaseFor(oddDir));
    if (oddDir) rmSync(oddDir, { recursive: true, force: true });
  });

  test("the stored set, 3,000 filters and the tags table agree with the reference", async () => {
    expect(new Set(ODD_VALUES.map((v) => v.toWellFormed())).size).toBe(ODD_VALUES.length);
    expect(new Set(ODD_D.map((v) => v.toWellFormed())).size).toBe(ODD_D.length);
    reseed(7);
    oddDir = mkdtempSync(join(tmpdir(), "bunstr-diff-odd-"));
    let write: (batch: PendingWrite[]) => Promise<WriteOutcome[]>;
    let query: (job: QueryJob) => Promise<string[]>;
    let tagRows: () => Promise<{ name: string; value: string; created_at: number; seq: number }[]>;
    let eventRows: () => Promise<{ seq: number; created_at: number; json: string }[]>;
    if (onPostgres) {
      const pg = (oddPg = await PostgresStore.open({ url: await createDatabase(databaseFor(oddDir)), poolSize: 4 }));
      write = (batch) => pg.writeBatch(batch, RULES);
      query = (job) => allRows(pg.query(job));
      tagRows = async () => [...(await pg.sql`SELECT name, value, created_at::float8 AS created_at, seq::float8 AS seq FROM tags`)];
      eventRows = async () => [...(await pg.sql`SELECT seq::float8 AS seq, created_at::float8 AS created_at, json FROM events`)];
    } else {
      const db = (oddDb = openDatabase({ path: join(oddDir, "odd.sqlite"), synchronous: "normal" }));
      const writer = new SqliteWriter(db);
      const cache = new StatementCache(db);
      write = async (batch) => writer.writeBatch(batch, RULES);
      query = async (job) => runQuery(cache, job);
      tagRows = async () => db.query(`SELECT name, ${tagValueText("value")} AS value, created_at, seq FROM tags`).all() as any;
      eventRows = async () => db.query("SELECT seq, created_at, json FROM events").all() as any;
    }

    const authors = Array.from({ length: 10 }, hex64);
    const oddTags = (): string[][] =>
      Array.from({ length: int(0, 3) }, () =>
        chance(0.5) ? ["t", pick(ODD_VALUES)] : chance(0.6) ? ["x", pick(ODD_VALUES)] : ["p", pick(authors)],
      );
    const event = (pubkey: string, kind: number, created_at: number, tags: string[][]): NostrEvent => ({
      id: hex64(),
      pubkey,
      created_at,
      kind,
      tags,
      content: `odd ${kind}`,
      sig: "0".repeat(128),
    });
    // The write order: regular events, and chains of versions of one address, mostly in order
    // (each newer), sometimes a tie or an older version after a newer one.
    const order: NostrEvent[] = [];
    const all: NostrEvent[] = [];
    while (all.length < 900) {
      const pubkey = pick(authors);
      const kind = chance(0.45) ? pick([1, 7]) : pick(ODD_KINDS);
      if (kind === 1 || kind === 7) {
        const e = event(pubkey, kind, BASE + int(0, SPAN), oddTags());
        all.push(e);
        order.splice(chance(0.5) ? order.length : int(0, order.length), 0, e);
        continue;
      }
      const d = pick(ODD_D);
      let at = BASE + int(0, SPAN);
      const chain: NostrEvent[] = [];
      for (let k = int(2, 6); k > 0; k--) {
        const tags = oddTags();
        if (kind === 30023) tags.splice(int(0, tags.length), 0, d === "" && chance(0.3) ? ["d"] : ["d", d]);
        chain.push(event(pubkey, kind, at, tags));
        at += chance(0.15) ? 0 : chance(0.15) ? -int(1, 3) : int(1, 5);
      }
      all.push(...chain);
      // Consecutive (one batch each below, often): each version replaces the last stored event.
      if (chance(0.6)) order.push(...chain);
      else for (const e of chain) order.splice(int(0, order.length), 0, e);
    }
    const seqs = new Map<number, string>();
    let reused = 0;
    for (let i = 0; i < order.length; ) {
      const batch = order.slice(i, (i += chance(0.6) ? 1 : int(2, 12)));
      const outcomes = await write(batch.map((e) => ({ event: e, json: serializeEvent(e) })));
      outcomes.forEach((o, j) => {
        if (!o.stored) return;
        if (seqs.has(o.seq) && seqs.get(o.seq) !== batch[j]!.id) reused++;
        seqs.set(o.seq, batch[j]!.id);
      });
    }

    // The reference: every regular event, and the NIP-01 winner of each address.
    const best = new Map<string, NostrEvent>();
    const expected: NostrEvent[] = [];
    for (const e of all) {
      if (e.kind === 1 || e.kind === 7) {
        expected.push(e);
        continue;
      }
      const key = `${e.pubkey}:${e.kind}:${e.kind === 30023 ? (e.tags.find((t) => t[0] === "d")?.[1] ?? "") : ""}`;
      const cur = best.get(key);
      if (!cur || nip01Order(e, cur) < 0) best.set(key, e);
    }
    expected.push(...best.values());
    // What the reference may match by tag: Postgres indexes no value it cannot hold as text.
    const matchable = onPostgres
      ? expected.map((e) => ({ ...e, tags: e.tags.filter((t) => t[1] === undefined || t[1].isWellFormed()) }))
      : expected;
    const byId = new Map(expected.map((e) => [e.id, e]));
    const maxSeqOdd = Math.max(...seqs.keys());

    const stored = (await query({ filters: [{}], limits: [5000], maxSeq: maxSeqOdd, now: 0 })).map(idOf).sort();
    expect(stored).toEqual(expected.map((e) => e.id).sort());

    // Every tag row is one the stored events index (first values of single-letter tags), and back.
    const rowKey = (name: string, value: string, createdAt: number, seq: number) => JSON.stringify([name, value, createdAt, seq]);
    const want = new Set<string>();
    for (const r of await eventRows())
      for (const t of (JSON.parse(r.json) as NostrEvent).tags)
        if (t[1] !== undefined && /^[a-zA-Z]$/.test(t[0]!) && (!onPostgres || t[1].isWellFormed()))
          want.add(rowKey(t[0]!, t[1].toWellFormed(), r.created_at, r.seq));
    const have = (await tagRows()).map((r) => rowKey(r.name, r.value, r.created_at, r.seq));
    expect(have.filter((k) => !want.has(k))).toEqual([]); // no orphan rows
    expect([...want].filter((k) => !have.includes(k))).toEqual([]);
    expect(have.length).toBe(want.size);

    const failures: string[] = [];
    let nonEmpty = 0;
    let oddHits = 0;
    for (let i = 0; i < 3000; i++) {
      const raw: RawFilter = {};
      if (chance(0.3)) raw.authors = some(authors, 1, 2);
      if (chance(0.4)) raw.kinds = some(ODD_KINDS, 1, 3);
      if (chance(0.5)) raw["#t"] = some([...ODD_VALUES, "absent"], 1, 3);
      if (chance(0.25)) raw["#x"] = some(ODD_VALUES, 1, chance(0.2) ? 12 : 2); // over 8 values: matched in the event's JSON
      if (chance(0.15)) raw["#d"] = some(ODD_D, 1, 2);
      if (chance(0.1)) raw["#p"] = some(authors, 1, 2);
      if (chance(0.2)) raw.since = BASE + int(0, SPAN);
      if (chance(0.2)) raw.until = BASE + int(0, SPAN);
      const limit = chance(0.3) ? int(1, 20) : 500;
      const want = naiveQuery(raw, matchable, limit).map((e) => e.id);
      if (want.length > 0) nonEmpty++;
      if (want.some((id) => byId.get(id)!.tags.some((t) => t[1] !== undefined && !t[1].isWellFormed()))) oddHits++;
      const got = (await query({ filters: [compileFilter(raw, compileLimits).source], limits: [limit], maxSeq: maxSeqOdd, now: 0 })).map(
        idOf,
      );
      if (JSON.stringify(got) !== JSON.stringify(want) && failures.length < 5)
        failures.push(
          `filter #${i} ${JSON.stringify(raw)} (limit ${limit}):\n  expected ${JSON.stringify(want)}\n  got      ${JSON.stringify(got)}`,
        );
    }
    expect(failures).toEqual([]);
    // Not vacuous: chains replaced, seqs reused (SQLite), answers with surrogate-bearing events.
    expect(expected.length).toBeLessThan(all.length - 200);
    if (!onPostgres) expect(reused).toBeGreaterThan(20);
    expect(nonEmpty).toBeGreaterThan(1000);
    expect(oddHits).toBeGreaterThan(300);
    console.log(
      `differential (lone surrogates, replacement chains): ${all.length} events written, ${expected.length} stored, ${reused} seqs reused, ${have.length} tag rows; 3000 filters, ${nonEmpty} non-empty, ${oddHits} with lone-surrogate events`,
    );
  }, 60_000);
});

// SQLite's plans; the Postgres store's are checked with EXPLAIN on 1M events (docs/scaling.md).
if (!onPostgres)
  describe("query plans", () => {
    // Not a differential check, but the same database: a REQ without list conditions must walk the
    // created_at index and stop at its limit, not read and sort every stored event (which the
    // REQ snapshot cut `seq <= maxSeq` once caused, by offering SQLite a rowid range to drive from).
    for (const f of [{}, { since: BASE + 10 }, { until: BASE + 30 }, { since: BASE, until: BASE + 30 }])
      test(`${JSON.stringify(f)} is answered in index order`, () => {
        for (const plan of planStatements(f, { maxSeq, now: 0 })) {
          const detail = (db.query(`EXPLAIN QUERY PLAN ${plan.sql}`).all(...plan.params) as { detail: string }[])
            .map((r) => r.detail)
            .join(" | ");
          expect(detail).toContain("events_created");
          expect(detail).not.toContain("TEMP B-TREE FOR ORDER BY");
        }
      });
  });

// ---------------------------------------------------------------------------------------------
// compileFilter validation and canonicalFilterKey

describe("compileFilter", () => {
  const H = "ab".repeat(32);
  const limits = { maxValues: 3 };
  const invalid: [string, unknown][] = [
    ["not an object", "x"],
    ["null", null],
    ["an array", [{}]],
    ["ids not hex", { ids: ["zz".repeat(32)] }],
    ["ids too short", { ids: ["abcd"] }],
    ["ids uppercase hex", { ids: [H.toUpperCase()] }],
    ["authors uppercase hex", { authors: ["AB".repeat(32)] }],
    ["ids non-string value", { ids: [123] }],
    ["#e not hex", { "#e": ["note1xyz"] }],
    ["#e uppercase", { "#e": [H.toUpperCase()] }],
    ["#p not hex", { "#p": ["npub1abc"] }],
    ["#p 63 chars", { "#p": [H.slice(1)] }],
    ["#t non-string value", { "#t": [1] }],
    ["multi-letter tag key", { "#emoji": ["x"] }],
    ["empty tag key", { "#": ["x"] }],
    ["digit tag key", { "#1": ["x"] }],
    ["unknown key", { search: "x" }],
    ["unknown key beside known", { kinds: [1], foo: 1 }],
    ["non-integer kind", { kinds: [1.5] }],
    ["string kind", { kinds: ["1"] }],
    ["negative kind", { kinds: [-1] }],
    ["kind above 65535", { kinds: [65536] }],
    ["non-integer limit", { limit: 2.5 }],
    ["string limit", { limit: "10" }],
    ["negative limit", { limit: -1 }],
    ["non-integer since", { since: 1.5 }],
    ["negative since", { since: -1 }],
    ["string until", { until: "1700000000" }],
    ["negative until", { until: -5 }],
    ["unsafe integer since", { since: 2 ** 60 }],
    ["ids not an array", { ids: H }],
    ["authors not an array", { authors: { 0: H } }],
    ["kinds not an array", { kinds: 1 }],
    ["#t not an array", { "#t": "nostr" }],
    ["too many ids", { ids: [H, H, H, H] }],
    ["too many authors", { authors: [H, H, H, H] }],
    ["too many kinds", { kinds: [1, 2, 3, 4] }],
    ["too many tag values", { "#t": ["a", "b", "c", "d"] }],
  ];
  for (const [name, raw] of invalid)
    test(`rejects ${name} with "invalid"`, () => {
      let err: unknown;
      try {
        compileFilter(raw, limits);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ProtocolError);
      expect((err as ProtocolError).prefix).toBe("invalid");
      expect((err as ProtocolError).text.startsWith("invalid: ")).toBe(true);
    });

  test("accepts the edges: max values, zero, kind 65535, any single letter tag", () => {
    const c = compileFilter({ ids: [H, H, H], kinds: [0, 65535], since: 0, until: 0, limit: 0, "#Z": ["x"], "#t": [""] }, limits);
    expect(c.neverMatch).toBe(false);
    expect(c.tags.map(([n]) => n)).toEqual(["Z", "t"]);
    expect(c.limit).toBe(0);
  });

  test("empty lists and since > until never match", () => {
    for (const raw of [{ ids: [] }, { authors: [] }, { kinds: [] }, { "#t": [] }, { since: 10, until: 9 }])
      expect(compileFilter(raw, limits).neverMatch).toBe(true);
    expect(compileFilter({ since: 10, until: 10 }, limits).neverMatch).toBe(false);
  });

  test("canonicalFilterKey ignores key order, value order, duplicates and limit", () => {
    const K = (raw: unknown) => canonicalFilterKey(compileFilter(raw, { maxValues: 10 }));
    const a = { kinds: [7, 1], authors: [H, "cd".repeat(32)], "#t": ["b", "a"], since: 5, until: 9 };
    const b = { until: 9, "#t": ["a", "b", "a"], since: 5, authors: ["cd".repeat(32), H], kinds: [1, 7, 1] };
    expect(K(a)).toBe(K(b));
    expect(K({ ...a, limit: 10 })).toBe(K(a));
    expect(K({ ...a, limit: 10 })).toBe(K({ ...b, limit: 500 }));
    // kinds sort numerically-consistently: [10, 9] and [9, 10] are the same set
    expect(K({ kinds: [10, 9, 100] })).toBe(K({ kinds: [100, 9, 10] }));
    // ... and anything that changes what matches changes the key.
    expect(K({ ...a, since: 6 })).not.toBe(K(a));
    expect(K({ ...a, kinds: [1] })).not.toBe(K(a));
    expect(K({ "#t": ["a"] })).not.toBe(K({ "#T": ["a"] }));
    expect(K({ "#t": ["a"] })).not.toBe(K({ "#d": ["a"] }));
    expect(K({ since: 5 })).not.toBe(K({ until: 5 }));
    expect(K({})).not.toBe(K({ kinds: [] }));
  });
});
