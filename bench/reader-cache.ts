// A reader connection's SQLite page cache size against its CPU per REQ: the issue-15 shapes (feed
// 35%, thread 20%, profile 20%, hashtag 15%, ids 10%) drawn from a corpus, run on one thread
// against a database that holds it, each cache size on its own read-only connection without mmap
// (as src/store/sqlite/reader-worker.ts opens it), taking turns so a load change hits them alike.
//   npx bun bench/reader-cache.ts DB CORPUS.jsonl [--sizes 16000,8000,4000] [--reqs 4000] [--rounds 7]
// DB: e.g. `bunstr import CORPUS.jsonl --no-verify --data-dir D` then D/bunstr.sqlite.
// Prints CPU ms per 1k REQs per round; the first round starts cold, the mean leaves it out.
import { parseArgs } from "node:util";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { engineReqs } from "./lib/engine-reqs.ts";
import { runQuery, StatementCache } from "../src/store/sqlite/query.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: {
    sizes: { type: "string", default: "16000,8000,4000" },
    reqs: { type: "string", default: "4000" },
    rounds: { type: "string", default: "7" },
  },
});
const [dbPath, corpusPath] = positionals;
if (!dbPath || !corpusPath)
  throw new Error("usage: npx bun bench/reader-cache.ts DB CORPUS.jsonl [--sizes KB,...] [--reqs N] [--rounds R]");

const reqs = engineReqs(corpusPath, Number(values.reqs));

const sizes = values.sizes.split(",").map(Number);
const caches = sizes.map((kb) => {
  const db = openDatabase({ path: dbPath, synchronous: "normal", readonly: true });
  db.exec("PRAGMA mmap_size = 0");
  db.exec(`PRAGMA cache_size = -${kb}`);
  return new StatementCache(db);
});
const perRound = sizes.map(() => [] as number[]);
const rows = sizes.map(() => 0);
for (let round = 0; round < Number(values.rounds); round++) {
  caches.forEach((cache, i) => {
    const t0 = process.cpuUsage();
    let n = 0;
    for (const r of reqs) n += runQuery(cache, { ...r, maxSeq: Number.MAX_SAFE_INTEGER, now: 0 }).length;
    const d = process.cpuUsage(t0);
    perRound[i]!.push((d.user + d.system) / reqs.length);
    rows[i] = n;
  });
}
sizes.forEach((kb, i) => {
  const warm = perRound[i]!.slice(1);
  const mean = warm.reduce((a, b) => a + b, 0) / Math.max(1, warm.length);
  console.log(
    `cache ${kb} KB: ${rows[i]} rows a round; CPU ms per 1k REQs by round ${perRound[i]!.map((x) => x.toFixed(0)).join(" ")}; mean without the first ${mean.toFixed(0)}`,
  );
});
