// Heavy queries against a big database: a REQ that would scan everything returns no more than
// the caps (max_limit per filter, max_events_per_req over all filters); a client streaming such
// REQs neither freezes other clients' reads nor publishing; query time is accounted per
// connection (limits.query_ms_per_second: rate-limited:, then served again once the bucket
// refills); a query running past database.query_timeout_ms is answered CLOSED error: and stopped,
// and the relay keeps serving.
//
// The database (100k events, ~400k tag rows) is written straight through the store before any
// relay starts (no signatures are checked on that path), then relays with different limits are
// started on it one after another.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nip77 } from "nostr-tools";
import type { NostrEvent } from "../src/protocol/event.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import type { PendingWrite } from "../src/store/types.ts";
import { Client, fence, now, signer, startTestRelay, type ConfigPatch, type TestRelay } from "./helpers.ts";

const { Negentropy, NegentropyStorageVector } = nip77;
const emptyStorage = new NegentropyStorageVector();
emptyStorage.seal();

const N = 100_000;
const dir = mkdtempSync(join(tmpdir(), "bunstr-heavy-"));
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const pubkeys = Array.from({ length: 2000 }, (_, i) => hex64(`pubkey ${i}`));
const topics = Array.from({ length: 500 }, (_, i) => `topic${i}`);
const eTargets = Array.from({ length: 5000 }, (_, i) => hex64(`target ${i}`));
const base = now() - 20 * 86400;
/** created_at of the k-th stored event: one every 10 s, the newest is k = N-1. */
const createdAt = (k: number) => base + k * 10;
/** Ids of a few stored events, for ids lookups. */
const sample: { id: string; k: number }[] = [];
let seed = 0;
const randomHex64 = () => hex64(`random ${Math.random()} ${seed++}`);

let relay: TestRelay | undefined;
const clients: { close(): void }[] = [];

beforeAll(async () => {
  const t0 = performance.now();
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  // Test data only: no fsync while loading (the relays open their own connections, as configured).
  store.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
  const random = Buffer.alloc(32 * N);
  for (let o = 0; o < random.length; o += 65536) crypto.getRandomValues(random.subarray(o, Math.min(o + 65536, random.length)));
  const sig = "ab".repeat(64);
  let stored = 0;
  for (let i = 0; i < N; i += 2000) {
    const batch: PendingWrite[] = [];
    for (let k = i; k < Math.min(i + 2000, N); k++) {
      const event: NostrEvent = {
        id: random.toString("hex", k * 32, k * 32 + 32),
        pubkey: pubkeys[k % pubkeys.length]!,
        created_at: createdAt(k),
        kind: k % 10 === 0 ? 7 : 1,
        tags: [
          ["t", topics[(k * 7) % 500]!],
          ["t", topics[(k * 13 + 1) % 500]!],
          ["p", pubkeys[(k * 31) % 2000]!],
          ["e", eTargets[(k * 17) % 5000]!],
        ],
        content: `note ${k}`,
        sig,
      };
      if (k % 997 === 5) sample.push({ id: event.id, k });
      batch.push({ event, json: JSON.stringify(event) });
    }
    stored += (await store.writeBatch(batch, rules)).filter((o) => o.stored).length;
  }
  await store.close();
  expect(stored).toBe(N);
  console.log(`heavy-queries: ${N} events written in ${(performance.now() - t0).toFixed(0)} ms`);
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.close();
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Stops the previous relay and starts one with these limits on the shared database. */
async function useRelay(patch: ConfigPatch): Promise<TestRelay> {
  await relay?.stop();
  relay = await startTestRelay(patch, { dir });
  return relay;
}

async function connect(url: string): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

/** REQ -> EOSE/CLOSED with the events before it and the time it took; then CLOSE unless told not to. */
async function req(
  c: Client,
  subId: string,
  filters: object[],
  timeoutMs = 30_000,
  close = true,
): Promise<{ events: NostrEvent[]; end: any[]; ms: number }> {
  const from = c.frames.length;
  const t0 = performance.now();
  c.send(["REQ", subId, ...filters]);
  const end = await c.next((f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === subId, timeoutMs, from);
  const ms = performance.now() - t0;
  const events = c.frames
    .slice(from)
    .filter((f) => f[0] === "EVENT" && f[1] === subId)
    .map((f) => f[2] as NostrEvent);
  if (close) c.send(["CLOSE", subId]);
  return { events, end, ms };
}

const count = (c: Client, subId: string, filters: object[], timeoutMs = 30_000) => c.count(subId, filters, timeoutMs);

/**
 * The worker time the relay charged for each query that ended, by connection (its session), in
 * order. This is the relay's own measure, the one its query budget is kept in; the REQ -> EOSE
 * time seen here adds queueing, transport and, on a loaded box, this process's own delays.
 */
function chargedTimes(r: TestRelay): Map<object, number[]> {
  const store = r.ctx.store;
  const query = store.query.bind(store);
  const charged = new Map<object, number[]>();
  store.query = (job, ctx) =>
    query(
      job,
      ctx && {
        ...ctx,
        onEnd: (ms: number) => {
          charged.set(ctx.owner, [...(charged.get(ctx.owner) ?? []), ms]);
          ctx.onEnd?.(ms);
        },
      },
    );
  return charged;
}

/** Counts the queries the relay hands to its store from now on. */
function queriesAsked(r: TestRelay): { n: number } {
  const store = r.ctx.store;
  const query = store.query.bind(store);
  const asked = { n: 0 };
  store.query = (job, ctx) => {
    asked.n++;
    return query(job, ctx);
  };
  return asked;
}

const percentile = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

function expectNewestFirstAndDistinct(events: NostrEvent[]): void {
  for (let i = 1; i < events.length; i++) expect(events[i - 1]!.created_at).toBeGreaterThanOrEqual(events[i]!.created_at);
  expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
}

/** Filters that match a large part of the database (each alone is seconds of SQLite work here). */
const wholeDb = {
  everything: () => ({ limit: 1_000_000_000 }),
  manyTopics: (n = 200) => ({ "#t": topics.slice(0, n), limit: 1_000_000 }),
  manyAuthors: () => ({ authors: [...pubkeys.slice(0, 500), ...Array.from({ length: 500 }, randomHex64)], limit: 1_000_000 }),
  // Drives from 100 topics (40k tag rows) and checks each against 20 e values that match nothing.
  scanNothing: (nTopics = 100) => ({ "#t": topics.slice(0, nTopics), "#e": Array.from({ length: 20 }, randomHex64), limit: 5000 }),
  // Every t row against 300 e values: tens of seconds of SQLite work for no result at all.
  // Every topic: the whole tag index as a set, then every event sorted (~0.5-1 s here).
  verySlow: () => ({ "#t": topics, limit: 5000 }),
};

describe("caps", () => {
  test("whole-database REQs return at most max_limit (5000) per filter and max_events_per_req (10000) over the REQ", async () => {
    const r = await useRelay({ database: { reader_workers: 2, query_timeout_ms: 60_000 }, limits: { query_ms_per_second: 1_000_000 } });
    const cs = await Promise.all([0, 1, 2, 3, 4].map(() => connect(r.url)));
    const [all, noLimit, tagged, authored, multi] = await Promise.all([
      req(cs[0]!, "all", [wholeDb.everything()]),
      req(cs[1]!, "default", [{}]),
      req(cs[2]!, "tags", [wholeDb.manyTopics(150)]),
      req(cs[3]!, "authors", [wholeDb.manyAuthors()]),
      // 5 disjoint filters of 100 authors (5000 events each), limit 5000 each: 25000 asked, 10000 allowed.
      req(
        cs[4]!,
        "multi",
        [0, 1, 2, 3, 4].map((i) => ({ authors: pubkeys.slice(i * 100, i * 100 + 100), limit: 5000 })),
      ),
    ]);
    console.log(
      `caps: {} ${all.ms.toFixed(0)} ms, #t×150 ${tagged.ms.toFixed(0)} ms, authors×1000 ${authored.ms.toFixed(0)} ms, 5 filters ${multi.ms.toFixed(0)} ms`,
    );
    for (const x of [all, noLimit, tagged, authored, multi]) expect(x.end[0]).toBe("EOSE");

    expect(all.events).toHaveLength(5000);
    expectNewestFirstAndDistinct(all.events);
    expect(all.events[0]!.created_at).toBe(createdAt(N - 1));
    expect(all.events[4999]!.created_at).toBe(createdAt(N - 5000));
    // No limit: default_limit.
    expect(noLimit.events).toHaveLength(500);

    expect(tagged.events).toHaveLength(5000);
    expectNewestFirstAndDistinct(tagged.events);
    const wanted = new Set(topics.slice(0, 150));
    for (const e of tagged.events) expect(e.tags.some((t) => t[0] === "t" && wanted.has(t[1]!))).toBe(true);
    expect(authored.events).toHaveLength(5000);
    expectNewestFirstAndDistinct(authored.events);

    expect(multi.events).toHaveLength(10_000);
    expectNewestFirstAndDistinct(multi.events);
    // Scaled evenly: 2000 from each filter.
    for (let i = 0; i < 5; i++) {
      const set = new Set(pubkeys.slice(i * 100, i * 100 + 100));
      expect(multi.events.filter((e) => set.has(e.pubkey))).toHaveLength(2000);
    }
  }, 60_000);

  test("a small max_events_per_req scales every filter of a REQ down to fit", async () => {
    const r = await useRelay({ database: { reader_workers: 2 }, limits: { max_events_per_req: 100, query_ms_per_second: 1_000_000 } });
    const c = await connect(r.url);
    const one = await req(c, "one", [wholeDb.everything()]);
    expect(one.end).toEqual(["EOSE", "one"]);
    expect(one.events).toHaveLength(100);
    expect(one.events[0]!.created_at).toBe(createdAt(N - 1));

    // Three disjoint filters asking 1000 each: 100 over the REQ, shared evenly (floor(1000*100/3000) = 33).
    const sets = [0, 1, 2].map((i) => pubkeys.slice(i * 10, i * 10 + 10));
    const three = await req(
      c,
      "three",
      sets.map((authors) => ({ authors, limit: 1000 })),
    );
    expect(three.end).toEqual(["EOSE", "three"]);
    expect(three.events.length).toBeLessThanOrEqual(100);
    expect(three.events).toHaveLength(99);
    for (const authors of sets) expect(three.events.filter((e) => authors.includes(e.pubkey))).toHaveLength(33);
    // Filters under the cap together are not touched.
    const small = await req(c, "small", [
      { authors: [pubkeys[0]!], limit: 30 },
      { authors: [pubkeys[1]!], limit: 40 },
    ]);
    expect(small.events).toHaveLength(70);
    // The maximum number of filters, each asking for everything: still 100.
    const twenty = await req(
      c,
      "twenty",
      Array.from({ length: 20 }, (_, i) => ({ "#t": [topics[i]!], limit: 5000 })),
    );
    expect(twenty.end).toEqual(["EOSE", "twenty"]);
    expect(twenty.events.length).toBeLessThanOrEqual(100);
    expect(twenty.events.length).toBeGreaterThanOrEqual(80);
  }, 30_000);
});

/**
 * A client that keeps `inFlight` heavy REQs running, each replaced by the next as soon as it
 * ends. A raw websocket that never parses the (large) answers, so the test process's own JSON
 * work does not count against the relay.
 */
function heavyClient(url: string, inFlight: number, filters: (() => object)[]) {
  const ws = new WebSocket(url);
  let n = 0;
  let stopped = false;
  const stats = { sent: 0, eose: 0, closed: {} as Record<string, number>, events: 0 };
  const next = () => {
    if (stopped) return;
    const subId = `h${n}`;
    ws.send(JSON.stringify(["REQ", subId, filters[n++ % filters.length]!()]));
    stats.sent++;
  };
  ws.onmessage = (m) => {
    const s = String(m.data);
    if (s.startsWith('["EVENT"')) return void stats.events++;
    if (s.startsWith('["EOSE"')) stats.eose++;
    else if (s.startsWith('["CLOSED"')) {
      const reason = String(JSON.parse(s)[2]).split(":")[0]!;
      stats.closed[reason] = (stats.closed[reason] ?? 0) + 1;
    } else return;
    ws.send(JSON.stringify(["CLOSE", JSON.parse(s)[1]]));
    next();
  };
  const open = new Promise<void>((res, rej) => {
    ws.onopen = () => {
      for (let i = 0; i < inFlight; i++) next();
      res();
    };
    ws.onerror = () => rej(new Error("heavy client cannot connect"));
  });
  clients.push({ close: () => ws.close() });
  return {
    open,
    stats,
    stop() {
      stopped = true;
      ws.close();
    },
  };
}

describe("a client streaming heavy REQs", () => {
  test("other clients' simple REQs and publishing keep their latency", async () => {
    // query_ms_per_second is lifted here: this test is about sharing the reader workers (the cost
    // budget, which would throttle the heavy client after ~10 s of query time, is tested below).
    // No query times out either (a timed-out query is a separate subject, see the last test).
    const r = await useRelay({ database: { reader_workers: 2, query_timeout_ms: 60_000 }, limits: { query_ms_per_second: 1_000_000 } });
    const charged = chargedTimes(r);
    const light = await connect(r.url);
    const publisher = await connect(r.url);
    const author = signer();

    let probeNo = 0;
    /**
     * For windowMs (at most maxCount probes, 20 ms apart): alternately an ids lookup and
     * {kinds:[1],limit:10}, each checked; returns the REQ->EOSE times.
     */
    async function probes(windowMs: number, maxCount: number): Promise<number[]> {
      const times: number[] = [];
      const deadline = performance.now() + windowMs;
      while (times.length < maxCount && performance.now() < deadline) {
        const i = probeNo++;
        if (i % 2 === 0) {
          const s = sample[i % sample.length]!;
          const x = await req(light, `p${i}`, [{ ids: [s.id] }]);
          expect(x.end).toEqual(["EOSE", `p${i}`]);
          expect(x.events.map((e) => e.id)).toEqual([s.id]);
          times.push(x.ms);
        } else {
          const x = await req(light, `p${i}`, [{ kinds: [1], limit: 10 }]);
          expect(x.end).toEqual(["EOSE", `p${i}`]);
          expect(x.events).toHaveLength(10);
          times.push(x.ms);
        }
        await Bun.sleep(20);
      }
      return times;
    }
    async function publishes(count: number): Promise<number[]> {
      const times: number[] = [];
      for (let i = 0; i < count; i++) {
        const e = author.sign({ kind: 1, content: `while heavy ${i} ${Math.random()}` });
        const t0 = performance.now();
        expect(await publisher.publish(e)).toEqual(["OK", e.id, true, ""]);
        times.push(performance.now() - t0);
      }
      return times;
    }

    await probes(500, 10); // warm the statement caches
    const base = await probes(1500, 100);
    const basePub = await publishes(20);

    const heavy = heavyClient(r.url, 4, [
      () => wholeDb.manyTopics(200),
      () => wholeDb.scanNothing(),
      () => wholeDb.manyTopics(100),
      wholeDb.manyAuthors,
      wholeDb.everything,
    ]);
    const asked = queriesAsked(r);
    await heavy.open;
    // The relay has handed all 4 heavy REQs to its readers: the workers are now busy with them.
    for (const deadline = performance.now() + 10_000; asked.n < 4; await Bun.sleep(5)) expect(performance.now()).toBeLessThan(deadline);
    const loaded = await probes(2500, 100);
    const loadedPub = await publishes(20);
    const heavyStats = { ...heavy.stats, closed: { ...heavy.stats.closed } };
    heavy.stop();
    // The heavy client's queries are the longest ones the relay ran: their median worker time.
    const longest = (xs: number[]) => xs.reduce((m, x) => Math.max(m, x), 0);
    const heavyQueries = [...charged.values()].reduce((a, b) => (longest(a) > longest(b) ? a : b));
    const heavyMs = percentile(heavyQueries, 50);

    const report = {
      baseline: { n: base.length, p50: percentile(base, 50), p99: percentile(base, 99) },
      heavy: { n: loaded.length, p50: percentile(loaded, 50), p99: percentile(loaded, 99) },
      publishBaseline: { p50: percentile(basePub, 50), max: Math.max(...basePub) },
      publishHeavy: { p50: percentile(loadedPub, 50), max: Math.max(...loadedPub) },
      heavyClient: { ...heavyStats, queryMsP50: heavyMs },
    };
    console.log(
      "heavy load:",
      JSON.stringify(report, (_, v) => (typeof v === "number" ? Math.round(v * 10) / 10 : v)),
    );

    // None of the heavy client's queries was refused or cut short: the load was real.
    expect(heavyStats.closed).toEqual({});
    // Each heavy query here is 0.3-3 s of SQLite work and the heavy client keeps 4 of them
    // queued, so a simple REQ that has to wait for one takes hundreds of ms to seconds. A simple
    // REQ that gets a worker of its own takes a few ms, plus CPU contention: 2 worker threads busy
    // on a 2-core machine that other jobs share adds tens of ms, not hundreds. Hence: p99 within
    // 2x the unloaded p99 + 50 ms, or 300 ms, or half a heavy query's median worker time (as the
    // relay measured it), whichever is larger: a loaded box slows the heavy queries as much as
    // the probes, and a probe that waited for one would take most of one.
    // (With 100 probes the p99 is the second slowest: one stall of the host is tolerated.)
    expect(report.heavy.p99).toBeLessThanOrEqual(Math.max(300, 2 * report.baseline.p99 + 50, heavyMs / 2));
    // 2.5 s of 20 ms-spaced probes, each waiting for its answer: a fair relay answers ~100 of them
    // on a quiet box, and at least half as many as it answered unloaded in this run (beside a CPU
    // hog at load 7.8: 35 unloaded, 28 loaded); a probe stuck behind heavy queries (0.3-3 s each)
    // lets only a handful through.
    expect(loaded.length).toBeGreaterThanOrEqual(Math.max(10, Math.min(30, base.length / 2)));
    // Publishing does not wait for the reader workers: a publish stuck behind a heavy query would
    // take seconds. The verify worker and the event loop share the 2 cores with 2 busy readers
    // (and this host with other jobs: event-loop stalls of ~300 ms were seen here), so: a typical
    // OK within 2x unloaded + 50 ms (or 100 ms), and none later than 1 s or half a heavy query,
    // whichever is longer (as above).
    expect(report.publishHeavy.p50).toBeLessThanOrEqual(Math.max(100, 2 * report.publishBaseline.p50 + 50));
    expect(report.publishHeavy.max).toBeLessThan(Math.max(1000, heavyMs / 2));
  }, 60_000);
});

describe("cost accounting (limits.query_ms_per_second)", () => {
  // 100 ms of query time per second, bursts up to 2 s. The heavy REQ here is ~0.1-0.3 s of
  // SQLite work (more on a loaded host) for no result, so the limit trips after a handful of them
  // and the debt left when it trips (at most one query's cost) is repaid within a few seconds.
  // (A smaller rate would make that wait longer than this test may run: the debt is repaid at
  // query_ms_per_second.)
  const patch: ConfigPatch = { database: { reader_workers: 2 }, limits: { query_ms_per_second: 100 } };
  const heavyFilter = () => wholeDb.manyTopics(400);

  test("heavy REQs one after another: CLOSED rate-limited: soon; others unaffected; served again once the bucket refills", async () => {
    const r = await useRelay(patch);
    const charged = chargedTimes(r);
    const heavy = await connect(r.url);
    const other = await connect(r.url);
    const t0 = performance.now();
    let tripped: { after: number; ms: number; end: any[] } | undefined;
    const costs: number[] = [];
    for (let i = 0; i < 100 && !tripped; i++) {
      const x = await req(heavy, `h${i}`, [heavyFilter()]);
      if (x.end[0] === "CLOSED") tripped = { after: i, ms: performance.now() - t0, end: x.end };
      else costs.push(x.ms);
    }
    expect(tripped).toBeDefined();
    expect(tripped!.end).toEqual(["CLOSED", tripped!.end[1], "rate-limited: too much query time used, slow down"]);
    // Each admitted heavy REQ was charged its query time: about 2 s worth got through, no more.
    // Counted in the worker time the relay charged (the first connection to finish a query is the
    // heavy one), not in REQ -> EOSE times, which a loaded box stretches beyond the budget's. The
    // REQ that tripped may have run (and been charged) until the budget stopped it.
    const heavyCharged = [...[...charged.values()][0]!];
    expect(heavyCharged.length - costs.length).toBeOneOf([0, 1]);
    // COUNT and NEG-OPEN of the limited connection are refused too while it is in debt. The debt
    // the trip left may be a fraction of a millisecond, which the bucket (100 ms/s) refills before
    // a COUNT sent alone arrives, so they go right behind another heavy REQ: either the connection
    // is still in debt and all three are refused, or that REQ got in on a hair of refill and
    // holds its reserved cost (far more than the hair), so the two behind it are refused. Beside
    // a CPU hog that REQ once got in, ran and gave its reservation back before the COUNT was read
    // (issue 31 item 6): a round where the REQ was served and the COUNT answered shows nothing, so
    // it is sent again (the served REQ's cost is the debt of the next round), at most 5 rounds.
    // So too when a debt of a hair was refilled between the COUNT's check and the NEG-OPEN's (a CI
    // run: COUNT refused, NEG-OPEN answered): a round counts only when both were refused.
    let n: unknown[] = [];
    let neg: unknown[] = [];
    for (let round = 0; round < 5; round++) {
      const from = heavy.frames.length;
      heavy.send(["REQ", `x${round}`, heavyFilter()]);
      heavy.send(["COUNT", `n${round}`, { authors: [pubkeys[0]!] }]);
      heavy.send(["NEG-OPEN", `g${round}`, { authors: [pubkeys[0]!] }, new Negentropy(emptyStorage).initiate()]);
      n = await heavy.next((f) => f[1] === `n${round}`, 10_000, from);
      neg = await heavy.next((f) => f[1] === `g${round}`, 10_000, from);
      await heavy.next((f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === `x${round}`, 30_000, from);
      heavy.send(["CLOSE", `x${round}`]);
      if (neg[0] === "NEG-MSG") heavy.send(["NEG-CLOSE", `g${round}`]);
      if (n[0] === "CLOSED" && neg[0] === "NEG-ERR") break;
    }
    const spent = heavyCharged.reduce((a, b) => a + b, 0);
    expect(spent).toBeGreaterThan(1500);
    expect(spent).toBeLessThan(2000 + tripped!.ms / 10 + Math.max(...heavyCharged) + 500);

    // The budget is per connection: another client still runs heavy and simple queries.
    expect((await req(other, "o1", [heavyFilter()])).end).toEqual(["EOSE", "o1"]);
    const o2 = await req(other, "o2", [{ ids: [sample[0]!.id] }]);
    expect(o2.end).toEqual(["EOSE", "o2"]);
    expect(o2.events.map((e) => e.id)).toEqual([sample[0]!.id]);
    expect((await count(other, "n", [{ authors: [pubkeys[0]!] }]))[2]).toEqual({ count: N / pubkeys.length });

    // Waiting: the limited client is served again within its debt / rate, plus slack.
    const waitStart = performance.now();
    let refused = 0;
    let served: Awaited<ReturnType<typeof req>> | undefined;
    while (!served && performance.now() - waitStart < 15_000) {
      const x = await req(heavy, `again${refused}`, [{ ids: [sample[1]!.id] }]);
      if (x.end[0] === "EOSE") served = x;
      else {
        expect(x.end[2]).toStartWith("rate-limited:");
        refused++;
        await Bun.sleep(100);
      }
    }
    const refillMs = performance.now() - waitStart;
    console.log(
      `rate limit: tripped after ${tripped!.after} heavy REQs (${tripped!.ms.toFixed(0)} ms, ${spent.toFixed(0)} ms of queries charged, ${costs.reduce((a, b) => a + b, 0).toFixed(0)} ms REQ -> EOSE); ` +
        `served again after ${refillMs.toFixed(0)} ms (${refused} refusals meanwhile); COUNT then: ${JSON.stringify(n)}, NEG-OPEN then: ${JSON.stringify(neg).slice(0, 80)}`,
    );
    expect([n[0], n[2]]).toEqual(["CLOSED", "rate-limited: too much query time used, slow down"]);
    expect([neg[0], neg[2]]).toEqual(["NEG-ERR", "rate-limited: too much query time used, slow down"]);
    expect(served).toBeDefined();
    expect(served!.events.map((e) => e.id)).toEqual([sample[1]!.id]);
    // The debt was at most one heavy query (plus the refused probes, which cost nothing): 100 ms/s.
    expect(refillMs).toBeLessThan((Math.max(...costs) / 100) * 1000 + 3000);
  }, 40_000);

  test("a burst of heavy REQs sent at once is held to the same budget", async () => {
    // The budget must bound the work a connection can queue, not only what it has finished.
    // 100 ms/s: a 2,000 ms burst (a query running when its connection's budget is spent is
    // stopped, so one heavy REQ must fit in it). What one heavy REQ costs on this machine is
    // measured first (on other connections), so the bound holds on fast and slow hosts alike.
    const r = await useRelay({ database: { reader_workers: 2 }, limits: { query_ms_per_second: 100 } });
    const charged = chargedTimes(r);
    // One heavy REQ on each of 4 fresh connections (each has a full bucket); the first warms the
    // cache. Its cost is the worker time the relay charged for it (what the budget counts), not
    // the REQ -> EOSE time, which a loaded box stretches and which would shrink the bound below.
    const costs: number[] = [];
    for (let i = 0; i < 4; i++) {
      const m = await req(await connect(r.url), `m${i}`, [heavyFilter()]);
      expect(m.end).toEqual(["EOSE", `m${i}`]);
      for (let t = 0; charged.size <= i && t < 400; t++) await Bun.sleep(5); // its end is recorded
      const [ms] = [...charged.values()][i]!;
      if (i > 0) costs.push(ms!);
    }
    const cost = percentile(costs, 50);
    // A full bucket admits ~2,000 / cost REQs; the 2 workers may hold 2 more when the debt shows.
    const bound = Math.ceil(2000 / cost) + 4;
    const total = Math.min(49, Math.max(16, 2 * bound));
    const c = await connect(r.url);
    const from = c.frames.length;
    const t0 = performance.now();
    for (let i = 0; i < total; i++) c.send(["REQ", `b${i}`, heavyFilter()]);
    const ends: any[] = [];
    for (let i = 0; i < total; i++)
      ends.push(await c.next((f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === `b${i}`, 30_000, from));
    const ms = performance.now() - t0;
    const limited = ends.filter((f) => f[0] === "CLOSED" && String(f[2]).startsWith("rate-limited:")).length;
    const ran = total - limited;
    console.log(
      `pipelined burst: one heavy REQ costs ~${cost.toFixed(0)} ms; ${ran} of ${total} sent at once ran (~${((ran * cost) / 1000).toFixed(1)} s of query time against a 2,000 ms burst), ` +
        `${limited} rate-limited, all answered in ${ms.toFixed(0)} ms`,
    );
    expect(ran).toBeLessThanOrEqual(bound);
  }, 40_000);
});

describe("query timeout (database.query_timeout_ms)", () => {
  test("a slow REQ is answered error: took too long; the relay keeps serving and comes back to idle", async () => {
    const r = await useRelay({ database: { reader_workers: 2, query_timeout_ms: 100 }, limits: { query_ms_per_second: 1_000_000 } });
    const c = await connect(r.url);
    const light = await connect(r.url);
    const errors: unknown[] = [];
    const origError = console.error;
    console.error = (...a: unknown[]) => void errors.push(a);
    try {
      // Worker threads start on demand (tens of ms of CPU on a loaded box): start both query
      // workers (two connections asking at once) and the verify workers (an EVENT) now, so that
      // cost does not land in the 100 ms budget of a lookup below.
      const warm = signer().sign({ kind: 1, content: "starts the verify workers" });
      expect(await c.publish(warm)).toEqual(["OK", warm.id, true, ""]);
      await Promise.all([req(c, "w0", [{ kinds: [1], limit: 1 }]), req(light, "w1", [{ kinds: [1], limit: 1 }])]);
      // Simple queries from another client all along.
      const lightFailures: unknown[] = [];
      let lightDone = 0;
      let stopLight = false;
      const lightLoop = (async () => {
        for (let i = 0; !stopLight; i++) {
          const s = sample[i % sample.length]!;
          const x = await req(light, `l${i}`, [{ ids: [s.id] }], 10_000);
          if (x.end[0] !== "EOSE" || x.events[0]?.id !== s.id) lightFailures.push({ end: x.end, ms: Math.round(x.ms) });
          lightDone++;
        }
      })();

      const slow = wholeDb.verySlow();
      const t0 = performance.now();
      const x = await req(c, "slow", [slow], 30_000, false);
      const reqMs = performance.now() - t0;
      expect(x.end).toEqual(["CLOSED", "slow", "error: query took too long and was stopped"]);
      expect(x.events).toEqual([]);
      // More of them at once: one connection holds at most one of the two workers, so they queue
      // behind each other while the other client keeps being served.
      const both = await Promise.all([0, 1, 2, 3].map((i) => req(c, `both${i}`, [wholeDb.verySlow()])));
      for (const b of both) expect(b.end[2]).toBe("error: query took too long and was stopped");
      console.log(`timeout: CLOSED after ${reqMs.toFixed(0)} ms (query_timeout_ms 100); 5 queries answered as stopped`);

      // Everything below is observed first and asserted at the end, so that the log shows all of it.
      // Served afterwards, on both (replacement) workers at once.
      const after = await Promise.all(sample.slice(0, 4).map((s, i) => req(c, `after${i}`, [{ ids: [s.id] }])));
      const afterWrong = after.filter((a, i) => a.events[0]?.id !== sample[i]!.id).map((a) => a.end);
      const recent = await req(c, "k", [{ kinds: [1], limit: 10 }]);
      // The timed-out subscription is gone: a new event matching its filter is not sent to it.
      const e = signer().sign({ kind: 1, content: "matches the slow filter", tags: [["t", topics[0]!]] });
      const ok = await c.publish(e);
      const found = await req(c, "new", [{ ids: [e.id] }]);
      await (await fence(c))(); // had the "slow" subscription got e, it would have come before this

      stopLight = true;
      await lightLoop;

      // bun:sqlite cannot interrupt a running statement: an abandoned query's worker finishes it
      // (bounded by the statement) and returns to the pool; no extra threads are started. So once
      // those have run out, the relay's process is idle and nothing keeps the WAL from a checkpoint.
      let cores = Infinity;
      for (let tries = 0; tries < 15 && cores >= 0.5; tries++) {
        const cpu0 = process.cpuUsage();
        const wall0 = performance.now();
        await Bun.sleep(1000);
        const cpu = process.cpuUsage(cpu0);
        cores = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
      }
      const db = (r.ctx.store as SqliteStore).db;
      const ckpt = db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number; log: number; checkpointed: number };
      console.log(
        `timeout: after the 5 abandoned queries: ids lookups on the replacement workers wrong/refused: ${JSON.stringify(afterWrong)}; ` +
          `other client's lookups ${lightDone}, failed: ${JSON.stringify(lightFailures)}; idle relay process uses ${cores.toFixed(2)} cores; ` +
          `WAL checkpoint ${JSON.stringify(ckpt)}`,
      );

      expect(afterWrong).toEqual([]);
      expect(recent.events).toHaveLength(10);
      expect(ok).toEqual(["OK", e.id, true, ""]);
      expect(found.events.map((x) => x.id)).toEqual([e.id]);
      expect(c.eventsFor("slow")).toEqual([]);
      expect(lightDone).toBeGreaterThan(0);
      // Every lookup is a one-row primary-key read; on a starved 2-core box (other processes
      // running) a rare one can still exceed the 100 ms budget set here for the slow query. What
      // must not happen is a wrong answer or the other client being blocked.
      expect(lightFailures.length).toBeLessThanOrEqual(Math.ceil(lightDone / 1000));
      for (const f of lightFailures as { end: unknown[] }[]) expect(f.end[2]).toBe("error: query took too long and was stopped");
      expect(errors).toEqual([]);
      expect(cores).toBeLessThan(0.5);
      expect(ckpt.busy).toBe(0);
    } finally {
      console.error = origError;
    }
  }, 60_000);
});
