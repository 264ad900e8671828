// Two relay builds side by side under issue 15's query mix, interleaved: CPU per REQ of each.
//
// On a shared box a run's CPU per REQ moves by ±20% with the load (bench/RESULTS.md), more than
// most changes it is meant to measure. Here both relays run at once, each on its own copy of one
// data directory, and the mix is sent to them in short segments taken in turn (ABBA...), so both
// see the same load; the figures are each relay's CPU seconds per 1k REQs, per thread, from /proc.
// Every answer is checked exactly against the oracle, as in load.ts.
//
//   npx bun src/main.ts import bench/out/corpus-v2-100000.jsonl --no-verify --data-dir /tmp/q100k
//   npx bun bench/query-ab.ts --a /tmp/old/src/main.ts --b src/main.ts --data /tmp/q100k
//
// --data-b gives side B its own data directory: the same corpus imported by B's build, for a
// change of the storage format (a copy of A's would be B's migration of it, not B's own layout).
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadCorpus } from "./corpus.ts";
import { Oracle } from "./lib/oracle.ts";
import { RATE_LIMITS_OFF, RELAY_BUN_FLAGS, RelayProcess } from "./lib/relay.ts";
import { type Buckets, quantileMs, scrapeReqSeconds } from "./lib/req-seconds.ts";
import { summarize } from "./lib/stats.ts";
import { QueryRun } from "./scenarios/query.ts";

const { values: o } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    data: { type: "string" },
    "data-b": { type: "string" },
    events: { type: "string", default: "100000" },
    segment: { type: "string", default: "400" },
    rounds: { type: "string", default: "10" },
  },
});
if (!o.a || !o.b || !o.data) {
  console.error("usage: bench/query-ab.ts --a MAIN.ts --b MAIN.ts --data DIR [--data-b DIR] [--events N] [--segment REQS] [--rounds N]");
  process.exit(2);
}
const segment = Number(o.segment);
const rounds = Number(o.rounds);

/** CPU seconds of each thread of a process, summed by thread name ("main" for the main thread). */
function threadCpu(pid: number): Map<string, number> {
  const m = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    } catch {
      continue; // the thread ended
    }
    const name = tid === String(pid) ? "main" : stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    m.set(name, (m.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) / 100);
  }
  return m;
}

interface Side {
  name: string;
  relay: RelayProcess;
  dir: string;
  cpu: Map<string, number>;
  reqs: number;
  seconds: number;
  /** REQ -> EOSE ms of the counted rounds. */
  latencies: number[];
  /** The same by REQ type. */
  byType: Map<string, number[]>;
  /** The relay's own REQ -> EOSE histogram after the warm-up round (lib/req-seconds.ts). */
  warm?: Buckets;
  relaySide?: string;
  failures: string[];
}

async function start(name: string, main: string, data: string): Promise<Side> {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-query-ab-"));
  cpSync(data, dir, { recursive: true });
  const config = join(dir, "bench.toml");
  writeFileSync(config, `[limits]\nquery_ms_per_second = 1000000\n${RATE_LIMITS_OFF}`);
  const relay = await RelayProcess.spawn({
    verify: true,
    dataDir: dir,
    // --lenient: RATE_LIMITS_OFF lists this tree's rate-limit keys; an older build refuses the
    // ones it does not know (issue 36 added auths_per_minute), and lifts the rest all the same.
    args: ["--config", config, "--lenient"],
    // BUNSTR_RELAY_BUN_FLAGS (lib/relay.ts), e.g. "--cpu-prof --cpu-prof-dir=D": both relays profiled alike.
    command: [process.execPath, ...RELAY_BUN_FLAGS, resolve(main)],
  });
  return { name, relay, dir, cpu: new Map(), reqs: 0, seconds: 0, latencies: [], byType: new Map(), failures: [] };
}

const corpus = loadCorpus(Number(o.events), () => {});
const oracle = new Oracle({ keepEvents: true });
for (let i = 0; i < corpus.size; i++) oracle.add(corpus.event(i));
const sides = [await start("A", o.a, o.data), await start("B", o.b, o["data-b"] ?? o.data)];
const loads: number[] = [];
try {
  // Round -1 warms both up and is not counted.
  for (let r = -1; r < rounds; r++)
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const run = new QueryRun({
        ...{ url: side.relay.url, corpus, oracle, reqs: segment, perType: 0, conns: 8, inflight: 1 },
        ...{ exact: true, seed: 100 + r, mix: "issue15", timeoutMs: 30_000, log: () => {} },
        onLatency: (ms: number, type: string) => {
          if (r < 0) return;
          side.latencies.push(ms);
          const t = side.byType.get(type) ?? [];
          side.byType.set(type, t);
          t.push(ms);
        },
      });
      const before = threadCpu(side.relay.pid);
      const result = await run.run();
      const after = threadCpu(side.relay.pid);
      await run.close();
      side.failures.push(...run.failures.lines());
      if (r < 0) {
        side.warm = await scrapeReqSeconds(side.relay.url);
        continue;
      }
      loads.push(loadavg()[0]!);
      for (const [k, v] of after) side.cpu.set(k, (side.cpu.get(k) ?? 0) + v - (before.get(k) ?? 0));
      side.reqs += segment;
      side.seconds += result.mix.seconds;
    }
  for (const side of sides) {
    const end = await scrapeReqSeconds(side.relay.url);
    const q = (p: number) => quantileMs(side.warm ?? [], end, p).toFixed(2);
    const metrics = await (await fetch(`${side.relay.url.replace(/^ws/, "http")}/metrics`)).text();
    const counter = (name: string) => new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1];
    // REQs answered from memory (relay/answers/), no reader asked; messages the message turns
    // (relay/connection/fair.ts, issue 36; absent before it) held for a later event-loop turn.
    const memory = ["ring", "replaceable", "tag"].map((k) => `${k} ${counter(`bunstr_req_${k}_answers_total`)}`).join(", ");
    const deferred = counter("bunstr_deferred_messages_total");
    side.relaySide = `relay's own p50 ${q(0.5)} p99 ${q(0.99)} ms; from memory: ${memory}${deferred === undefined ? "" : `; ${deferred} messages deferred`}`;
  }
} finally {
  for (const side of sides) {
    await side.relay.stop();
    rmSync(side.dir, { recursive: true, force: true });
  }
}
let failed = false;
for (const side of sides) {
  const per1k = (s: number) => ((s / side.reqs) * 1000).toFixed(3);
  const total = [...side.cpu.values()].reduce((a, b) => a + b, 0);
  const threads = [...side.cpu].filter(([, v]) => v > 0.02).map(([k, v]) => `${k} ${per1k(v)}`);
  const l = summarize(side.latencies);
  console.log(
    `${side.name}: ${per1k(total)} CPU-s per 1k REQs (${threads.join(", ")}); ${(side.reqs / side.seconds).toFixed(0)} REQs/s; REQ -> EOSE p50 ${l.p50.toFixed(2)} p99 ${l.p99.toFixed(2)} max ${l.max.toFixed(1)} ms (${side.relaySide})`,
  );
  const types = [...side.byType].map(([t, ms]) => {
    const s = summarize(ms);
    return `${t} ${s.p50.toFixed(1)} / ${s.p99.toFixed(1)}`;
  });
  console.log(`${side.name}: p50 / p99 ms by type: ${types.join(", ")}`);
  for (const f of side.failures.slice(0, 5)) console.log(`FAIL ${side.name}: ${f}`);
  failed ||= side.failures.length > 0;
}
console.log(`load average ${Math.min(...loads).toFixed(2)}-${Math.max(...loads).toFixed(2)}`);
process.exit(failed ? 1 : 0);
