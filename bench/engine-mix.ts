// The read engine (src/store/sqlite/query.ts) alone, per shape of issue 15's mix: REQs drawn from
// a corpus as bench/reader-cache.ts draws them, run on one thread against a database that holds
// it, through each engine given (e.g. this tree's and an older worktree's query.ts), taking turns
// so a load change hits them alike, every answer compared with the first engine's.
//   npx bun bench/engine-mix.ts DB CORPUS.jsonl [--engines A/query.ts,B/query.ts] [--dbs DB_A,DB_B] [--reqs 3000] [--rounds 5]
// --cache-kb / --mmap-bytes: another page cache or a map of the file, to size what they would save.
// --frame: each batch framed as EVENT messages and joined, as reader-worker.ts does before posting.
// DB: e.g. `bunstr import CORPUS.jsonl --no-verify --data-dir D` then D/bunstr.sqlite. NIP-40 on
// (now = the clock), by default a 4 MB page cache and no map (as a reader worker opens it).
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { engineReqs } from "./lib/engine-reqs.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: {
    engines: { type: "string", default: "src/store/sqlite/query.ts" },
    reqs: { type: "string", default: "3000" },
    rounds: { type: "string", default: "5" },
    /** A database per engine (default: DB for all), e.g. the same tree on two schemas. */
    dbs: { type: "string" },
    /** Do what a reader worker does with each batch too: frame the rows and join them into one string. */
    frame: { type: "boolean", default: false },
    /** The connection's page cache and map, as a reader worker's (4 MB, no map) unless given. */
    "cache-kb": { type: "string", default: "4000" },
    "mmap-bytes": { type: "string", default: "0" },
  },
});
const [dbPath, corpusPath] = positionals;
if (!dbPath || !corpusPath) throw new Error("usage: npx bun bench/engine-mix.ts DB CORPUS.jsonl [--engines A,B] [--reqs N] [--rounds R]");

const reqs = engineReqs(corpusPath, Number(values.reqs));
const shapes = [...new Set(reqs.map((r) => r.shape))];

type Engine = {
  StatementCache: new (db: unknown) => unknown;
  queryFrames: (c: unknown, job: unknown) => Generator<string[] | undefined, void, void>;
};
const paths = values.engines.split(",");
const engines = await Promise.all(
  paths.map(async (p, i) => {
    const m = (await import(resolve(p))) as Engine;
    const db = openDatabase({ path: values.dbs?.split(",")[i] ?? dbPath, synchronous: "normal", readonly: true });
    db.exec(`PRAGMA mmap_size = ${Number(values["mmap-bytes"])}`);
    db.exec(`PRAGMA cache_size = -${Number(values["cache-kb"])}`);
    return { m, cache: new m.StatementCache(db) };
  }),
);
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
// us per REQ, per engine and shape, summed over rounds (the first left out).
const spent = paths.map(() => new Map<string, number>(shapes.map((s) => [s, 0])));
const first: string[][] = [];
const frame = values.frame ? '["EVENT","sub",' : undefined;
let joined = 0;
let mismatches = 0;
const now = Math.floor(Date.now() / 1000);
for (let round = 0; round < Number(values.rounds); round++) {
  engines.forEach(({ m, cache }, e) => {
    reqs.forEach((r, i) => {
      const t0 = cpu();
      const rows: string[] = [];
      for (const batch of m.queryFrames(cache, { filters: r.filters, limits: r.limits, maxSeq: Number.MAX_SAFE_INTEGER, now, frame }))
        if (batch) {
          rows.push(...batch);
          if (frame) joined += batch.join("").length;
        }
      const d = cpu() - t0;
      if (round > 0) spent[e]!.set(r.shape, spent[e]!.get(r.shape)! + d);
      if (e === 0 && round === 0) first[i] = rows;
      else if (round === 0 && rows.join("\n") !== first[i]!.join("\n")) {
        mismatches++;
        if (mismatches <= 3) console.log(`mismatch: engine ${paths[e]} REQ ${i} ${r.shape}: ${rows.length} rows vs ${first[i]!.length}`);
      }
    });
  });
}
const counted = Math.max(1, Number(values.rounds) - 1);
for (const [e, p] of paths.entries()) {
  const per = shapes.map((s) => {
    const n = reqs.filter((r) => r.shape === s).length;
    return `${s} ${(spent[e]!.get(s)! / counted / n).toFixed(0)}`;
  });
  const total = [...spent[e]!.values()].reduce((a, b) => a + b, 0) / counted / reqs.length;
  console.log(`${p}: CPU us per REQ: mix ${total.toFixed(0)}; ${per.join(", ")}`);
}
if (frame) console.log(`framed and joined: ${(joined / Number(values.rounds) / paths.length / reqs.length).toFixed(0)} characters per REQ`);
console.log(`answers compared with the first engine's: ${mismatches} differ`);
