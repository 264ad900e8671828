// Issue: hostile readers. Attacks over real websockets against a relay with a large store, each of
// which starved or bloated the relay before reads ran in slices (store/sqlite/query.ts, store/sqlite/readers.ts):
// a scan that kept burning a worker after its client was told it had timed out, budgets that a
// new connection reset, filters and results held whole in memory, NEG-MSG floods on the main thread.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nip77 } from "nostr-tools";
import { stuckReader } from "../bench/lib/tcp.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import type { PendingWrite } from "../src/store/types.ts";
import { Client, now, startTestRelay, type ConfigPatch, type TestRelay } from "./helpers.ts";

const N = 40_000;
const BIG = 800;
const BIG_BYTES = 60_000;
const dir = mkdtempSync(join(tmpdir(), "bunstr-hostile-reads-"));
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const pubkeys = Array.from({ length: 500 }, (_, i) => hex64(`pk ${i}`));
const base = now() - 10 * 86400;
const sampleIds: string[] = [];
let relay: TestRelay | undefined;
const clients: Client[] = [];

beforeAll(async () => {
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  store.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
  const sig = "ab".repeat(64);
  const write = (events: NostrEvent[]) =>
    store.writeBatch(
      events.map((event) => ({ event, json: JSON.stringify(event) }) as PendingWrite),
      rules,
    );
  for (let i = 0; i < N; i += 2000) {
    const batch: NostrEvent[] = [];
    for (let k = i; k < i + 2000; k++) {
      const e = {
        id: hex64(`ev ${k}`),
        pubkey: pubkeys[k % 500]!,
        created_at: base + k,
        kind: 1,
        tags: [["t", "nostr"]],
        content: `note ${k}`,
        sig,
      };
      if (k % 1000 === 7) sampleIds.push(e.id);
      batch.push(e);
    }
    write(batch);
  }
  // Large events for the streaming test: 800 x 60 KB = 48 MB of results for one REQ.
  const filler = "x".repeat(BIG_BYTES);
  for (let i = 0; i < BIG; i += 100)
    write(
      Array.from({ length: 100 }, (_, j) => ({
        id: hex64(`big ${i + j}`),
        pubkey: pubkeys[0]!,
        created_at: base + i + j,
        kind: 1,
        tags: [["t", "big"]],
        content: filler,
        sig,
      })),
    );
  await store.close();
}, 120_000);

afterAll(async () => {
  for (const c of clients) c.close();
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function useRelay(patch: ConfigPatch): Promise<TestRelay> {
  await relay?.stop();
  relay = await startTestRelay(patch, { dir });
  return relay;
}

async function connect(url = relay!.url): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

async function until(cond: () => boolean, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !cond(); await Bun.sleep(2)) if (Date.now() > deadline) throw new Error("timed out");
}

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

/** Cores this process used over `ms` (the relay runs in it, workers included). */
async function coresOver(ms: number): Promise<number> {
  const u0 = process.cpuUsage();
  await Bun.sleep(ms);
  const u = process.cpuUsage(u0);
  return (u.user + u.system) / 1000 / ms;
}

/** A well-behaved client's REQ (an ids lookup) round trips, every `every` ms, until stopped. */
function probe(c: Client, every = 20): { times: number[]; stop(): Promise<number[]> } {
  const times: number[] = [];
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const t = performance.now();
      const r = await c.req(`probe${i}`, { ids: [sampleIds[i % sampleIds.length]!] });
      expect(r.end).toEqual(["EOSE", `probe${i}`]);
      expect(r.events.length).toBe(1);
      times.push(performance.now() - t);
      c.send(["CLOSE", `probe${i}`]);
      await Bun.sleep(every);
    }
  })();
  return {
    times,
    async stop() {
      running = false;
      await loop;
      return times;
    },
  };
}

// {"#t":["nostr"],"#x":[9 values matching nothing]}: every "nostr" event is a candidate that the
// #x probes reject; 20 of them in one REQ is seconds of scanning for no result at all.
const starving = () =>
  Array.from({ length: 20 }, (_, i) => ({ "#t": ["nostr"], "#x": Array.from({ length: 9 }, (_, j) => `n${i}-${j}`), limit: 10 }));

describe("a scan past its time", () => {
  test("is stopped: CLOSED at the timeout, the workers go idle at once, and others are served meanwhile", async () => {
    // Each starving REQ needs about 1 s of worker time on a 2-core CI machine: the timeout is well
    // under it, or a quick machine finishes the scan (EOSE) before the timeout stops it.
    const r = await useRelay({ database: { reader_workers: 2, query_timeout_ms: 300 } });
    const good = await connect();
    await good.req("warm", { ids: [sampleIds[0]!] });
    const attackers = await Promise.all([connect(), connect()]);
    const p = probe(good, 5);
    const t0 = performance.now();
    for (const [i, a] of attackers.entries()) a.send(["REQ", `starve${i}`, ...starving()]);
    const ends = await Promise.all(
      attackers.map((a, i) => a.next((f) => (f[0] === "CLOSED" || f[0] === "EOSE") && f[1] === `starve${i}`, 15_000)),
    );
    const closedAfter = performance.now() - t0;
    const times = await p.stop();
    // Right after the CLOSEDs, nothing is left running: the worker threads were not merely abandoned.
    const cores = await coresOver(1500);
    console.log(
      `starving REQs: ${JSON.stringify(ends.map((e) => e[2]))} after ${closedAfter.toFixed(0)} ms; good client's REQs meanwhile: n ${times.length}, p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms; then ${cores.toFixed(2)} cores`,
    );
    for (const e of ends) expect(e.slice(0, 2)[0]).toBe("CLOSED");
    for (const e of ends) expect(e[2]).toStartWith("error: query took too long");
    expect(closedAfter).toBeLessThan(5000);
    expect(cores).toBeLessThan(0.5);
    expect(times.length).toBeGreaterThan(10);
    expect(percentile(times, 99)).toBeLessThan(250);
    // The relay still answers the heavy shape when it is cheap (a limit it can fill).
    expect((await good.req("fine", { "#t": ["nostr"], limit: 5 })).events.length).toBe(5);
    void r;
  }, 60_000);

  test("the budget follows the address: new connections from it do not bring new query time", async () => {
    // 600 ms a minute for the address, a 4,000 ms burst; each connection alone would have 10 s.
    // (A 1,000 ms burst and a 2,000 ms timeout: beside a CPU hog at load 10, the first
    // connection's scan alone spent the burst and was stopped rate-limited:.)
    await useRelay({
      database: { reader_workers: 2, query_timeout_ms: 5000 },
      rate_limits: { query_ms_per_minute: 600, query_ms_burst: 4000 },
    });
    // Each connection's scan takes a share of the burst (how much depends on the machine, its load
    // and the store's row format), so connections go on until three in a row are refused, or 100.
    // A budget per connection only (the old code) answers every one of them EOSE.
    const answers: string[] = [];
    const refusedThrice = () => answers.length >= 3 && answers.slice(-3).every((a) => a.startsWith("rate-limited:"));
    for (let i = 0; i < 100 && !refusedThrice(); i++) {
      const c = await connect();
      c.send(["REQ", `s${i}`, ...starving().slice(0, 3)]);
      const end = await c.next((f) => (f[0] === "CLOSED" || f[0] === "EOSE") && f[1] === `s${i}`, 15_000);
      answers.push(end[0] === "EOSE" ? "EOSE" : end[2]);
      c.close();
    }
    console.log(`fresh connections from one address: ${JSON.stringify(answers)}`);
    expect(answers[0]).toBe("EOSE");
    // Once the address's time is spent, every brand-new connection is refused (or stopped) too.
    const spent = answers.findIndex((a) => a !== "EOSE");
    expect(spent).toBeGreaterThan(0);
    for (const a of answers.slice(spent)) expect(a).toStartWith("rate-limited:");
    expect(answers.length - spent).toBe(3);
  }, 120_000);
});

describe("filters are bounded in bytes", () => {
  test("a filter value longer than max_filter_value_length: CLOSED invalid:", async () => {
    await useRelay({});
    const c = await connect();
    const r = await c.req("long", { "#t": ["v".repeat(120_000)], limit: 0 });
    expect(r.end[0]).toBe("CLOSED");
    expect(r.end[2]).toStartWith("invalid:");
    const ok = await c.req("ok", { "#t": ["v".repeat(1000)], limit: 0 });
    expect(ok.end).toEqual(["EOSE", "ok"]);
  });

  test("per connection and per address: subscriptions past the byte budget get CLOSED rate-limited:", async () => {
    await useRelay({ limits: { max_filter_bytes_per_connection: 20 * 1024, max_filter_bytes_per_ip: 30 * 1024 } });
    const sub = (i: number) => ({ "#t": [`${i}`.padEnd(1000, "v")], limit: 0 });
    const a = await connect();
    const answers: string[] = [];
    for (let i = 0; i < 10; i++) answers.push((await a.req(`a${i}`, sub(i))).end[0]);
    // ~2.7 KB each (a filter, a list, 1,000 characters at 2 bytes): 7 fit in 20 KiB, the rest are refused.
    expect(answers.filter((x) => x === "EOSE").length).toBe(7);
    expect((await a.req("more", sub(99))).end[2]).toStartWith("rate-limited:");
    // A second connection from the same address has its own 20 KiB but shares the 30 KiB.
    const b = await connect();
    const more: string[] = [];
    for (let i = 0; i < 10; i++) more.push((await b.req(`b${i}`, sub(i))).end[0]);
    expect(more.filter((x) => x === "EOSE").length).toBeLessThan(7);
    expect(more.filter((x) => x === "EOSE").length).toBeGreaterThan(0);
    // Closing subscriptions gives the bytes back.
    for (let i = 0; i < 7; i++) a.send(["CLOSE", `a${i}`]);
    await a.req("sync", { limit: 0 });
    expect((await b.req("b-after", sub(50))).end[0]).toBe("EOSE");
  });
});

describe("results stream under backpressure", () => {
  test("a client that never reads a 48 MB answer costs the relay a bounded amount of memory; reading, it gets every event", async () => {
    const r = await useRelay({});
    Bun.gc(true);
    const rss0 = process.memoryUsage().rss;
    const stuck = await stuckReader(Number(new URL(r.url).port), [["REQ", "big", { "#t": ["big"], limit: 5000 }]]);
    let peak = rss0;
    for (let i = 0; i < 20; i++) {
      await Bun.sleep(100);
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    const grown = (peak - rss0) / 1024 / 1024;
    // Meanwhile others are served.
    const c = await connect();
    expect((await c.req("other", { ids: [sampleIds[3]!] })).events.length).toBe(1);
    const got = await stuck.drain(4000);
    console.log(
      `never-reading client, REQ of ${BIG} x ${BIG_BYTES} B: relay RSS +${grown.toFixed(0)} MiB while stuck; then read ${(got.bytes / 1e6).toFixed(1)} MB`,
    );
    expect(grown).toBeLessThan(40);
    expect(got.bytes).toBeGreaterThan(BIG * BIG_BYTES);
  }, 60_000);
});

describe("NEG-MSG floods", () => {
  const { Negentropy, NegentropyStorageVector } = nip77;
  test("reconciliation is paid for from the query budget, off the main thread: a flood gets NEG-ERR rate-limited:, others keep their latency", async () => {
    // 50 ms/s per connection (1,000 ms of burst, enough to open the session on a loaded box: the
    // readers read pages through their own cache, not a map, and a cold walk of 40,000 items took
    // more than 200 ms there, past 400 ms beside a CPU hog at load 10); it lives in a reader
    // worker. 500 heavy NEG-MSGs, each a walk of all 40,000 items, cost far more.
    await useRelay({ limits: { query_ms_per_second: 50 } });
    const empty = new NegentropyStorageVector();
    empty.seal();
    const attacker = await connect();
    const good = await connect();
    const initial = await new Negentropy(empty).initiate();
    attacker.send(["NEG-OPEN", "n", { "#t": ["nostr"] }, initial]);
    const opened = await attacker.next((f) => f[1] === "n", 10_000);
    expect(opened[0], JSON.stringify(opened)).toBe("NEG-MSG");
    // One range over everything in IdList mode with 1,700 ids (a 109 KB frame): the relay walks all
    // its 40,000 items against them for every such message.
    const ids = Array.from({ length: 1700 }, (_, i) => hex64(`neg ${i}`)).join("");
    const heavyMsg = `6100000${2}8d24${ids}`;
    // The good client's round trips on this box right now, before the flood: the bound below is
    // relative to them, so a loaded CI box does not fail it (the old main-thread reconciliation
    // held every other client 1.8-2.5 s).
    const before = probe(good);
    await until(() => before.times.length >= 25, 15_000);
    const baseline = await before.stop();
    const p = probe(good);
    const from = attacker.frames.length;
    // The frame serialized once and sent in bursts of 25: the test's clients share this thread
    // with the relay, and 500 JSON.stringify + send of 109 KB in one loop held it for 430 ms on
    // a fresh CI machine, which the probe then measured instead of the relay.
    const heavyFrame = JSON.stringify(["NEG-MSG", "n", heavyMsg]);
    for (let i = 0; i < 500; i++) {
      attacker.send(heavyFrame);
      if (i % 25 === 24) await Bun.sleep(0);
    }
    const err = await attacker.next((f) => f[0] === "NEG-ERR" && f[1] === "n", 15_000, from).catch(() => undefined);
    // Probes go on while the flood's queued frames are worked off, then some more.
    const probed = p.times.length;
    await until(() => p.times.length >= probed + 30, 15_000);
    const times = await p.stop();
    const bound = Math.max(250, 4 * percentile(baseline, 99));
    console.log(
      `NEG-MSG flood: ${JSON.stringify(err)}; good client's REQs p99 ${percentile(times, 99).toFixed(1)} ms (n ${times.length}; before: p99 ${percentile(baseline, 99).toFixed(1)} ms, n ${baseline.length}; bound ${bound.toFixed(0)} ms)`,
    );
    expect(err?.[2]).toStartWith("rate-limited:");
    expect(percentile(times, 99)).toBeLessThan(bound);
  }, 60_000);

  test("the main thread's share (parsing the frames, sending the replies) is paid from the address's negentropy allowance", async () => {
    // Query time to spare: only the allowance (600 ms a minute, bursts of 50 ms) can stop the flood.
    await useRelay({ rate_limits: { negentropy_ms_per_minute: 600, negentropy_ms_burst: 50 } });
    const empty = new NegentropyStorageVector();
    empty.seal();
    const attacker = await connect();
    const initial = await new Negentropy(empty).initiate();
    attacker.send(["NEG-OPEN", "a", { "#t": ["nostr"] }, initial]);
    expect((await attacker.next((f) => f[1] === "a", 10_000))[0]).toBe("NEG-MSG");
    const ids = Array.from({ length: 1700 }, (_, i) => hex64(`neg ${i}`)).join("");
    const heavyMsg = `61000002${"8d24"}${ids}`;
    const from = attacker.frames.length;
    // Each 109 KB frame costs the main thread a fraction of a millisecond: 50 ms of burst lasts
    // well under 500 of them. Sent 10 at a time, each ten answered before the next, so the
    // connection's backlog bound (64 frames waiting) never answers for the allowance.
    let answered = 0;
    let err: unknown[] | undefined;
    for (let sent = 0; sent < 500 && !err; ) {
      for (let i = 0; i < 10; i++, sent++) attacker.send(["NEG-MSG", "a", heavyMsg]);
      await until(() => attacker.frames.slice(from).filter((f) => f[1] === "a").length >= sent, 10_000);
      answered = sent;
      err = attacker.frames.slice(from).find((f) => f[0] === "NEG-ERR" && f[1] === "a");
    }
    expect(err?.[2]).toStartWith("rate-limited: too much negentropy reconciliation");
    const replies = attacker.frames.slice(from).filter((f) => f[0] === "NEG-MSG" && f[1] === "a").length;
    console.log(`negentropy allowance: NEG-ERR after ${replies} replies (${answered} frames sent)`);
    expect(replies).toBeGreaterThan(0);
    expect(replies).toBeLessThan(500);
  }, 60_000);
});
