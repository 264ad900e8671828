// REQ / COUNT / NEG-OPEN filters -> Postgres SQL, with the same meaning as store/sqlite/query.ts
// (SQLite). Lists travel as one JSON parameter each, so a statement's text depends only on the
// filter's shape. NIP-50 search uses Postgres full text over the same token stream as SQLite.
import { searchTerms } from "../../nips/nip50.ts";
import type { Filter } from "../../protocol/filter.ts";
import { GROUP_ACTIONS, GROUP_METADATA, reachesGroupMetadata, reachesGroupRecords, SEARCH_WINDOW } from "../semantics.ts";
import type { ReadScope, Visibility } from "../types.ts";
import { pgSafe } from "./text.ts";

/** A stored event as the planner returns it. */
export interface QueryRow {
  json: string;
  created_at: number;
  id: string;
}

type Param = string | number;

const TAG_KEYS = (f: Filter): string[] => Object.keys(f).filter((k) => k[0] === "#");

class Sql {
  readonly where: string[] = [];
  readonly params: Param[] = [];
  p(v: Param): string {
    this.params.push(v);
    return `$${this.params.length}`;
  }
  /** `col = ANY(...)` over a JSON list parameter (hex decoded for bytea columns). */
  any(col: string, all: readonly (string | number)[], as: "bytea" | "int" | "text"): string {
    // A tag value Postgres cannot store was never indexed: it matches nothing here.
    const values = as === "text" ? all.filter((v) => pgSafe(String(v))) : all;
    if (values.length === 0) return "FALSE";
    if (values.length === 1) {
      const v = values[0]!;
      return as === "bytea" ? `${col} = decode(${this.p(v as string)}, 'hex')` : `${col} = ${this.p(v)}`;
    }
    const x = as === "bytea" ? "decode(x, 'hex')" : as === "int" ? "x::int" : "x";
    return `${col} = ANY(ARRAY(SELECT ${x} FROM jsonb_array_elements_text(${this.p(JSON.stringify(values))}::text::jsonb) x))`;
  }
}

const fewestValues = (f: Filter, keys: string[]): string =>
  keys.reduce((best, k) => (f[k as `#${string}`]!.length < f[best as `#${string}`]!.length ? k : best));

/**
 * NIP-50 terms as a tsquery literal: every term must appear (AND), as SQLite's MATCH. Quoted
 * lexemes are taken as they are (no parser), matching the tsvector built from the same tokens.
 */
const tsQuery = (terms: readonly string[]): string => terms.map((t) => `'${t.replaceAll("\\", "\\\\").replaceAll("'", "''")}'`).join(" & ");

interface Core extends Sql {
  from: string;
  order: string;
}

function planCore(f: Filter, scope: ReadScope): Core {
  const q = new Sql() as Core;
  const tagKeys = TAG_KEYS(f);
  const terms = f.search !== undefined ? searchTerms(f.search) : [];
  q.from = "events e";
  q.order = "e.created_at DESC, e.id";
  const driver = terms.length === 0 && !f.ids && !f.authors && tagKeys.length > 0 ? fewestValues(f, tagKeys) : undefined;
  if (terms.length > 0) {
    const tsq = `${q.p(tsQuery(terms))}::tsquery`;
    q.where.push(`e.fts @@ ${tsq}`);
    // Normalization 1: more occurrences rank higher, longer texts lower (as bm25 does in SQLite).
    q.order = `ts_rank(e.fts, ${tsq}, 1) DESC, e.created_at DESC, e.id`;
  }
  const driverValues = driver ? f[driver as `#${string}`]! : [];
  if (driver && driverValues.length === 1) {
    // One value: walk its (name, value, created_at) index newest first, join the event.
    q.from = "tags t JOIN events e ON e.seq = t.seq";
    q.order = "t.created_at DESC, e.id";
    q.where.push(`t.name = ${q.p(driver.slice(1))}`, q.any("t.value", driverValues, "text"));
    if (f.kinds) q.where.push(q.any("t.kind", f.kinds, "int"));
    if (f.since !== undefined) q.where.push(`t.created_at >= ${q.p(f.since)}`);
    if (f.until !== undefined) q.where.push(`t.created_at <= ${q.p(f.until)}`);
  } else if (driver) {
    // Several values: an event tagged with two of them would join twice (and LIMIT would count
    // it twice), so the matching seqs are a set.
    const sub = [`t.name = ${q.p(driver.slice(1))}`, q.any("t.value", driverValues, "text")];
    if (f.kinds) sub.push(q.any("t.kind", f.kinds, "int"));
    if (f.since !== undefined) sub.push(`t.created_at >= ${q.p(f.since)}`);
    if (f.until !== undefined) sub.push(`t.created_at <= ${q.p(f.until)}`);
    q.where.push(`e.seq IN (SELECT t.seq FROM tags t WHERE ${sub.join(" AND ")})`);
  } else {
    if (f.ids) q.where.push(q.any("e.id", f.ids, "bytea"));
    if (f.authors) q.where.push(q.any("e.pubkey", f.authors, "bytea"));
    if (f.kinds) q.where.push(q.any("e.kind", f.kinds, "int"));
    if (f.since !== undefined) q.where.push(`e.created_at >= ${q.p(f.since)}`);
    if (f.until !== undefined) q.where.push(`e.created_at <= ${q.p(f.until)}`);
  }
  for (const key of tagKeys) {
    if (key === driver) continue;
    q.where.push(
      `EXISTS (SELECT 1 FROM tags x WHERE x.seq = e.seq AND x.name = ${q.p(key.slice(1))} AND ${q.any("x.value", f[key as `#${string}`]!, "text")})`,
    );
  }
  q.where.push(`e.seq <= ${q.p(scope.maxSeq)}`);
  if (scope.now > 0) q.where.push(`(e.expiration IS NULL OR e.expiration > ${q.p(scope.now)})`);
  const v = scope.visibility;
  if (v && v.restrictedKinds.length > 0) {
    const viewers = JSON.stringify(v.viewers);
    q.where.push(
      `(NOT (e.kind = ANY(ARRAY(SELECT x::int FROM jsonb_array_elements_text(${q.p(JSON.stringify(v.restrictedKinds))}::text::jsonb) x)))` +
        ` OR e.pubkey = ANY(ARRAY(SELECT decode(x, 'hex') FROM jsonb_array_elements_text(${q.p(viewers)}::text::jsonb) x))` +
        ` OR EXISTS (SELECT 1 FROM tags y WHERE y.seq = e.seq AND y.name = 'p' AND y.value = ANY(ARRAY(SELECT jsonb_array_elements_text(${q.p(viewers)}::text::jsonb)))))`,
    );
  }
  groupResidual(q, f, v?.groups);
  // Issue 34, as SQLite's (store/sqlite/query.ts hiddenResidual): a probe of `hidden`'s key a candidate, only while a ban hides something.
  if (v?.hidden?.authors) q.where.push("NOT EXISTS (SELECT 1 FROM hidden hd WHERE hd.what = 'pubkey' AND hd.key = e.pubkey)");
  if (v?.hidden?.events) q.where.push("NOT EXISTS (SELECT 1 FROM hidden hd WHERE hd.what = 'event' AND hd.key = e.id)");
  return q;
}

/**
 * NIP-29, as SQLite's (store/sqlite/query.ts groupResidual): an event with an h value naming a
 * group whose events are gated (group_gates) and not among the reader's `members` (or, for a
 * record, 9000-9022, one whose metadata is gated), and the
 * relay's 39000-39009 (signed by one of `relays`) whose d names a group whose metadata is gated
 * and not among them, are left out. A candidate costs a probe of the h rows' index (tags_h, by
 * seq) and, for an h row, one of group_gates' key. Written as an aggregate of a correlated
 * subquery, so the planner cannot turn it into an anti-join (as a NOT EXISTS it rescanned every
 * hidden h row for each candidate, 1.2-2.5 s a REQ at 10,000 hidden groups).
 */
function groupResidual(q: Sql, f: Filter, g: Visibility["groups"]): void {
  if (!g) return;
  // Group ids hold no newline (nips/nip29.ts): the list travels as one string split on it. As
  // `IN (SELECT unnest(…))` it is split and hashed once per statement; as `= ANY(string_to_array(…))`
  // it was split and scanned for each h row (a member of 10,000 gated groups: 156 ms a REQ, not 7).
  const notMember = (col: string) =>
    g.members.length === 0
      ? "true"
      : `NOT coalesce(${col} IN (SELECT unnest(string_to_array(${q.p(g.members.join("\n"))}, chr(10)))), false)`;
  // A group whose metadata is gated gates its records too (9000-9022: they spell out its members).
  const gated = reachesGroupRecords(f)
    ? `(gg.events OR (gg.metadata AND e.kind BETWEEN ${GROUP_ACTIONS.min} AND ${GROUP_ACTIONS.max}))`
    : "gg.events";
  q.where.push(
    `NOT coalesce((SELECT bool_or(${notMember("y.value")}) FROM tags y JOIN group_gates gg ON gg.value = y.value WHERE y.seq = e.seq AND y.name = 'h' AND ${gated}), false)`,
  );
  if (!reachesGroupMetadata(f) || g.relays.length === 0) return;
  q.where.push(
    `NOT (e.kind BETWEEN ${GROUP_METADATA.min} AND ${GROUP_METADATA.max} AND e.pubkey = ANY(ARRAY(SELECT decode(x, 'hex') FROM unnest(string_to_array(${q.p(g.relays.join(","))}, ',')) x))` +
      ` AND coalesce((SELECT gg.metadata FROM group_gates gg WHERE gg.value = e.d), false) AND ${notMember("e.d")})`,
  );
}

const COLUMNS = "e.json AS json, e.created_at::float8 AS created_at, encode(e.id, 'hex') AS id";

/**
 * Long author lists (a feed: the 20..1,000 accounts someone follows) would read every event of
 * every author and sort them for the newest few (0.35-1.4 s on 1M events). Their newest events
 * are usually among the relay's newest: filtering the newest `window` events (within since/until)
 * is a prefix of the NIP-01 order, so `limit` matches found there are exactly the answer
 * (2-3 ms); with fewer, the full plan runs.
 */
export const FEED_WINDOW = 10_000;
export const feedWindowFits = (f: Filter): boolean => f.authors !== undefined && f.authors.length > 16 && !f.ids && f.search === undefined;

/** One filter's newest (or, searching, most relevant) `limit` events; `window`: see FEED_WINDOW. */
export function planFilter(f: Filter, limit: number, scope: ReadScope, window?: number): { sql: string; params: Param[]; ranked: boolean } {
  const q = planCore(f, scope);
  if (window !== undefined) {
    const bounds = [
      f.since !== undefined ? `created_at >= ${q.p(f.since)}` : "",
      f.until !== undefined ? `created_at <= ${q.p(f.until)}` : "",
    ].filter(Boolean);
    q.from = `(SELECT * FROM events ${bounds.length > 0 ? `WHERE ${bounds.join(" AND ")}` : ""} ORDER BY created_at DESC, id LIMIT ${q.p(window)}) e`;
  }
  const ranked = f.search !== undefined && searchTerms(f.search).length > 0;
  if (ranked) {
    // Relevance among the newest SEARCH_WINDOW matches: ranking every match of a common word
    // read and scored 150,000 rows (1 s on 1M events); the newest 5,000 take 50-400 ms.
    const newest = `SELECT e.* FROM ${q.from} WHERE ${q.where.join(" AND ")} ORDER BY e.created_at DESC, e.id LIMIT ${q.p(SEARCH_WINDOW)}`;
    return { sql: `SELECT ${COLUMNS} FROM (${newest}) e ORDER BY ${q.order} LIMIT ${q.p(limit)}`, params: q.params, ranked };
  }
  const sql = `SELECT ${COLUMNS} FROM ${q.from} WHERE ${q.where.join(" AND ")} ORDER BY ${q.order} LIMIT ${q.p(limit)}`;
  return { sql, params: q.params, ranked };
}

/** The seqs of the events matching any filter (for counts), and the parameters. */
export function planSeqs(filters: readonly Filter[], scope: ReadScope): { sql: string; params: Param[] } {
  const params: Param[] = [];
  const parts = filters.map((f) => {
    const q = planCore(f, scope);
    // Renumber this part's $n after the previous parts' parameters.
    const offset = params.length;
    params.push(...q.params);
    const where = q.where.join(" AND ").replace(/\$(\d+)/g, (_, n) => `$${Number(n) + offset}`);
    return `SELECT e.seq FROM ${q.from} WHERE ${where}`;
  });
  return { sql: parts.join(" UNION "), params };
}

/**
 * NIP-45 HyperLogLog registers of the events `seqs` selects, as nips/nip45.ts Hll.add computes
 * them: register = the pubkey's byte at `offset`, rank = 1 + the leading zero bits of the bytes
 * after it (all of them zero: their bits + 1). One row per register that is set, with how many
 * events fell in it.
 */
export function hllRegisters(seqs: string, params: Param[], offset: number): { sql: string; params: Param[] } {
  const o = `$${params.length + 1}`;
  const bits = `('x' || encode(substring(e.pubkey FROM ${o}::int + 2), 'hex'))::varbit`;
  const rank = `CASE WHEN position(B'1' IN ${bits}) = 0 THEN length(${bits}) + 1 ELSE position(B'1' IN ${bits}) END`;
  return {
    sql: `SELECT get_byte(e.pubkey, ${o}::int) AS ri, max(${rank})::int AS rank, count(*)::float8 AS n FROM events e WHERE e.seq IN (${seqs}) GROUP BY 1`,
    params: [...params, offset],
  };
}

/** NIP-77: (created_at, id) of up to max+1 matching events (limit ignored). */
export function planNeg(filter: Filter, max: number, scope: ReadScope): { sql: string; params: Param[] } {
  const { limit: _ignored, ...f } = filter;
  const q = planCore(f, scope);
  return {
    sql: `SELECT DISTINCT e.created_at::float8 AS t, encode(e.id, 'hex') AS id FROM ${q.from} WHERE ${q.where.join(" AND ")} LIMIT ${q.p(max + 1)}`,
    params: q.params,
  };
}
