// Fills a Postgres database with the first N events of the bench corpus through the Postgres
// store's own writer (PostgresStore.writeBatch, batches of --batch events, signatures not
// checked: the corpus is pre-signed), so that plans can be examined on a realistic distribution
// (bench/pg-explain.ts). Resumes: events already stored are skipped by the writer.
//
//   npx bun bench/pg-fill.ts --db bunstr_bench_explain [--events 1000000] [--batch 2000]
import { parseArgs } from "node:util";
import { loadavg } from "node:os";
import { corpusPath, readLines } from "./corpus.ts";
import { PostgresStore } from "../src/store/postgres/store.ts";
import { createDatabase } from "../test/postgres-env.ts";
import type { PendingWrite } from "../src/store/types.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    db: { type: "string", default: "bunstr_bench_explain" },
    events: { type: "string", default: "1000000" },
    batch: { type: "string", default: "2000" },
  },
});
const n = Number(values.events);
const batchSize = Number(values.batch);
if (!/^[a-z_][a-z0-9_]*$/.test(values.db)) throw new Error("--db: a plain lower-case name");
const url = await createDatabase(values.db);
const store = await PostgresStore.open({ url, poolSize: 2, queryTimeoutMs: 600_000 });
const rules = { deletion: true, vanish: true, search: true, searchSkipKinds: new Set([4, 1059]) };
const [{ n: have }] = await store.sql`SELECT count(*)::int AS n FROM events`;
console.error(
  `[pg-fill] ${values.db}: ${have} events stored; writing the first ${n} of ${corpusPath(n)} in batches of ${batchSize} (load ${loadavg()[0]!.toFixed(2)})`,
);
const started = performance.now();
let batch: PendingWrite[] = [];
let done = 0;
let stored = 0;
const flush = async () => {
  const out = await store.writeBatch(batch, rules);
  stored += out.filter((o) => o.stored).length;
  done += batch.length;
  batch = [];
  if (done % 50_000 < batchSize)
    console.error(
      `[pg-fill] ${done}/${n}, ${Math.round(done / ((performance.now() - started) / 1000))} ev/s, load ${loadavg()[0]!.toFixed(2)}`,
    );
};
for (const line of readLines(corpusPath(n), n)) {
  batch.push({ event: JSON.parse(line), json: line });
  if (batch.length === batchSize) await flush();
}
if (batch.length > 0) await flush();
await store.sql`ANALYZE`;
const [{ e, t }] = await store.sql`SELECT (SELECT count(*) FROM events)::int AS e, (SELECT count(*) FROM tags)::int AS t`;
console.log(
  `[pg-fill] wrote ${done} events (${stored} stored now) in ${((performance.now() - started) / 1000).toFixed(1)} s; table events ${e} rows, tags ${t} rows; ${(Number((await store.sql`SELECT pg_database_size(current_database())::float8 AS b`)[0].b) / 2 ** 20).toFixed(0)} MiB`,
);
await store.close();
