// Issue 36: pipelined COUNTs of several filters over a large store. Each kept a Set of every
// matching row (a reader runs up to 1,000 jobs per owner, their state interleaved), and each
// passed the query budget on the small estimate of an average read: 200 pipelined
// `COUNT [{}, {"kinds":[1]}]` took the relay from 70 MB to over 1 GB. Attackers here come from
// addresses of their own (127.0.0.x) with the default rate limits, loopback not exempt, while an
// honest client on another address keeps counting.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RawWs, type Frame } from "../bench/lib/rawws.ts";
import { clientTextFrame } from "../bench/lib/tcp.ts";
import { defaults } from "../src/config/schema.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { now, startTestRelay, storeEvents, type TestRelay } from "./helpers.ts";

const N = 60_000;
const KIND7 = 6_000;
const dir = mkdtempSync(join(tmpdir(), "bunstr-count-flood-"));
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const pubkeys = Array.from({ length: 200 }, (_, i) => hex64(`pk ${i}`));
let relay: TestRelay | undefined;
const sockets: RawWs[] = [];

beforeAll(async () => {
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  store.db.exec("PRAGMA synchronous = OFF");
  const base = now() - 30 * 86400;
  const sig = "ab".repeat(64);
  for (let i = 0; i < N; i += 5000) {
    const batch: NostrEvent[] = [];
    for (let k = i; k < i + 5000; k++)
      batch.push({
        id: hex64(`ev ${k}`),
        pubkey: pubkeys[k % pubkeys.length]!,
        // Ten events a second: ties of created_at for the walks to settle.
        created_at: base + Math.floor(k / 10),
        kind: k < KIND7 ? 7 : 1,
        tags: [["t", k % 2 === 0 ? "even" : "odd"]],
        content: `note ${k}`,
        sig,
      });
    storeEvents(store, batch);
  }
  await store.close();
  const limits = defaults();
  relay = await startTestRelay(
    {
      database: { reader_workers: 2 },
      limits: { max_connections_per_ip: limits.limits.max_connections_per_ip, max_counts_per_ip: limits.limits.max_counts_per_ip },
      rate_limits: { ...limits.rate_limits, exempt_private_addresses: false },
    },
    { dir },
  );
}, 120_000);

afterAll(async () => {
  for (const s of sockets) s.close();
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function connect(address: string): Promise<RawWs> {
  const ws = await RawWs.connect(Number(new URL(relay!.url).port), address);
  sockets.push(ws);
  return ws;
}

const answersTo = (ws: RawWs, prefix: string) =>
  ws.frames.filter((f) => (f[0] === "COUNT" || f[0] === "CLOSED") && String(f[1]).startsWith(prefix));

async function until(cond: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; !cond(); await Bun.sleep(20)) if (Date.now() > deadline) return false;
  return true;
}

/** A COUNT and its answer (COUNT or CLOSED). */
function ask(ws: RawWs, subId: string, filters: object[]): Promise<Frame> {
  const from = ws.frames.length;
  ws.send(["COUNT", subId, ...filters]);
  return ws.next((f) => (f[0] === "COUNT" || f[0] === "CLOSED") && f[1] === subId, 15_000, from);
}

const rssMiB = () => process.memoryUsage().rss / 1024 / 1024;

describe("a flood of pipelined COUNTs", () => {
  test("the relay's memory stays bounded, the honest client keeps its answers, and counts stay exact", async () => {
    const honest = await connect("127.0.0.4");
    // The exact answers first (and the relay warm): several filters overlapping, and one of them.
    const all = await ask(honest, "all", [{}, { kinds: [1] }]);
    expect(all).toEqual(["COUNT", "all", { count: N }]);
    Bun.gc(true);
    const rss0 = rssMiB();
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB())), 25);

    const CONNECTIONS = 4;
    // 160 from each address (40 from the one alone): within its COUNT rate limit (bursts of 200), so only the bounds below refuse.
    const PIPELINED = 40;
    const attackers: RawWs[] = [];
    for (const address of ["127.0.0.2", "127.0.0.3"]) for (let c = 0; c < CONNECTIONS; c++) attackers.push(await connect(address));
    // One more attacker alone on its address: its 40 (under the address's 48) can only be refused
    // by the bound per connection. On the addresses above, whether a connection's or the address's
    // bound trips first depends on how the relay's turns interleave their connections (beside a
    // CPU hog only the address's did, 224 of 224 refusals).
    const alone = await connect("127.0.0.5");
    attackers.push(alone);
    for (const a of attackers) {
      const frames = Array.from({ length: PIPELINED }, (_, i) => JSON.stringify(["COUNT", `flood${i}`, {}, { kinds: [1] }]));
      a.sock.write(Buffer.concat(frames.map((f) => clientTextFrame(f))));
    }
    // The honest client counts every 100 ms meanwhile, on its own address.
    const honestTimes: number[] = [];
    const honestAnswers: Frame[] = [];
    const attackOver = () => attackers.every((a) => answersTo(a, "flood").length >= PIPELINED);
    // 25 s was enough on a busy box; beside a CPU hog at load 10, 293 of the 320 COUNTs were
    // answered by then. The old code answered none within 25 s and grew by 1.8 GiB (`grown`).
    const deadline = Date.now() + 60_000;
    for (let i = 0; (i < 10 || !attackOver()) && Date.now() < deadline; i++) {
      const t = performance.now();
      const r = await ask(honest, `h${i}`, [{ kinds: [7], "#t": ["even"] }]);
      honestTimes.push(performance.now() - t);
      honestAnswers.push(r);
      await Bun.sleep(100);
    }
    const over = await until(attackOver, 1000);
    clearInterval(sampler);
    const grown = peak - rss0;
    const answers = attackers.flatMap((a) => answersTo(a, "flood"));
    const counted = answers.filter((f) => f[0] === "COUNT");
    const refused = answers.filter((f) => f[0] === "CLOSED");
    const sorted = [...honestTimes].sort((a, b) => a - b);
    console.log(
      `COUNT flood (${attackers.length} x ${PIPELINED} over ${N} events): relay RSS +${grown.toFixed(0)} MiB at the peak; ` +
        `${counted.length} counted, ${refused.length} refused (${[...new Set(refused.map((f) => String(f[2]).slice(0, 60)))].join(" | ")}); ` +
        `honest COUNTs: n ${sorted.length}, p50 ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms`,
    );
    // fc9185b: +1,837 MiB here, none answered within 25 s. A count's state is a cursor now, and
    // the COUNTs running per connection and per address are bounded: +5 to +12 MiB.
    expect(grown).toBeLessThan(150);
    expect(over).toBe(true);
    // Every COUNT got an answer: its count, or CLOSED rate-limited:.
    expect(answers.length).toBe(attackers.length * PIPELINED);
    for (const f of refused) expect(f[2]).toStartWith("rate-limited:");
    // Refused for running too many at once, per connection and per address.
    const refusedAlone = answersTo(alone, "flood").filter((f) => f[0] === "CLOSED");
    expect(refusedAlone.length).toBeGreaterThan(0);
    for (const f of refusedAlone) expect(String(f[2])).toInclude("running on this connection");
    expect(refused.some((f) => String(f[2]).includes("running from this address"))).toBe(true);
    // What was counted is exact: every event once, though both filters match most.
    for (const f of counted) expect(f[2]).toEqual({ count: N });
    // The honest client was answered every time, exactly.
    for (const r of honestAnswers) expect(r[2].count).toBe(KIND7 / 2);
  }, 120_000);
});
