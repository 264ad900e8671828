// The functions a `bun --cpu-prof` profile spent its samples in, self and inclusive, optionally
// only the last N seconds of it (e.g. a load.ts query phase after its ingest):
//   BUNSTR_RELAY_BUN_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" npx bun bench/load.ts ...
//   npx bun bench/cpuprofile-top.ts /tmp/prof/CPU.*.cpuprofile [--last 17] [--top 30]
// Shares are of sample counts, not of the time between samples: the gap before a sample includes
// the time the thread slept in its event loop, which would charge idle time to whatever ran last
// (postMessage, ws.send). A sample inside a native call may still be time the thread waited there
// for a core (after waking another thread, say): read the shares as the thread's busy wall time.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: { last: { type: "string" }, top: { type: "string", default: "30" } },
});
if (!positionals[0]) throw new Error("usage: npx bun bench/cpuprofile-top.ts PROFILE [--last SECONDS] [--top N]");

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const p = JSON.parse(readFileSync(positionals[0], "utf8")) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const name = (n: Node) =>
  `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url.split("/").slice(-2).join("/")}:${n.callFrame.lineNumber}`;

const from = values.last === undefined ? -Infinity : p.endTime - Number(values.last) * 1e6;
const self = new Map<string, number>();
const inclusive = new Map<string, number>();
let total = 0;
let at = p.startTime;
p.samples.forEach((sample, i) => {
  at += p.timeDeltas[i] ?? 0;
  if (at < from) return;
  total++;
  const leaf = name(byId.get(sample)!);
  self.set(leaf, (self.get(leaf) ?? 0) + 1);
  const seen = new Set<string>();
  for (let id: number | undefined = sample; id !== undefined; id = parent.get(id)) {
    const key = name(byId.get(id)!);
    if (!seen.has(key)) seen.add(key), inclusive.set(key, (inclusive.get(key) ?? 0) + 1);
  }
});

const top = Number(values.top);
const print = (title: string, m: Map<string, number>) => {
  console.log(title);
  for (const [k, n] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${((100 * n) / total).toFixed(1).padStart(6)}%  ${k}`);
};
console.log(`${total} samples`);
print("self", self);
print("inclusive", inclusive);
