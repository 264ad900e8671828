// EXPLAIN (ANALYZE, BUFFERS) of the SQL the Postgres store generates (postgres/query.ts:
// planFilter, planSeqs, planNeg) for the bench's REQ shapes, on a database filled by
// bench/pg-fill.ts (1,000,000 corpus events). Each statement runs once to warm the cache, then
// under EXPLAIN ANALYZE; the key plan lines and the execution time are printed.
//
//   npx bun bench/pg-fill.ts --db bunstr_bench_explain --events 1000000
//   npx bun bench/pg-explain.ts --db bunstr_bench_explain [--full] [--only feed100,thread…]
import { SQL } from "bun";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import type { Filter } from "../src/protocol/filter.ts";
import { FEED_WINDOW, planFilter, planNeg, planSeqs } from "../src/store/postgres/query.ts";
import { databaseUrl } from "../test/postgres-env.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { db: { type: "string", default: "bunstr_bench_explain" }, full: { type: "boolean", default: false }, only: { type: "string" } },
});
const sql = new SQL({ url: databaseUrl(values.db), max: 1 } as ConstructorParameters<typeof SQL>[0]);
const hex = async (q: string): Promise<string[]> => ((await sql.unsafe(q)) as { v: string }[]).map((r) => r.v);

const [{ n, top }] = await sql`SELECT count(*)::int AS n, (SELECT value FROM relay_seq)::float8 AS top FROM events`;
// The relay's scope for an unauthenticated connection: its snapshot, NIP-40, restricted kinds (NIP-17/59/04).
const scope = {
  maxSeq: Number(top),
  now: Math.floor(Date.now() / 1000),
  visibility: { restrictedKinds: [4, 1059, 21059], viewers: [] as string[] },
};

// Values from the data: authors ranked by activity, the most and a typically referenced note, topics.
const authors = await hex(`SELECT encode(pubkey, 'hex') AS v FROM events GROUP BY pubkey ORDER BY count(*) DESC, pubkey`);
const every = (k: number, count: number) => authors.filter((_, i) => i % k === 0).slice(0, count);
const [hotNote] = await hex(`SELECT value AS v FROM tags WHERE name = 'e' GROUP BY value ORDER BY count(*) DESC LIMIT 1`);
const [plainNote] = await hex(
  `SELECT value AS v FROM tags WHERE name = 'e' AND seq > (SELECT max(seq) - 50000 FROM events) GROUP BY value HAVING count(*) BETWEEN 5 AND 20 ORDER BY value LIMIT 1`,
);
const [profileAuthor] = await hex(`SELECT encode(pubkey, 'hex') AS v FROM events WHERE kind = 0 ORDER BY pubkey LIMIT 1`);
const [topTopic] = await hex(`SELECT value AS v FROM tags WHERE name = 't' GROUP BY value ORDER BY count(*) DESC LIMIT 1`);
const [midTopic] = await hex(`SELECT value AS v FROM tags WHERE name = 't' GROUP BY value ORDER BY count(*) DESC OFFSET 200 LIMIT 1`);
const ids = await hex(`SELECT encode(id, 'hex') AS v FROM events TABLESAMPLE SYSTEM (1) REPEATABLE (7) LIMIT 20`);

type Case = { name: string; what: string; sql: string; params: (string | number)[] };
const req = (name: string, what: string, f: Filter, limit: number): Case => ({ name, what, ...planFilter(f, limit, scope) });
const cases: Case[] = [
  req("feed100", "feed: kinds [1,6], 100 authors, limit 50", { kinds: [1, 6], authors: every(50, 100) }, 50),
  req("feed1000", "feed: kinds [1,6], 1000 authors, limit 50", { kinds: [1, 6], authors: every(5, 1000) }, 50),
  req("thread-hot", "thread: #e the most replied note, kinds [1,7]", { "#e": [hotNote!], kinds: [1, 7] }, 500),
  req("thread", "thread: #e a note with 5-20 replies/reactions, kinds [1,7]", { "#e": [plainNote!], kinds: [1, 7] }, 500),
  req("profile", "profile: kind 0, one author", { kinds: [0], authors: [profileAuthor!] }, 500),
  req("profile-notes", "profile notes: kind 1, one author, limit 20", { kinds: [1], authors: [authors[3]!] }, 20),
  req("hashtag-top", "hashtag: #t the top topic, limit 100", { "#t": [topTopic!] }, 100),
  req("hashtag", "hashtag: #t the 200th topic, limit 100", { "#t": [midTopic!] }, 100),
  req("ids", "ids: 20 ids", { ids }, 500),
  req("search", "search: 'coffee morning', limit 50", { search: "coffee morning" }, 50),
  req("search-kind", "search: 'bitcoin', kinds [1], limit 20", { search: "bitcoin", kinds: [1] }, 20),
];
{
  const p = planSeqs([{ "#e": [hotNote!], kinds: [7] }], scope);
  cases.push({
    name: "count",
    what: "COUNT: #e the most reacted note, kind 7",
    sql: `SELECT count(*)::float8 AS n FROM (${p.sql}) s`,
    params: p.params,
  });
  cases.push({
    name: "count-hll",
    what: "COUNT with HLL: pubkeys of #e + kind 7",
    sql: `SELECT pubkey FROM events WHERE seq IN (${p.sql})`,
    params: p.params,
  });
}
{
  const p = planNeg({ authors: [authors[0]!] }, 100_000, scope);
  cases.push({ name: "neg", what: "NIP-77 items: one (the most active) author", ...p });
  const q = planNeg({ kinds: [1], authors: [authors[40]!] }, 100_000, scope);
  cases.push({ name: "neg-kind", what: "NIP-77 items: kind 1 of one author", ...q });
}

/**
 * Proposed (not what the store does today): a feed as one index probe per (author, kind), each
 * the newest `limit` from events_pubkey_kind, then the top `limit` of their union. Same answer.
 */
function lateralFeed(base: Case): Case {
  const where = base.sql.slice(base.sql.indexOf(" WHERE ") + 7, base.sql.indexOf(" ORDER BY "));
  const inner = where
    .replace(
      /e\.pubkey = ANY\(ARRAY\(SELECT decode\(x, 'hex'\) FROM jsonb_array_elements_text\(\$1::text::jsonb\) x\)\)/,
      "e.pubkey = a.pk",
    )
    .replace(/e\.kind = ANY\(ARRAY\(SELECT x::int FROM jsonb_array_elements_text\(\$2::text::jsonb\) x\)\)/, "e.kind = k.kind");
  if (inner === where || !inner.includes("a.pk") || !inner.includes("k.kind")) throw new Error("lateralFeed: the plan's SQL changed shape");
  const lim = `$${base.params.length}`;
  const sql = `SELECT e.json AS json, e.created_at::float8 AS created_at, encode(e.id, 'hex') AS id FROM
    (SELECT DISTINCT decode(x, 'hex') AS pk FROM jsonb_array_elements_text($1::text::jsonb) x) a
    CROSS JOIN (SELECT DISTINCT x::int AS kind FROM jsonb_array_elements_text($2::text::jsonb) x) k
    CROSS JOIN LATERAL (SELECT e.json, e.created_at, e.id FROM events e WHERE ${inner} ORDER BY e.created_at DESC, e.id LIMIT ${lim}) e
    ORDER BY e.created_at DESC, e.id LIMIT ${lim}`;
  return { name: `${base.name}-lateral`, what: `PROPOSED ${base.what}: LATERAL per (author, kind)`, sql, params: base.params };
}
/** Proposed: NIP-77 items without DISTINCT when no tag list can repeat a row (only a tag driver with several values can). */
for (const name of ["neg", "neg-kind"]) {
  const base = cases.find((c) => c.name === name)!;
  cases.splice(cases.indexOf(base) + 1, 0, {
    name: `${name}-nodistinct`,
    what: `PROPOSED ${base.what}: no DISTINCT`,
    sql: base.sql.replace("SELECT DISTINCT ", "SELECT "),
    params: base.params,
  });
}
/** What the store runs first for long author lists (postgres/query.ts FEED_WINDOW); checked to give the same answer. */
const feeds: [string, Filter][] = [
  ["feed100", { kinds: [1, 6], authors: every(50, 100) }],
  ["feed1000", { kinds: [1, 6], authors: every(5, 1000) }],
];
for (const [name, f] of feeds) {
  const base = cases.find((c) => c.name === name)!;
  const windowed = {
    name: `${name}-window`,
    what: `${base.what}, the store's plan: within the newest ${FEED_WINDOW.toLocaleString("en-US")} events first`,
    ...planFilter(f, 50, scope, FEED_WINDOW),
  };
  cases.splice(cases.indexOf(base) + 1, 0, lateralFeed(base), windowed);
}

const keyLine = /Scan|Sort|Join|Limit|Nested Loop|Aggregate|Unique|HashAggregate|Bitmap|Filter: \(|Rows Removed|Sort Method|JIT|Timing:/;
const explain = async (c: Case) =>
  ((await sql.unsafe(`EXPLAIN (ANALYZE, BUFFERS) ${c.sql}`, c.params)) as { "QUERY PLAN": string }[]).map((r) => r["QUERY PLAN"]);
const execMs = (plan: string[]) => Number(/Execution Time: ([\d.]+)/.exec(plan.join("\n"))?.[1]);
const [{ jit }] = await sql`SHOW jit`;
console.log(
  `EXPLAIN (ANALYZE, BUFFERS) on ${values.db}: ${n.toLocaleString("en-US")} events; ${new Date().toISOString().slice(0, 16)}Z, load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(" ")}; server jit = ${jit}`,
);
const summary: { name: string; ms: number; msNoJit: number; rows: number; top: string }[] = [];
for (const c of cases) {
  if (values.only && !values.only.split(",").some((o) => c.name.startsWith(o))) continue;
  const rows = (await sql.unsafe(c.sql, c.params)) as { id?: string }[];
  if (c.name.endsWith("-lateral") || c.name.endsWith("-window")) {
    const base = cases.find((b) => `${b.name}-lateral` === c.name || `${b.name}-window` === c.name)!;
    const want = (await sql.unsafe(base.sql, base.params)) as { id: string }[];
    if (want.length !== rows.length || want.some((r, i) => r.id !== rows[i]!.id))
      throw new Error(`${c.name}: not the same answer as ${base.name}`);
  }
  if (c.name.endsWith("-nodistinct")) {
    const base = cases.find((b) => `${b.name}-nodistinct` === c.name)!;
    const want = new Set(((await sql.unsafe(base.sql, base.params)) as { id: string }[]).map((r) => r.id));
    if (want.size !== rows.length || rows.some((r) => !want.has(r.id!))) throw new Error(`${c.name}: not the same items as ${base.name}`);
  }
  await sql`SET jit = default`;
  const planJit = await explain(c);
  await sql`SET jit = off`;
  await sql.unsafe(c.sql, c.params);
  const plan = await explain(c);
  await sql`SET jit = default`;
  const ms = execMs(planJit);
  const msNoJit = execMs(plan);
  const jitLine = planJit.find((l) => /Timing:.*Total/.test(l))?.trim();
  console.log(
    `\n## ${c.name}: ${c.what} -> ${rows.length} rows; ${ms} ms with the server's jit (${jitLine ?? "no JIT"}), ${msNoJit} ms with jit = off`,
  );
  for (const line of values.full ? plan : plan.filter((l) => keyLine.test(l) || /Execution Time|Planning Time/.test(l)))
    console.log(`  ${line.length > 220 ? `${line.slice(0, 217)}...` : line}`);
  const scanLines = plan
    .filter((l) => /Scan|Sort {2}/.test(l) && !/Function Scan|SubPlan|never executed|tags y/.test(l))
    .map((l) =>
      l
        .trim()
        .replace(/\s+\(cost.*$/, "")
        .replace(/^->\s+/, ""),
    );
  summary.push({ name: c.name, ms, msNoJit, rows: rows.length, top: scanLines.slice(0, 3).join("; ") });
}
console.log("\n| shape | rows | ms (jit default) | ms (jit off) | main scans |\n|---|---:|---:|---:|---|");
for (const s of summary) console.log(`| ${s.name} | ${s.rows} | ${s.ms} | ${s.msNoJit} | ${s.top.slice(0, 160)} |`);
await sql.close();
