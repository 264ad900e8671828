// bunstr durability check, the long version of test/durability.test.ts: N kill cycles on ONE data
// directory. Each cycle starts the relay on it, publishes over C pipelined connections as fast as
// OKs come back, SIGKILLs the relay at a seeded random point (every third cycle: the moment the
// -wal file grows, i.e. mid-commit), restarts it, fetches EVERY event acknowledged so far (all
// cycles), stops it with SIGTERM and runs PRAGMA integrity_check. A last cycle ends with SIGTERM
// instead and checks the clean path (exit 0, WAL checkpointed).
//
//   npx bun bench/durability.ts [--cycles 10] [--conns 8] [--window 200] [--verify] [--seed 1]
//
// Progress on stderr; stdout: one line per cycle and the summary
// "acknowledged X, lost 0 over N kills". Exit 0 = nothing lost, 1 = a check failed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { NostrEvent } from "../src/protocol/event.ts";
import { fakePubkey, newSecretKey, signedEvent, unsignedEvent } from "./lib/events.ts";
import { prng } from "./lib/stats.ts";
import { describe, killCycle, restartAndCheck, type KillTrigger } from "./scenarios/durability.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    cycles: { type: "string", default: "10" },
    conns: { type: "string", default: "8" },
    window: { type: "string", default: "200" },
    verify: { type: "boolean", default: false },
    seed: { type: "string", default: "1" },
    "max-kill-at": { type: "string", default: "5000" },
    timeout: { type: "string", default: "900" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(`usage: npx bun bench/durability.ts [--cycles 10] [--conns 8] [--window 200] [--verify] [--seed 1] [--max-kill-at 5000] [--timeout 900]
  --verify        keep signature checks on (events are signed on the fly: ~1 ms each, slower)
  --max-kill-at   kill points are drawn from [100, this] acknowledged events per cycle`);
  process.exit(0);
}
const int = (name: string, v: string) => {
  if (!/^\d+$/.test(v) || Number(v) < 1) {
    console.error(`--${name} must be a positive integer`);
    process.exit(2);
  }
  return Number(v);
};
const cycles = int("cycles", values.cycles);
const conns = int("conns", values.conns);
const window = int("window", values.window);
const maxKillAt = Math.max(100, int("max-kill-at", values["max-kill-at"]));
const verify = values.verify;
const rand = prng(int("seed", values.seed));
const log = (m: string) => console.error(`[durability] ${m}`);

const dataDir = mkdtempSync(join(tmpdir(), "bunstr-durability-bench-"));
const hardStop = setTimeout(() => {
  console.log(`FAIL: timeout after ${values.timeout} s`);
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(1);
}, int("timeout", values.timeout) * 1000);

// One author per connection. With --verify, real keys and signatures; otherwise a correct id and a
// dummy signature for a relay started with --no-verify.
const keys = Array.from({ length: conns }, newSecretKey);
const fakeAuthors = Array.from({ length: conns }, fakePubkey);
function maker(cycle: number, heavy: boolean): (k: number, i: number) => NostrEvent {
  const pad = heavy ? ` ${"x".repeat(1000)}` : "";
  return (k, i) => {
    const tags = heavy
      ? Array.from({ length: 24 }, (_, t) => [String.fromCharCode(97 + (t % 26)), `${cycle}-${k}-${i}-${t}`])
      : [
          ["t", "durability"],
          ["n", `${i}`],
        ];
    const t = { content: `durability cycle ${cycle} ${k}:${i}${pad}`, tags };
    return verify ? signedEvent(keys[k]!, t) : unsignedEvent(fakeAuthors[k]!, t);
  };
}

const expected = new Map<string, NostrEvent>();
const failures: string[] = [];
let kills = 0;
let midCommit = 0;
let maybeStored = 0;
let unanswered = 0;
const t0 = performance.now();
try {
  log(
    `data dir ${dataDir}; ${cycles} kill cycles + 1 SIGTERM cycle; ${conns} connections x window ${window}; signatures ${verify ? "verified" : "off (--no-verify)"}`,
  );
  for (let cycle = 1; cycle <= cycles + 1; cycle++) {
    const last = cycle === cycles + 1;
    const walKill = !last && cycle % 3 === 0;
    const at = 100 + Math.floor(rand() * (maxKillAt - 100));
    const trigger: KillTrigger = walKill ? { walGrowthAfterAcked: Math.min(at, 2000) } : { afterAcked: at };
    const kill = await killCycle({
      dataDir,
      verify,
      conns,
      window,
      make: maker(cycle, walKill),
      trigger,
      signal: last ? "SIGTERM" : "SIGKILL",
      timeoutMs: 120_000,
    });
    for (const id of kill.acked) expected.set(id, kill.sent.get(id)!);
    const check = await restartAndCheck({ dataDir, verify, expected, maybe: kill.unanswered });
    const landed = kill.wal.uncommittedFrames > 0 || kill.wal.trailingBytes > 0;
    if (!last) kills++;
    if (landed) midCommit++;
    maybeStored += check.maybeFound;
    unanswered += kill.unanswered.length;
    const what = last
      ? `SIGTERM`
      : walKill
        ? `SIGKILL on WAL growth${landed ? " (landed mid-commit)" : " (between commits)"}`
        : `SIGKILL at ${at}`;
    console.log(`cycle ${cycle}: ${what}: ${describe(kill, check)}; total acknowledged ${expected.size}`);
    const fail = (m: string) => (failures.push(`cycle ${cycle}: ${m}`), console.log(`FAIL cycle ${cycle}: ${m}`));
    if (check.missing.length) fail(`${check.missing.length} acknowledged events missing, e.g. ${check.missing.slice(0, 3).join(", ")}`);
    if (check.altered.length) fail(`${check.altered.length} events altered, e.g. ${check.altered.slice(0, 3).join(", ")}`);
    if (check.closed.length) fail(`REQ closed: ${check.closed.slice(0, 3).join(" | ")}`);
    if (check.integrity.join() !== "ok") fail(`integrity_check: ${check.integrity.slice(0, 5).join("; ")}`);
    if (check.orphanTags) fail(`${check.orphanTags} orphan tag rows`);
    if (check.storedEvents !== expected.size + maybeStored)
      fail(`${check.storedEvents} events stored, expected ${expected.size} acknowledged + ${maybeStored} committed without an OK`);
    if (check.exitCode !== 0) fail(`restarted relay exited ${check.exitCode} after SIGTERM`);
    if (kill.anomalies.length) fail(`protocol anomalies: ${kill.anomalies.slice(0, 3).join(" | ")}`);
    if (!last && kill.refused.size) fail(`${kill.refused.size} OK false before the kill, e.g. ${[...kill.refused.values()][0]}`);
    if (last) {
      if (kill.exitCode !== 0) fail(`exit code ${kill.exitCode} after SIGTERM`);
      if (kill.exitMs > 10_000) fail(`took ${kill.exitMs.toFixed(0)} ms to exit after SIGTERM`);
      if (kill.wal.bytes > 0) fail(`WAL of ${kill.wal.bytes} bytes left after a clean exit`);
    }
  }
} catch (err) {
  failures.push(String(err instanceof Error ? err.stack : err));
  console.log(`FAIL ${err instanceof Error ? err.message : String(err)}`);
} finally {
  clearTimeout(hardStop);
  rmSync(dataDir, { recursive: true, force: true });
}
const lost = failures.length ? "?" : "0";
console.log(
  `\nacknowledged ${expected.size}, lost ${lost} over ${kills} kills (${midCommit} landed mid-commit; ${unanswered} events unanswered at kills, ` +
    `${maybeStored} of them stored anyway) + 1 SIGTERM; ${((performance.now() - t0) / 1000).toFixed(1)} s` +
    (failures.length ? `\nFAILED: ${failures.length} failure(s)` : ""),
);
process.exit(failures.length ? 1 : 0);
