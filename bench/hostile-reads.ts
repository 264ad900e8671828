// Hostile readers against a relay on its default limits, each attack from addresses of its own
// (127.0.x.y), while a well-behaved client (127.0.0.10) publishes and reads in a loop:
//   starve    2 connections each send REQ with 20 x {"#t":["nostr"],"#x":[9 values],"limit":10}
//             (and COUNT) again as soon as they are answered: seconds of scanning for nothing.
//   filters   10 addresses x 20 connections open 50 subscriptions each: first with one 120 KB
//             tag value, then with filters of 20 x 1,000-character values up to the budgets.
//   results   6 clients that never read ask for 2,000 stored 60 KB events each.
//   negflood  2 addresses loop 109 KB NEG-MSG frames on an open negentropy session.
// For each: the good client's publish+REQ round trip (p50/p99), the relay's peak RSS and CPU, and
// whether it stayed up. Verdict (exit 0, else 1): the relay alive throughout; the good client's p99
// under 100 ms during the query-time attacks (the baseline's p99 + 100 ms on a loaded box) and
// served during the memory attacks; anonymous memory growth per phase within bounds (RSS also
// counts database pages the relay maps, which scans bring in and the kernel can take back).
//
//   npx bun bench/hostile-reads.ts [--events 300000] [--seconds 15]
// Everything talks to 127.0.0.0/8 only; every phase is bounded in time and stops by itself.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { PendingWrite } from "../src/store/types.ts";
import { RawWs } from "./lib/rawws.ts";
import { cpuSeconds, memoryMiB, RelayProcess } from "./lib/relay.ts";
import { stuckReader, type StuckReader } from "./lib/tcp.ts";

const { values: args } = parseArgs({
  options: { events: { type: "string", default: "300000" }, seconds: { type: "string", default: "15" } },
});
const N = Number(args.events);
const SECONDS = Number(args.seconds);
const BIG = 2000;
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const log = (m: string) => console.error(`[hostile-reads] ${m}`);
const base = Math.floor(Date.now() / 1000) - 30 * 86400;

// --- the store, written directly (a relay would take minutes to ingest it) -----------------------
const dir = mkdtempSync(join(tmpdir(), "bunstr-hostile-"));
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
{
  const t0 = performance.now();
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  store.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
  const write = (events: NostrEvent[]) =>
    store.writeBatch(
      events.map((event) => ({ event, json: JSON.stringify(event) }) as PendingWrite),
      rules,
    );
  for (let i = 0; i < N; i += 5000)
    write(
      Array.from({ length: Math.min(5000, N - i) }, (_, j) => ({
        id: hex64(`e${i + j}`),
        pubkey: hex64(`p${(i + j) % 1000}`),
        created_at: base + i + j,
        kind: 1,
        tags: [["t", "nostr"]],
        content: `note ${i + j}`,
        sig: "ab".repeat(64),
      })),
    );
  const filler = "x".repeat(60_000);
  for (let i = 0; i < BIG; i += 200)
    write(
      Array.from({ length: 200 }, (_, j) => ({
        id: hex64(`big${i + j}`),
        pubkey: hex64("pbig"),
        created_at: base + i + j,
        kind: 1,
        tags: [["t", "big"]],
        content: filler,
        sig: "ab".repeat(64),
      })),
    );
  await store.close();
  log(`store: ${N} events tagged nostr + ${BIG} x 60 KB in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

// The default configuration, as an operator runs it, no limits turned off; but every client here
// comes from 127.0.0.0/8, which the per-IP rate limits exempt by default (a proxy on the same host
// speaks for everyone): with the exemption off, each 127.x.y.z address is limited as an internet
// client is.
const configFile = join(dir, "bunstr.toml");
writeFileSync(configFile, "[rate_limits]\nexempt_private_addresses = false\n");
const relay = await RelayProcess.spawn({ verify: true, dataDir: dir, args: ["--config", configFile], startTimeoutMs: 60_000 });
const port = Number(new URL(relay.url).port);
log(`relay ${relay.url} pid ${relay.pid}`);

// --- the well-behaved client ----------------------------------------------------------------------
const sk = generateSecretKey();
const good = await RawWs.connect(port, "127.0.0.10");
let goodTimes: number[] = [];
let goodFailures: string[] = [];
let goodRunning = true;
const goodLoop = (async () => {
  // Within the default rate limits: a REQ every ~100 ms, an EVENT with every fifth.
  let last = "";
  for (let i = 0; goodRunning; i++) {
    const t0 = performance.now();
    try {
      if (i % 5 === 0) {
        const e = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [["t", "good"]], content: `good ${i}` }, sk);
        const from = good.frames.length;
        good.send(["EVENT", e]);
        const ok = await good.next((f) => f[0] === "OK" && f[1] === e.id, 10_000, from);
        if (ok[2] !== true) goodFailures.push(`OK ${ok[3]}`);
        last = e.id;
      }
      const r = await good.req(`g${i}`, [{ ids: [last] }, { "#t": ["good"], limit: 5 }]);
      if (r.end[0] !== "EOSE" || r.events < 1) goodFailures.push(`REQ ${JSON.stringify(r.end)}`);
      goodTimes.push(performance.now() - t0);
    } catch (err) {
      goodFailures.push(String(err));
    }
    await Bun.sleep(100);
  }
})();

// --- phases ---------------------------------------------------------------------------------------
interface PhaseResult {
  name: string;
  n: number;
  p50: number;
  p99: number;
  rssStart: number;
  rssPeak: number;
  /** Anonymous memory (heaps, buffers), without the database pages the relay maps (file-backed). */
  anonStart: number;
  anonPeak: number;
  cpuCores: number;
  alive: boolean;
  failures: string[];
  note: string;
}
const anonMiB = (pid: number): number => memoryMiB(pid).anon;
const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]! : NaN;

async function phase(name: string, attack: (until: number) => Promise<string>): Promise<PhaseResult> {
  goodTimes = [];
  goodFailures = [];
  const rssStart = memoryMiB(relay.pid).rss;
  const anonStart = anonMiB(relay.pid);
  let rssPeak = rssStart;
  let anonPeak = anonStart;
  const sampler = setInterval(() => {
    if (!relay.running) return;
    rssPeak = Math.max(rssPeak, memoryMiB(relay.pid).rss);
    anonPeak = Math.max(anonPeak, anonMiB(relay.pid));
  }, 100);
  const cpu0 = cpuSeconds(relay.pid);
  const t0 = performance.now();
  const note = await attack(t0 + SECONDS * 1000);
  const cores = (cpuSeconds(relay.pid) - cpu0) / ((performance.now() - t0) / 1000);
  clearInterval(sampler);
  const r = {
    name,
    n: goodTimes.length,
    p50: pct(goodTimes, 50),
    p99: pct(goodTimes, 99),
    rssStart,
    rssPeak,
    anonStart,
    anonPeak,
    cpuCores: cores,
    alive: relay.running,
    failures: goodFailures.slice(0, 3),
    note,
  };
  log(
    `${name}: good client n ${r.n} p50 ${r.p50.toFixed(1)} p99 ${r.p99.toFixed(1)} ms; RSS ${rssStart.toFixed(0)} -> peak ${rssPeak.toFixed(0)} MiB (anonymous ${anonStart.toFixed(0)} -> ${anonPeak.toFixed(0)}); ${cores.toFixed(2)} cores; ${note}`,
  );
  return r;
}

const results: PhaseResult[] = [];
results.push(await phase("baseline", async (until) => (await Bun.sleep(until - performance.now()), "no attack")));

results.push(
  await phase("starve", async (until) => {
    const filters = Array.from({ length: 20 }, (_, i) => ({
      "#t": ["nostr"],
      "#x": Array.from({ length: 9 }, (_, j) => `n${i}-${j}`),
      limit: 10,
    }));
    const answers = new Map<string, number>();
    const attackers = await Promise.all([RawWs.connect(port, "127.0.0.2"), RawWs.connect(port, "127.0.0.3")]);
    await Promise.all(
      attackers.map(async (a, k) => {
        for (let i = 0; performance.now() < until && !a.closed; i++) {
          const verb = i % 3 === 2 ? "COUNT" : "REQ";
          const from = a.frames.length;
          a.send([verb, `s${i}`, ...filters]);
          const end = await a
            .next(
              (f) => (f[0] === "CLOSED" || f[0] === "EOSE" || f[0] === "COUNT") && f[1] === `s${i}`,
              until - performance.now() + 10_000,
              from,
            )
            .catch(() => ["timeout"]);
          const key = end[0] === "CLOSED" ? String(end[2]).split(":")[0]! : String(end[0]);
          answers.set(key, (answers.get(key) ?? 0) + 1);
          if (end[0] === "CLOSED" && String(end[2]).startsWith("rate-limited")) await Bun.sleep(200);
        }
        void k;
      }),
    );
    for (const a of attackers) a.close();
    return `attackers' answers ${JSON.stringify(Object.fromEntries(answers))}`;
  }),
);

results.push(
  await phase("filters", async (until) => {
    const socks: RawWs[] = [];
    const answers = new Map<string, number>();
    const count = (f: { 0: string; 2?: unknown }) => {
      const key = f[0] === "CLOSED" ? String(f[2]).split(":")[0]! : f[0];
      answers.set(key, (answers.get(key) ?? 0) + 1);
    };
    for (let ip = 1; ip <= 10 && performance.now() < until; ip++)
      for (let c = 0; c < 20; c++) {
        const ws = await RawWs.connect(port, `127.0.1.${ip}`).catch(() => undefined);
        if (!ws) continue;
        ws.keep = true;
        socks.push(ws);
        for (let s = 0; s < 50; s++) ws.send(["REQ", `h${s}`, { "#t": [`${s}`.padEnd(120_000, "v")], limit: 0 }]);
        for (let s = 0; s < 50; s++)
          ws.send(["REQ", `m${s}`, { "#t": Array.from({ length: 20 }, (_, v) => `${s}-${v}`.padEnd(1000, "w")), limit: 0 }]);
      }
    await Bun.sleep(Math.max(0, until - performance.now()));
    for (const ws of socks) for (const f of ws.frames) if (f[0] === "EOSE" || f[0] === "CLOSED") count(f);
    for (const ws of socks) ws.close();
    return `${socks.length} connections; subscriptions answered ${JSON.stringify(Object.fromEntries(answers))}`;
  }),
);

results.push(
  await phase("results", async (until) => {
    const stuck: StuckReader[] = [];
    for (let i = 0; i < 6; i++) stuck.push(await stuckReader(port, [["REQ", "big", { "#t": ["big"], limit: 5000 }]]));
    await Bun.sleep(Math.max(0, until - performance.now()));
    for (const s of stuck) s.sock.destroy();
    return `6 never-reading clients each asked for ${BIG} x 60 KB`;
  }),
);

results.push(
  await phase("negflood", async (until) => {
    const ids = Array.from({ length: 1700 }, (_, i) => hex64(`neg ${i}`)).join("");
    const heavy = `61000002${"8d24"}${ids}`;
    // An initial message over an empty set: one range, fingerprint of nothing.
    const initial = "6100000200";
    const answers = new Map<string, number>();
    const attackers = await Promise.all([RawWs.connect(port, "127.0.3.1"), RawWs.connect(port, "127.0.3.2")]);
    await Promise.all(
      attackers.map(async (a) => {
        for (let round = 0; performance.now() < until && !a.closed; round++) {
          const id = `n${round}`;
          const from = a.frames.length;
          // The newest 50,000 (within max_negentropy_items).
          a.send(["NEG-OPEN", id, { "#t": ["nostr"], since: base + N - 50_000 }, initial]);
          const open = await a
            .next((f) => (f[0] === "NEG-MSG" || f[0] === "NEG-ERR") && f[1] === id, 15_000, from)
            .catch(() => ["timeout"] as [string]);
          const what = open[0] === "NEG-ERR" ? `open NEG-ERR ${String(open[2]).slice(0, 60)}` : `open ${open[0]}`;
          answers.set(what, (answers.get(what) ?? 0) + 1);
          if (open[0] !== "NEG-MSG") {
            await Bun.sleep(200);
            continue;
          }
          while (performance.now() < until && !a.closed) {
            const mark = a.frames.length;
            for (let i = 0; i < 20; i++) a.send(["NEG-MSG", id, heavy]);
            const r = await a
              .next((f) => f[1] === id && (f[0] === "NEG-ERR" || f[0] === "NEG-MSG"), 15_000, mark)
              .catch(() => ["timeout"] as [string]);
            const what = r[0] === "NEG-ERR" ? `msg NEG-ERR ${String(r[2]).slice(0, 40)}` : `msg ${r[0]}`;
            answers.set(what, (answers.get(what) ?? 0) + 1);
            if (r[0] !== "NEG-MSG") break;
            await Bun.sleep(5);
          }
        }
      }),
    );
    for (const a of attackers) a.close();
    return `attackers' answers ${JSON.stringify(Object.fromEntries(answers))}`;
  }),
);

goodRunning = false;
await goodLoop;
good.close();
const exit = await relay.stop();

// --- verdict ----------------------------------------------------------------------------------------
const baseP99 = results[0]!.p99;
// The query-time attacks (starve, negflood) must leave a well-behaved client under 100 ms p99
// (the baseline's p99 + 100 ms on a loaded box); the memory attacks must stay within their bytes
// and keep serving (p99 under 500 ms while 200 connections push 120 KB frames).
const latencyBound: Record<string, number> = {
  baseline: Infinity,
  starve: Math.max(100, baseP99 + 100),
  negflood: Math.max(100, baseP99 + 100),
  filters: 500,
  results: 500,
};
const anonBound: Record<string, number> = { filters: 200, results: 150, starve: 100, negflood: 150 };
const fails: string[] = [];
for (const r of results) {
  if (!r.alive) fails.push(`${r.name}: the relay died`);
  if (r.n < 5) fails.push(`${r.name}: the good client completed only ${r.n} round trips`);
  if (r.p99 > latencyBound[r.name]!)
    fails.push(`${r.name}: good client's p99 ${r.p99.toFixed(0)} ms > ${latencyBound[r.name]!.toFixed(0)} ms`);
  if (r.failures.length) fails.push(`${r.name}: good client failures ${JSON.stringify(r.failures)}`);
  const bound = anonBound[r.name];
  if (bound !== undefined && r.anonPeak - r.anonStart > bound)
    fails.push(`${r.name}: anonymous memory grew ${(r.anonPeak - r.anonStart).toFixed(0)} MiB > ${bound}`);
}
if (exit !== 0) fails.push(`relay exit code ${exit} after SIGTERM`);
console.log(
  `\nhostile readers: ${N} stored events, ${SECONDS} s per phase, load average ${(await import("node:os")).loadavg()[0]!.toFixed(2)}`,
);
console.log("phase      good p50 / p99 ms   relay RSS start -> peak MiB (anonymous)   relay cores   note");
for (const r of results)
  console.log(
    `${r.name.padEnd(10)} ${r.p50.toFixed(1).padStart(7)} / ${r.p99.toFixed(1).padEnd(8)}  ${r.rssStart.toFixed(0).padStart(6)} -> ${r.rssPeak.toFixed(0).padEnd(5)} (${r.anonStart.toFixed(0)} -> ${r.anonPeak.toFixed(0)})`.padEnd(
      72,
    ) + `${r.cpuCores.toFixed(2).padStart(6)}        ${r.note}`,
  );
console.log(fails.length ? `FAIL\n${fails.join("\n")}` : "PASS");
process.exit(fails.length ? 1 : 0);
