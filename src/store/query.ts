// REQ / COUNT / NEG-OPEN filters -> SQL. One statement per plan shape: the SQL text depends only
// on which conditions a filter has; list values travel as one JSON parameter through json_each.
import type { Database, Statement } from "bun:sqlite";
import { ftsExpression, searchTerms } from "../nips/nip50.ts";
import { Hll } from "../nips/nip45.ts";
import type { Filter } from "../protocol/filter.ts";

export interface QueryRow {
  json: string;
  created_at: number;
  id: string;
}

/** Who is asking, for kinds only their author and p-tagged recipients may read (NIP-17/59). */
export interface Visibility {
  restrictedKinds: number[];
  /** Pubkeys the connection authenticated as. */
  viewers: string[];
}

interface Scope {
  /** Only events committed at or before this seq (the request's snapshot). */
  maxSeq: number;
  /** Hide events whose expiration is at or before this time (NIP-40); 0 = hide nothing. */
  now: number;
  visibility?: Visibility;
}

export interface QueryJob extends Scope {
  filters: Filter[];
  /** Effective limit per filter (already clamped; 0 = skip). */
  limits: number[];
}

export interface CountJob extends Scope {
  filters: Filter[];
  /** NIP-45 register offset, when the request is eligible for HyperLogLog. */
  hllOffset?: number;
}

export interface NegJob extends Scope {
  filter: Filter;
  /** Most items to return; more means overflow. */
  max: number;
}

export interface NegItems {
  timestamps: number[];
  ids: string[];
  overflow: boolean;
}

type Param = string | number;
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
    // As one bound value would be: a lone surrogate as U+FFFD, the form the tags table holds
    // (json_each would give it back as itself, and miss the row).
    params.push(JSON.stringify(values.map((v) => (typeof v === "string" ? v.toWellFormed() : v))));
  }
}

/** Lists up to this long on the driving column run as one ordered, limited query per value. */
const MAX_SPLIT = 16;
/** Tag lists up to this long (not driving the query) are checked by primary-key probes. */
const MAX_TAG_PROBES = 8;

interface Core {
  from: string;
  where: string[];
  params: Param[];
  order: string;
  ranked: boolean;
}

const fewestValues = (f: Filter, keys: string[]): string =>
  keys.reduce((best, k) => (f[k as `#${string}`]!.length < f[best as `#${string}`]!.length ? k : best));

/** FROM and WHERE for one filter: which index drives it, every condition, the snapshot cut. */
function planCore(f: Filter, scope: Scope): Core {
  const where: string[] = [];
  const params: Param[] = [];
  const tagKeys = TAG_KEYS(f);
  const terms = f.search !== undefined ? searchTerms(f.search) : [];
  let from = "events e";
  let order = "e.created_at DESC, e.id";
  // Drive from full-text search, else from the tag index when no ids/authors narrow it better.
  // Of several tags, the one with the fewest values drives (a short list is usually the narrow one).
  const driver = terms.length === 0 && !f.ids && !f.authors && tagKeys.length > 0 ? fewestValues(f, tagKeys) : undefined;
  if (terms.length > 0) {
    from = "events_fts s JOIN events e ON e.seq = s.rowid";
    order = "s.rank, e.created_at DESC, e.id";
    where.push("events_fts MATCH ?");
    params.push(ftsExpression(terms));
  }
  const driverValues = driver ? f[driver as `#${string}`]! : [];
  if (driver && driverValues.length === 1) {
    // One value: walk the tag index in created_at order and stop at the limit.
    from = "tags t JOIN events e ON e.seq = t.seq";
    order = "t.created_at DESC, e.id";
    where.push("t.name = ?", "t.value = ?");
    params.push(driver.slice(1), driverValues[0]!);
    if (f.kinds) inList(where, params, "t.kind", f.kinds);
    if (f.since !== undefined) where.push("t.created_at >= ?"), params.push(f.since);
    if (f.until !== undefined) where.push("t.created_at <= ?"), params.push(f.until);
  } else if (driver) {
    // Many values: the matching seqs as a set (no duplicates, so LIMIT is exact), ordered by
    // the events' own index; joining would read every match's JSON before the sort.
    const sub: string[] = ["t.name = ?"];
    const subParams: Param[] = [driver.slice(1)];
    inList(sub, subParams, "t.value", driverValues);
    if (f.kinds) inList(sub, subParams, "t.kind", f.kinds);
    if (f.since !== undefined) sub.push("t.created_at >= ?"), subParams.push(f.since);
    if (f.until !== undefined) sub.push("t.created_at <= ?"), subParams.push(f.until);
    where.push(`e.seq IN (SELECT t.seq FROM tags t WHERE ${sub.join(" AND ")})`);
    params.push(...subParams);
  } else {
    if (f.ids) inList(where, params, "e.id", f.ids, true);
    if (f.authors) inList(where, params, "e.pubkey", f.authors, true);
    if (f.kinds) inList(where, params, "e.kind", f.kinds);
    if (f.since !== undefined) where.push("e.created_at >= ?"), params.push(f.since);
    if (f.until !== undefined) where.push("e.created_at <= ?"), params.push(f.until);
  }
  for (const key of tagKeys) {
    if (key === driver) continue;
    const values = f[key as `#${string}`]!;
    if (values.length <= MAX_TAG_PROBES) {
      // A few values: probe the tag table's primary key (name, value, created_at, seq) per value.
      const sub: string[] = [];
      const subParams: Param[] = [key.slice(1)];
      inList(sub, subParams, "x.value", values);
      where.push(`EXISTS (SELECT 1 FROM tags x WHERE x.name = ? AND ${sub[0]} AND x.created_at = e.created_at AND x.seq = e.seq)`);
      params.push(...subParams);
    } else {
      // Many: read this event's own tags and test each against the list (one pass over a few
      // tags, instead of one probe per listed value for every candidate event).
      where.push("EXISTS (SELECT 1 FROM json_each(e.json, '$.tags') x WHERE x.value ->> 0 = ? AND x.value ->> 1 IN (SELECT value FROM json_each(?)))");
      params.push(key.slice(1), JSON.stringify(values));
    }
  }
  // Unary + keeps SQLite from driving the query from these (which would read and sort every
  // stored event); they are filters, the order comes from an index.
  where.push("+e.seq <= ?");
  params.push(scope.maxSeq);
  if (scope.now > 0) where.push("(e.expiration IS NULL OR +e.expiration > ?)"), params.push(scope.now);
  const v = scope.visibility;
  if (v && v.restrictedKinds.length > 0) {
    where.push(
      "(e.kind NOT IN (SELECT value FROM json_each(?)) OR e.pubkey IN (SELECT unhex(value) FROM json_each(?))" +
        " OR EXISTS (SELECT 1 FROM tags y WHERE y.name = 'p' AND y.value IN (SELECT value FROM json_each(?)) AND y.created_at = e.created_at AND y.seq = e.seq))",
    );
    const viewers = JSON.stringify(v.viewers);
    params.push(JSON.stringify(v.restrictedKinds), viewers, viewers);
  }
  return { from, where, params, order, ranked: terms.length > 0 };
}

/**
 * `recentFrom`: walk the time index from the newest event down to this created_at instead of
 * the plan's own index (see planTuning).
 */
export function planFilter(f: Filter, limit: number, scope: Scope, recentFrom?: number): { sql: string; params: Param[]; ranked: boolean } {
  const c = planCore(f, scope);
  if (recentFrom !== undefined) {
    c.from = "events e INDEXED BY events_created";
    c.where.push("e.created_at >= ?");
    c.params.push(recentFrom);
  }
  const sql = `SELECT e.json AS json, e.created_at AS created_at, lower(hex(e.id)) AS id FROM ${c.from} WHERE ${c.where.join(" AND ")} ORDER BY ${c.order} LIMIT ?`;
  return { sql, params: [...c.params, limit], ranked: c.ranked };
}

/**
 * Long author lists (a feed: kinds 1/6 of the 20..1,000 accounts someone follows) would look up
 * every (author, kind) and sort all their events to return the newest few. Their newest events
 * are usually among the newest events of the relay: walking the time index over the newest
 * planTuning.recentWindow events is a prefix of the NIP-01 order (created_at DESC, id), so if it finds
 * `limit` matches they are exactly the answer; if not, the full plan runs.
 */
export const planTuning = { recentWindow: 10_000 };

function recentFirst(f: Filter): boolean {
  return f.authors !== undefined && f.authors.length > MAX_SPLIT && !f.ids && f.search === undefined;
}

/** created_at of the recentWindow-th newest event at or before `until`; undefined if fewer. */
function recentBound(cache: StatementCache, until: number | undefined): number | undefined {
  const sql = "SELECT created_at FROM events INDEXED BY events_created WHERE created_at <= ? ORDER BY created_at DESC, id LIMIT 1 OFFSET ?";
  const row = cache.get(sql).get(until ?? Number.MAX_SAFE_INTEGER, planTuning.recentWindow - 1) as { created_at: number } | null;
  return row?.created_at;
}

/** `SELECT e.seq …` for one filter, without order or limit: the building block of counts. */
function seqsOf(f: Filter, scope: Scope): { sql: string; params: Param[] } {
  const c = planCore(f, scope);
  return { sql: `SELECT e.seq FROM ${c.from} WHERE ${c.where.join(" AND ")}`, params: c.params };
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

/** The list to run value by value: the driving column's, when it has 2..MAX_SPLIT values. */
function splitKey(f: Filter): keyof Filter | undefined {
  const fits = (v: readonly unknown[] | undefined) => v !== undefined && v.length > 1 && v.length <= MAX_SPLIT;
  if (f.ids || f.search !== undefined) return undefined;
  if (f.authors) return fits(f.authors) ? "authors" : undefined;
  const keys = TAG_KEYS(f);
  const tag = keys.length > 0 ? (fewestValues(f, keys) as `#${string}`) : undefined;
  if (tag) return fits(f[tag]) ? tag : undefined;
  return fits(f.kinds) ? "kinds" : undefined;
}

const newestFirst = (a: QueryRow, b: QueryRow) => b.created_at - a.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** One filter's stored events: at most `limit`, newest first (search: most relevant first). */
function filterRows(cache: StatementCache, f: Filter, limit: number, scope: Scope): QueryRow[] {
  if (recentFirst(f)) {
    const bound = recentBound(cache, f.until);
    // Fewer events than the window, or `since` inside it: the walk covers every candidate.
    const whole = bound === undefined || (f.since !== undefined && f.since >= bound);
    const plan = planFilter(f, limit, scope, whole ? (f.since ?? 0) : bound);
    const rows = cache.get(plan.sql).all(...plan.params) as QueryRow[];
    if (whole || rows.length >= limit) return rows;
  }
  const key = splitKey(f);
  const parts = key ? (f[key] as (string | number)[]).map((v) => ({ ...f, [key]: [v] }) as Filter) : [f];
  const rows = new Map<string, QueryRow>();
  let ranked = false;
  for (const part of parts) {
    const plan = planFilter(part, limit, scope);
    ranked = plan.ranked;
    // all(), not iterate(): a cursor abandoned mid-way would keep a read transaction open and
    // stop WAL checkpoints. LIMIT already bounds the rows.
    for (const row of cache.get(plan.sql).all(...plan.params) as QueryRow[]) rows.set(row.id, row);
  }
  const out = [...rows.values()];
  if (!ranked && (parts.length > 1 || out.length > limit)) out.sort(newestFirst);
  return out.length > limit ? out.slice(0, limit) : out;
}

/** Runs every filter, merges, dedupes and orders newest first (ties by lowest id). */
export function runQuery(cache: StatementCache, job: QueryJob): string[] {
  const seen = new Map<string, QueryRow>();
  job.filters.forEach((f, i) => {
    const limit = job.limits[i]!;
    if (limit <= 0) return;
    for (const row of filterRows(cache, f, limit, job)) if (!seen.has(row.id)) seen.set(row.id, row);
  });
  const rows = [...seen.values()];
  // Search results keep their relevance order; everything else is merged by time.
  if (job.filters.length > 1 && !job.filters.some((f) => f.search !== undefined)) rows.sort(newestFirst);
  return rows.map((r) => r.json);
}

/** NIP-45: distinct events matching any filter; HyperLogLog registers over their pubkeys. */
export function runCount(cache: StatementCache, job: CountJob): { count: number; hll?: string } {
  const parts = job.filters.map((f) => seqsOf(f, job));
  const union = parts.map((p) => p.sql).join(" UNION ");
  const params = parts.flatMap((p) => p.params);
  if (job.hllOffset === undefined) {
    const row = cache.get(`SELECT count(*) AS n FROM (${union})`).get(...params) as { n: number };
    return { count: row.n };
  }
  const hll = new Hll(job.hllOffset);
  let count = 0;
  for (const row of cache.get(`SELECT pubkey FROM events WHERE seq IN (${union})`).all(...params) as { pubkey: Uint8Array }[]) {
    hll.add(row.pubkey);
    count++;
  }
  return { count, hll: hll.hex() };
}

/** NIP-77: (created_at, id) of every matching event, up to max (limit is ignored). */
export function runNegItems(cache: StatementCache, job: NegJob): NegItems {
  const { limit: _ignored, ...filter } = job.filter;
  const c = planCore(filter, job);
  const sql = `SELECT DISTINCT e.created_at AS t, lower(hex(e.id)) AS id FROM ${c.from} WHERE ${c.where.join(" AND ")} LIMIT ?`;
  const rows = cache.get(sql).all(...c.params, job.max + 1) as { t: number; id: string }[];
  const overflow = rows.length > job.max;
  if (overflow) rows.length = job.max;
  return { timestamps: rows.map((r) => r.t), ids: rows.map((r) => r.id), overflow };
}
