// bunstr slow-reader check, the long version of test/slow-reader.test.ts: 1,000 subscribers on a
// tick stream, a bulk stream beside it, and raw-TCP subscribers that never read joining in
// alternate windows. Prints baseline vs slow-reader latency (p50/p99), the cut-off time and what
// was pending when it happened, and the relay's RSS. See bench/scenarios/slow-reader.ts.
//
//   npx bun bench/slow-reader.ts [--subscribers 1000] [--rounds 3] [--tick-rate 50] [--bulk-rate 300]
//                                [--bulk-bytes 8192] [--baseline-ms 3000] [--max-pending-bytes N] [--stored-ticks]
//
// Exit 0 when every check passes (cut off every time, everyone got every tick, p99 within
// 2x baseline + 20 ms, RSS with slow readers < baseline windows' + 100 MiB), 1 otherwise.
import { parseArgs } from "node:util";
import { runSlowReader, slowReaderReport } from "./scenarios/slow-reader.ts";
import { intOption } from "./lib/args.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    subscribers: { type: "string", default: "1000" },
    rounds: { type: "string", default: "3" },
    "tick-rate": { type: "string", default: "50" },
    "bulk-rate": { type: "string", default: "300" },
    "bulk-bytes": { type: "string", default: "8192" },
    "baseline-ms": { type: "string", default: "3000" },
    "max-pending-bytes": { type: "string" },
    "stored-ticks": { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(
    "usage: npx bun bench/slow-reader.ts [--subscribers 1000] [--rounds 3] [--tick-rate 50] [--bulk-rate 300] [--bulk-bytes 8192] [--baseline-ms 3000] [--max-pending-bytes N] [--stored-ticks]",
  );
  process.exit(0);
}
const num = (name: string, v: string | undefined): number => intOption(name, v);

const t0 = performance.now();
const r = await runSlowReader({
  subscribers: num("subscribers", values.subscribers),
  rounds: num("rounds", values.rounds),
  tickRate: num("tick-rate", values["tick-rate"]),
  bulkRate: num("bulk-rate", values["bulk-rate"]),
  bulkBytes: num("bulk-bytes", values["bulk-bytes"]),
  baselineMs: num("baseline-ms", values["baseline-ms"]),
  maxSlowMs: 30_000,
  maxPendingBytes: values["max-pending-bytes"] === undefined ? undefined : num("max-pending-bytes", values["max-pending-bytes"]),
  storedTicks: values["stored-ticks"],
  log: (m) => console.error(`[slow-reader] ${((performance.now() - t0) / 1000).toFixed(1)} s: ${m}`),
});
console.log(slowReaderReport(r));
const failures: string[] = [];
if (r.cutOffs.some((c) => c.ms === null)) failures.push("a slow reader was never cut off");
if (r.incomplete.length)
  failures.push(`${r.incomplete.length} subscribers missed or doubled ticks: ${r.incomplete.slice(0, 3).join(", ")}`);
if (r.witnessMissing) failures.push(`the witness missed ${r.witnessMissing} bulk events`);
if (r.refused.length) failures.push(`${r.refused.length} events refused: ${r.refused.slice(0, 3).join(", ")}`);
const limit = 2 * r.baseline.latencyMs.p99 + 20;
if (r.slow.latencyMs.p99 > limit)
  failures.push(`p99 with slow readers ${r.slow.latencyMs.p99.toFixed(1)} ms > 2 x baseline + 20 = ${limit.toFixed(1)} ms`);
if (r.rss.slowMax - Math.max(r.rss.start, r.rss.baselineMax) >= 100)
  failures.push(
    `relay RSS with slow readers ${r.rss.slowMax.toFixed(1)} MiB, 100+ MiB above the baseline windows' ${Math.max(r.rss.start, r.rss.baselineMax).toFixed(1)}`,
  );
if (!r.relayServes) failures.push("relay did not answer a REQ afterwards");
if (r.relayExitCode !== 0) failures.push(`relay exit code ${r.relayExitCode}`);
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${failures.length ? "FAILED" : "ok"} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failures.length ? 1 : 0);
