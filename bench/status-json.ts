// The cost of one /status.json body (observe/history.ts) with a day of samples in its rings: what
// an anonymous client's GET costs the main thread. Checks the body's shape (a point per sample
// plus the one for now, in every column).
//
//   npx bun bench/status-json.ts [--bodies 300]
import { parseArgs } from "node:util";
import { FINE_MS, History } from "../src/observe/history.ts";
import { type MetricsSource, RelayMetrics } from "../src/observe/metrics.ts";
import type { Store } from "../src/store/types.ts";
import { intOption } from "./lib/args.ts";

const { values } = parseArgs({ options: { bodies: { type: "string", default: "300" } } });
const bodies = intOption("bodies", values.bodies);
const metrics = new RelayMetrics();
const t0 = Date.now() - 86_400_000;
const src = {
  metrics,
  store: { lastSeq: () => 0, count: async () => ({ count: 5 }), sizeBytes: () => 4096 } as unknown as Store,
  fanout: { deliveries: 0, groupCount: 0 },
  writer: { depth: 0 },
  verifier: { depth: 0 },
  inflight: 0,
  startedAt: t0,
  connections: () => 3,
} as unknown as MetricsSource;
const history = new History(src);
let samples = 0;
for (let t = t0 + FINE_MS; t < Date.now(); t += FINE_MS, samples++) {
  metrics.countEventResult(samples % 5, samples % 9 !== 0, samples % 9 === 0 ? "rate-limited: slow down" : "");
  await history.sample(t);
}
const c0 = process.cpuUsage();
let body = "";
for (let i = 0; i < bodies; i++) body = history.text();
const c = process.cpuUsage(c0);
const j = JSON.parse(body);
const ok = (["10s", "1m"] as const).every((k) => {
  const s = j.series[k];
  return Object.values(s.values as Record<string, unknown[]>).every((v) => v.length === s.t.length);
});
console.log(
  `${samples} samples; /status.json ${body.length} B: ${((c.user + c.system) / 1000 / bodies).toFixed(3)} CPU-ms per body (${bodies} bodies); ` +
    `points: 10s ${j.series["10s"].t.length}, 1m ${j.series["1m"].t.length}; shape ${ok ? "ok" : "WRONG"}`,
);
process.exit(ok ? 0 : 1);
