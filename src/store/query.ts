// REQ filters -> SQL. One statement per plan shape (the SQL text depends only on which
// conditions a filter has; list values travel as one JSON parameter through json_each).
import type { Database, Statement } from "bun:sqlite";
import type { Filter } from "../protocol/filter.ts";

export interface QueryRow {
  json: string;
  created_at: number;
  id: string;
}

type Param = string | number;
interface Plan {
  sql: string;
  params: Param[];
  /** How many times one event can appear (tag-driven plans join on several values). */
  fanIn: number;
}

const TAG_KEYS = (f: Filter): string[] => Object.keys(f).filter((k) => k[0] === "#");
const list = (values: readonly unknown[]): string => JSON.stringify(values);

export function planFilter(f: Filter, limit: number, maxSeq: number): Plan {
  const where: string[] = [];
  const params: Param[] = [];
  const tagKeys = TAG_KEYS(f);
  // Drive from the tag index when it is the most selective condition we have.
  const driver = !f.ids && !f.authors && tagKeys.length > 0 ? tagKeys[0]! : undefined;
  let from = "events e";
  let order = "e.created_at DESC, e.id";
  let fanIn = 1;
  if (driver) {
    const values = f[driver as `#${string}`]!;
    from = "tags t JOIN events e ON e.seq = t.seq";
    order = "t.created_at DESC, e.id";
    where.push("t.name = ?", "t.value IN (SELECT value FROM json_each(?))");
    params.push(driver.slice(1), list(values));
    fanIn = Math.max(1, values.length);
    if (f.kinds) where.push("t.kind IN (SELECT value FROM json_each(?))"), params.push(list(f.kinds));
    if (f.since !== undefined) where.push("t.created_at >= ?"), params.push(f.since);
    if (f.until !== undefined) where.push("t.created_at <= ?"), params.push(f.until);
  } else {
    if (f.ids) where.push("e.id IN (SELECT unhex(value) FROM json_each(?))"), params.push(list(f.ids));
    if (f.authors) where.push("e.pubkey IN (SELECT unhex(value) FROM json_each(?))"), params.push(list(f.authors));
    if (f.kinds) where.push("e.kind IN (SELECT value FROM json_each(?))"), params.push(list(f.kinds));
    if (f.since !== undefined) where.push("e.created_at >= ?"), params.push(f.since);
    if (f.until !== undefined) where.push("e.created_at <= ?"), params.push(f.until);
  }
  for (const key of tagKeys) {
    if (key === driver) continue;
    where.push("EXISTS (SELECT 1 FROM tags x WHERE x.seq = e.seq AND x.name = ? AND x.value IN (SELECT value FROM json_each(?)))");
    params.push(key.slice(1), list(f[key as `#${string}`]!));
  }
  where.push("e.seq <= ?");
  params.push(maxSeq);
  params.push(limit * fanIn);
  const sql = `SELECT e.json AS json, e.created_at AS created_at, lower(hex(e.id)) AS id FROM ${from} WHERE ${where.join(" AND ")} ORDER BY ${order} LIMIT ?`;
  return { sql, params, fanIn };
}

/** Prepared statements keyed by SQL text (= plan shape), bounded. */
export class StatementCache {
  private readonly map = new Map<string, Statement>();
  constructor(
    private readonly db: Database,
    private readonly max = 256,
  ) {}
  get(sql: string): Statement {
    let st = this.map.get(sql);
    if (st) {
      this.map.delete(sql);
      this.map.set(sql, st);
      return st;
    }
    st = this.db.prepare(sql);
    this.map.set(sql, st);
    if (this.map.size > this.max) {
      const oldest = this.map.keys().next().value!;
      this.map.get(oldest)!.finalize();
      this.map.delete(oldest);
    }
    return st;
  }
}

export interface QueryJob {
  filters: Filter[];
  /** Effective limit per filter (already clamped; 0 = skip). */
  limits: number[];
  /** Only events committed at or before this seq (the REQ's snapshot). */
  maxSeq: number;
}

/** Runs every filter, merges, dedupes and orders newest first (ties by lowest id). */
export function runQuery(cache: StatementCache, job: QueryJob): string[] {
  const seen = new Map<string, QueryRow>();
  job.filters.forEach((f, i) => {
    const limit = job.limits[i]!;
    if (limit <= 0) return;
    const plan = planFilter(f, limit, job.maxSeq);
    let taken = 0;
    const local = new Set<string>();
    for (const row of cache.get(plan.sql).iterate(...plan.params) as IterableIterator<QueryRow>) {
      if (local.has(row.id)) continue;
      local.add(row.id);
      seen.set(row.id, row);
      if (++taken >= limit) break;
    }
  });
  const rows = [...seen.values()];
  rows.sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return rows.map((r) => r.json);
}
