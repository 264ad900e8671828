// How many REQs of issue 15's mix the fanout's catch-up ring could answer by itself, on the main
// thread, without a reader: a lever sized, not built. The ring holds the last R accepted events
// (relay/fanout/fanout.ts, 8,192 by default). A filter's answer comes from the ring alone when at least
// `limit` of the ring's events match it and the limit-th is newer than every stored event outside
// the ring (the watermark): nothing the ring lacks can then come before it. Events replaced since
// (replaceable kinds) count as gone, as deletions would. Every ring answer is compared with the
// oracle's (bench/lib/oracle.ts), so the completeness rule is checked, not assumed.
//
//   npx bun bench/ring-answer-sim.ts [--events 100000] [--ring 8192] [--reqs 20000]
//
// Prints, per shape of the mix, the share of REQs the ring answers, and the differing answers (0).
import { parseArgs } from "node:util";
import type { NostrEvent } from "../src/protocol/event.ts";
import { loadCorpus } from "./corpus.ts";
import { engineReqs } from "./lib/engine-reqs.ts";
import { naiveMatch, naiveOf, nip01Order } from "./lib/match.ts";
import { Oracle } from "./lib/oracle.ts";

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    events: { type: "string", default: "100000" },
    ring: { type: "string", default: "8192" },
    reqs: { type: "string", default: "20000" },
  },
});
const corpus = loadCorpus(Number(values.events));
const oracle = new Oracle();
/** Accepted events in arrival order (what the ring and the store saw). */
const accepted: NostrEvent[] = [];
for (const line of corpus.lines) {
  const e = JSON.parse(line) as NostrEvent;
  const outcome = oracle.add(e);
  if (outcome === "stored" || outcome === "replaced") accepted.push(e);
}
const ringSize = Number(values.ring);
const ring = accepted.slice(-ringSize).filter((e) => !oracle.isGone(e.id));
let watermark = -Infinity;
for (const e of accepted.slice(0, -ringSize)) if (!oracle.isGone(e.id)) watermark = Math.max(watermark, e.created_at);

const reqs = engineReqs(corpus.path, Number(values.reqs));
const byShape = new Map<string, { n: number; ring: number }>();
let differ = 0;
for (const r of reqs) {
  const s = byShape.get(r.shape) ?? { n: 0, ring: 0 };
  byShape.set(r.shape, s);
  s.n++;
  if (r.filters.length !== 1) continue;
  const f = r.filters[0]!;
  const limit = r.limits[0]!;
  const naive = naiveOf(f as Record<string, unknown>);
  const hits = ring.filter((e) => naiveMatch(naive, e)).sort(nip01Order);
  if (hits.length < limit || hits[limit - 1]!.created_at <= watermark) continue;
  s.ring++;
  const got = hits.slice(0, limit).map((e) => e.id);
  const want = oracle.answerFilter(f as Record<string, unknown>, limit).map((e) => e.id);
  if (got.join() !== want.join()) differ++;
}
console.log(`${accepted.length} accepted, ring of the last ${ringSize} (${ring.length} still stored), watermark ${watermark}`);
for (const [shape, s] of byShape) console.log(`${shape.padEnd(8)} ${s.n} REQs, the ring answers ${((100 * s.ring) / s.n).toFixed(1)}%`);
const total = [...byShape.values()].reduce((a, s) => a + s.ring, 0);
console.log(
  `all      ${reqs.length} REQs, the ring answers ${((100 * total) / reqs.length).toFixed(1)}%; answers differing from the oracle's: ${differ}`,
);
if (differ > 0) process.exitCode = 1;
