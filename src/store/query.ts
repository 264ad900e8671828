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

/**
 * `col = ?` for one value (SQLite then walks an index in created_at order and stops at the
 * limit), else `col IN (json_each(?))`: one statement shape whatever the list length.
 */
function inList(where: string[], params: Param[], col: string, values: readonly (string | number)[], hex = false): void {
  if (values.length === 1) {
    where.push(`${col} = ${hex ? "unhex(?)" : "?"}`);
    params.push(values[0]!);
  } else {
    where.push(`${col} IN (SELECT ${hex ? "unhex(value)" : "value"} FROM json_each(?))`);
    params.push(JSON.stringify(values));
  }
}

/** Lists up to this long on the driving column run as one ordered, limited query per value. */
const MAX_SPLIT = 16;

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
    where.push("t.name = ?");
    params.push(driver.slice(1));
    inList(where, params, "t.value", values);
    fanIn = Math.max(1, values.length);
    if (f.kinds) inList(where, params, "t.kind", f.kinds);
    if (f.since !== undefined) where.push("t.created_at >= ?"), params.push(f.since);
    if (f.until !== undefined) where.push("t.created_at <= ?"), params.push(f.until);
  } else {
    if (f.ids) inList(where, params, "e.id", f.ids, true);
    if (f.authors) inList(where, params, "e.pubkey", f.authors, true);
    if (f.kinds) inList(where, params, "e.kind", f.kinds);
    if (f.since !== undefined) where.push("e.created_at >= ?"), params.push(f.since);
    if (f.until !== undefined) where.push("e.created_at <= ?"), params.push(f.until);
  }
  for (const key of tagKeys) {
    if (key === driver) continue;
    const sub: string[] = [];
    const subParams: Param[] = [key.slice(1)];
    inList(sub, subParams, "x.value", f[key as `#${string}`]!);
    where.push(`EXISTS (SELECT 1 FROM tags x WHERE x.seq = e.seq AND x.name = ? AND ${sub[0]})`);
    params.push(...subParams);
  }
  // Unary + keeps SQLite from driving the query from this rowid range (which reads and sorts
  // every stored event); the snapshot cut is a filter, the order comes from an index.
  where.push("+e.seq <= ?");
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

/** The list to run value by value: the driving column's, when it has 2..MAX_SPLIT values. */
function splitKey(f: Filter): keyof Filter | undefined {
  const fits = (v: readonly unknown[] | undefined) => v !== undefined && v.length > 1 && v.length <= MAX_SPLIT;
  if (f.ids) return undefined;
  if (f.authors) return fits(f.authors) ? "authors" : undefined;
  const tag = TAG_KEYS(f)[0] as `#${string}` | undefined;
  if (tag) return fits(f[tag]) ? tag : undefined;
  return fits(f.kinds) ? "kinds" : undefined;
}

const newestFirst = (a: QueryRow, b: QueryRow) => b.created_at - a.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** One filter's stored events: at most `limit`, newest first. */
function filterRows(cache: StatementCache, f: Filter, limit: number, maxSeq: number): QueryRow[] {
  const key = splitKey(f);
  const parts = key ? (f[key] as (string | number)[]).map((v) => ({ ...f, [key]: [v] }) as Filter) : [f];
  const rows = new Map<string, QueryRow>();
  for (const part of parts) {
    const plan = planFilter(part, limit, maxSeq);
    // all(), not iterate(): a cursor abandoned mid-way would keep a read transaction open and
    // stop WAL checkpoints. LIMIT already bounds the rows to limit × fanIn.
    for (const row of cache.get(plan.sql).all(...plan.params) as QueryRow[]) rows.set(row.id, row);
  }
  const out = [...rows.values()];
  if (parts.length > 1 || out.length > limit) out.sort(newestFirst);
  return out.length > limit ? out.slice(0, limit) : out;
}

/** Runs every filter, merges, dedupes and orders newest first (ties by lowest id). */
export function runQuery(cache: StatementCache, job: QueryJob): string[] {
  const seen = new Map<string, QueryRow>();
  job.filters.forEach((f, i) => {
    const limit = job.limits[i]!;
    if (limit <= 0) return;
    for (const row of filterRows(cache, f, limit, job.maxSeq)) seen.set(row.id, row);
  });
  const rows = [...seen.values()];
  if (job.filters.length > 1) rows.sort(newestFirst);
  return rows.map((r) => r.json);
}
