// How often the rows a reader serves are rows it served before: the hit rate a cache of served
// events (by seq, bounded in bytes, least recently used out first) would have in each reader
// worker, for issue 15's mix drawn from a corpus (bench/lib/engine-reqs.ts), REQs dealt to the
// workers in turn. A simulation, not a cache: it runs the engine once per REQ and replays the
// answers through LRUs of each size. Rows are counted by their event id.
//   npx bun bench/row-cache-sim.ts DB CORPUS.jsonl [--reqs 20000] [--sizes-mb 1,2,4,8,16] [--workers 2]
import { parseArgs } from "node:util";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { queryFrames, StatementCache } from "../src/store/sqlite/query.ts";
import { engineReqs } from "./lib/engine-reqs.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: {
    reqs: { type: "string", default: "20000" },
    "sizes-mb": { type: "string", default: "1,2,4,8,16" },
    workers: { type: "string", default: "2" },
  },
});
const [dbPath, corpusPath] = positionals;
if (!dbPath || !corpusPath)
  throw new Error("usage: npx bun bench/row-cache-sim.ts DB CORPUS.jsonl [--reqs N] [--sizes-mb 1,2,4] [--workers N]");

const db = openDatabase({ path: dbPath, synchronous: "normal", readonly: true });
const cache = new StatementCache(db);
const now = Math.floor(Date.now() / 1000);
// Each REQ's answer as (id, bytes) pairs; the stored JSON starts with {"id":"<64 hex>".
const answers = engineReqs(corpusPath, Number(values.reqs)).map((r) => {
  const rows: [string, number][] = [];
  for (const batch of queryFrames(cache, { filters: r.filters, limits: r.limits, maxSeq: Number.MAX_SAFE_INTEGER, now }))
    for (const json of batch ?? []) rows.push([json.slice(7, 71), json.length]);
  return { shape: r.shape, rows };
});

const workers = Number(values.workers);
for (const mb of values["sizes-mb"].split(",").map(Number)) {
  const lrus = Array.from({ length: workers }, () => ({ entries: new Map<string, number>(), bytes: 0 }));
  const byShape = new Map<string, { hits: number; rows: number }>();
  answers.forEach((a, i) => {
    const lru = lrus[i % workers]!;
    const tally = byShape.get(a.shape) ?? { hits: 0, rows: 0 };
    byShape.set(a.shape, tally);
    for (const [id, bytes] of a.rows) {
      tally.rows++;
      if (lru.entries.delete(id)) tally.hits++;
      else lru.bytes += bytes;
      lru.entries.set(id, bytes);
      while (lru.bytes > mb * 1024 * 1024) {
        const [oldest, size] = lru.entries.entries().next().value!;
        lru.entries.delete(oldest);
        lru.bytes -= size;
      }
    }
  });
  const all = [...byShape.values()].reduce((s, t) => ({ hits: s.hits + t.hits, rows: s.rows + t.rows }), { hits: 0, rows: 0 });
  const pct = (t: { hits: number; rows: number }) => `${((100 * t.hits) / Math.max(1, t.rows)).toFixed(0)}%`;
  console.log(
    `${mb} MB x ${workers} workers: ${pct(all)} of ${all.rows} rows served again; ${[...byShape].map(([s, t]) => `${s} ${pct(t)}`).join(", ")}`,
  );
}
