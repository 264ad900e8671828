// REQ / COUNT / NEG-OPEN filters -> SQL, run as time-sliced scans.
//
// Every filter is answered by one or more *walks*: ordered index ranges read newest first, a
// bounded chunk of candidates per statement, resumed from a cursor. A candidate is checked
// against the rest of the filter (the residual) in the same statement, so one statement reads
// at most one chunk of index entries however few of them match: a scan that would read 300,000
// rows is 300 short statements, and between any two the job can be paused, charged, handed to
// another connection's job or stopped (store/sqlite/readers.ts). Nothing holds a read transaction
// between chunks; the snapshot is the `maxSeq` cut.
//
// A REQ first selects keys (created_at, seq, id) — per filter the newest `limit` — and then
// reads the JSON of the chosen events in small batches, so the rows a job holds are bounded in
// bytes whatever the event sizes (the caller sends each batch before asking for the next).
import type { Database, Statement } from "bun:sqlite";
import { ftsExpression, searchableText, searchTerms, tokens } from "../../nips/nip50.ts";
import { Hll } from "../../nips/nip45.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import type { Filter } from "../../protocol/filter.ts";
import { GROUP_ACTIONS, GROUP_METADATA, newestFirst, reachesGroupMetadata, reachesGroupRecords, SEARCH_WINDOW } from "../semantics.ts";
import { type EventColumns, eventBytesSql, eventColsSql, eventJson, rowJson, tagValue, tagValueSql } from "./db.ts";
import { packNegItems, type CountJob, type NegItems, type NegJob, type QueryJob, type ReadScope, type Visibility } from "../types.ts";

/**
 * A running read, advanced one statement per `next()`. It yields a batch of serialized events
 * (REQ) or nothing (progress); its return value is the job's result.
 */
export type ReadSteps<T> = Generator<string[] | undefined, T, void>;

type Param = string | number | Uint8Array;
const TAG_KEYS = (f: Filter): string[] => Object.keys(f).filter((k) => k[0] === "#");
const MAX_TIME = Number.MAX_SAFE_INTEGER;

/** Index entries one statement reads: starts small (most answers are near the top), grows while cheap. */
const CHUNK_MIN = 16;
const CHUNK_MAX = 4096;
/** A chunk that took longer than this (ms) halves the next one; one under a quarter of it doubles it. */
const CHUNK_TARGET_MS = 4;
/** The fetch phase reads events' JSON in batches of at most this many bytes (but one event at least) and events. */
const FETCH_BYTES = 128 * 1024;
const FETCH_MAX = 512;
/** Tag lists up to this long (not driving the query) are checked by primary-key probes only. */
const MAX_TAG_PROBES = 8;
/** Bytes of an event's JSON read (json_each) in about the time of one primary-key probe. */
const JSON_BYTES_PER_PROBE = 32;
/** Author x kind pairs walked one by one; beyond this, one walk per author with the kinds checked. */
const MAX_PAIR_WALKS = 256;

/**
 * Long author lists (a feed: kinds 1/6 of the 20..1,000 accounts someone follows) would walk
 * every (author, kind). Their newest events are usually among the newest events of the relay:
 * walking the time index over the newest recentWindow events first is a prefix of the NIP-01
 * order, so once it has `limit` matches older entries cannot improve the answer; if not, the
 * per-author walks run. Exported for tests: test/differential.test.ts tries smaller windows.
 */
export const planTuning = { recentWindow: 10_000 };
const RECENT_FIRST_AUTHORS = 16;

// ---------------------------------------------------------------------------------------------
// Residual conditions: what a candidate from a walk must also satisfy.

interface Residual {
  where: string[];
  params: Param[];
  /**
   * Conditions that may reject many candidates in a row (lists, tags, visibility, search). Without
   * them a walk's LIMIT alone bounds its work (only events committed during the read, or expired
   * and not yet swept, are passed over), so no boundary is needed.
   */
  selective?: boolean;
}

/** Lists up to this long are written as `IN (?, ?, …)`: no list is built for each statement run. */
const MAX_INLINE_LIST = 8;

/** How a list's values are bound: as they are, hex as bytes (ids, pubkeys), or as tag rows hold them (tagValue). */
type Bind = "as-is" | "hex" | "tag";

function inList(r: Residual, col: string, values: readonly (string | number)[], bind: Bind = "as-is"): void {
  const one = bind === "hex" ? "unhex(?)" : "?";
  const param = bind === "tag" ? (v: string | number) => (typeof v === "string" ? tagValue(v) : v) : (v: string | number) => v;
  if (values.length === 1) {
    r.where.push(`${col} = ${one}`);
    r.params.push(param(values[0]!));
  } else if (values.length > 0 && values.length <= MAX_INLINE_LIST) {
    r.where.push(`${col} IN (${values.map(() => one).join(", ")})`);
    r.params.push(...values.map(param));
  } else {
    const each = bind === "hex" ? "unhex(value)" : bind === "tag" ? tagValueSql("value") : "value";
    r.where.push(`${col} IN (SELECT ${each} FROM json_each(?))`);
    // As one bound value would be: a lone surrogate as U+FFFD, the form the tags table holds
    // (json_each would give it back as itself, and miss the row).
    r.params.push(JSON.stringify(values.map((v) => (typeof v === "string" ? v.toWellFormed() : v))));
  }
}

/** What the walk's own index range does not already guarantee. */
interface Covered {
  ids?: boolean;
  authors?: boolean;
  kinds?: boolean;
  tag?: string;
  time?: boolean;
}

function residualOf(f: Filter, scope: ReadScope, covered: Covered): Residual {
  const r = conditionsOf(f, covered);
  r.selective = r.where.length > 0;
  r.where.push("e.seq <= ?");
  r.params.push(scope.maxSeq);
  if (scope.now > 0) r.where.push("(e.expiration IS NULL OR e.expiration > ?)"), r.params.push(scope.now);
  visibilityResidual(r, f, scope.visibility);
  groupResidual(r, f, scope.visibility);
  hiddenResidual(r, scope.visibility);
  return r;
}

/**
 * Issue 34 (Visibility.hidden): what a ban hides until its retention ends, for every reader. One
 * probe of the `hidden` table's key per candidate and kind of row present (a hidden author, a
 * hidden event); nothing at all while no ban hides anything.
 */
function hiddenResidual(r: Residual, v: Visibility | undefined): void {
  const h = v?.hidden;
  if (!h) return;
  r.selective = true;
  if (h.authors) r.where.push("NOT EXISTS (SELECT 1 FROM hidden hd WHERE hd.what = 'pubkey' AND hd.key = e.pubkey)");
  if (h.events) r.where.push("NOT EXISTS (SELECT 1 FROM hidden hd WHERE hd.what = 'event' AND hd.key = e.id)");
}

/** The filter's own conditions on an event `e` (search aside), less what the walk covers. */
function conditionsOf(f: Filter, covered: Covered): Residual {
  const r: Residual = { where: [], params: [] };
  if (f.ids && !covered.ids) inList(r, "e.id", f.ids, "hex");
  if (f.authors && !covered.authors) inList(r, "e.pubkey", f.authors, "hex");
  if (f.kinds && !covered.kinds) inList(r, "e.kind", f.kinds);
  if (!covered.time) {
    if (f.since !== undefined) r.where.push("e.created_at >= ?"), r.params.push(f.since);
    if (f.until !== undefined) r.where.push("e.created_at <= ?"), r.params.push(f.until);
  }
  for (const key of TAG_KEYS(f)) {
    if (key === covered.tag) continue;
    const values = f[key as `#${string}`]!;
    // Probes of the tag table's primary key (name, value, created_at, seq), one per value.
    const sub: Residual = { where: [], params: [] };
    inList(sub, "x.value", values, "tag");
    const probes = `EXISTS (SELECT 1 FROM tags x WHERE x.name = ? AND ${sub.where[0]} AND x.created_at = e.created_at AND x.seq = e.seq)`;
    if (values.length <= MAX_TAG_PROBES) {
      r.where.push(probes);
      r.params.push(key.slice(1), ...sub.params);
      continue;
    }
    // A long list: whichever costs less for this row, reading the event's own tags (its JSON)
    // or a probe per value. Reading the JSON alone cost ~12 ms a row on 2,000-tag events (issue
    // 36: times each earlier filter of a COUNT, in one statement); probes alone, 1,000 values on
    // a small note, a hundred times what its JSON costs.
    r.where.push(
      `CASE WHEN octet_length(e.json) <= ? THEN EXISTS (SELECT 1 FROM json_each(e.json, '$.tags') x WHERE x.value ->> 0 = ? AND x.value ->> 1 IN (SELECT value FROM json_each(?))) ELSE ${probes} END`,
    );
    r.params.push(values.length * JSON_BYTES_PER_PROBE, key.slice(1), JSON.stringify(values), key.slice(1), ...sub.params);
  }
  return r;
}

/**
 * Restricted kinds (NIP-17/59/04) only for their author or a p-tagged viewer. Left out when the
 * filter's kinds cannot reach a restricted kind; without viewers (no AUTH) it is a plain
 * `kind NOT IN (...)` of the configured kinds, written into the SQL (integers from the config),
 * so the statement builds no lists of its own.
 */
function visibilityResidual(r: Residual, f: Filter, v: Visibility | undefined): void {
  if (!v || v.restrictedKinds.length === 0) return;
  if (f.kinds && !f.kinds.some((k) => v.restrictedKinds.includes(k))) return;
  const literal = v.restrictedKinds.every((k) => Number.isSafeInteger(k));
  const kinds = literal ? v.restrictedKinds.join(", ") : "SELECT value FROM json_each(?)";
  const kindParams = literal ? [] : [JSON.stringify(v.restrictedKinds)];
  r.selective = true;
  if (v.viewers.length === 0) {
    r.where.push(`e.kind NOT IN (${kinds})`);
    r.params.push(...kindParams);
    return;
  }
  r.where.push(
    `(e.kind NOT IN (${kinds}) OR e.pubkey IN (SELECT unhex(value) FROM json_each(?))` +
      " OR EXISTS (SELECT 1 FROM tags y WHERE y.name = 'p' AND y.value IN (SELECT unhex(value) FROM json_each(?)) AND y.created_at = e.created_at AND y.seq = e.seq))",
  );
  const viewers = JSON.stringify(v.viewers);
  r.params.push(...kindParams, viewers, viewers);
}

/**
 * NIP-29 (Visibility.groups): an event with an h value naming a group whose events are gated
 * (group_gates, kept by the writer) and not among the reader's `members` (or, for a record,
 * 9000-9022, one whose metadata is gated), and the relay's own
 * 39000-39009 (signed by one of `relays`) whose d names a group whose metadata is gated and not
 * among them, are left out. Each candidate costs one probe of the h rows' index (tags_h, by
 * created_at and seq: no row read) and, for an h row, one of group_gates' key: the reader sends
 * its own memberships (inline when short, else a temp table of this connection:
 * StatementCache.groupList), never the gated groups, however many there are.
 */
function groupResidual(r: Residual, f: Filter, v: Visibility | undefined): void {
  const g = v?.groups;
  if (!g) return;
  r.selective = true;
  const table = longMembers.get(v!)?.table;
  const members = (col: string, bind: "tag" | "as-is"): Residual => {
    const sub: Residual = { where: [], params: [] };
    // The table holds the ids as h rows do (tagValue); a d column holds text.
    if (table) sub.where.push(`${bind === "tag" ? col : tagValueSql(col)} NOT IN ${table}`);
    else if (g.members.length > 0) {
      inList(sub, col, membersInline(g.members), bind);
      sub.where[0] = `NOT (${sub.where[0]})`;
    }
    return sub;
  };
  // `+`: the value is checked on the entry the seek found, not used to seek once per value.
  const notMember = members("+y.value", "tag");
  // A group whose metadata is gated gates its records too (9000-9022: they spell out its members).
  const gated = reachesGroupRecords(f)
    ? `(gg.events = 1 OR (gg.metadata = 1 AND e.kind BETWEEN ${GROUP_ACTIONS.min} AND ${GROUP_ACTIONS.max}))`
    : "gg.events = 1";
  r.where.push(
    `NOT EXISTS (SELECT 1 FROM tags y INDEXED BY tags_h JOIN group_gates gg ON gg.value = y.value WHERE y.name = 'h' AND y.created_at = e.created_at AND y.seq = e.seq AND ${gated}${notMember.where.map((w) => ` AND ${w}`).join("")})`,
  );
  r.params.push(...notMember.params);
  if (!reachesGroupMetadata(f) || g.relays.length === 0) return;
  const notMemberD = members("e.d", "as-is");
  r.where.push(
    `NOT (e.kind BETWEEN ${GROUP_METADATA.min} AND ${GROUP_METADATA.max} AND e.pubkey IN (${g.relays.map(() => "unhex(?)").join(", ")})` +
      ` AND EXISTS (SELECT 1 FROM group_gates gg WHERE gg.value = ${tagValueSql("e.d")} AND gg.metadata = 1)${notMemberD.where.map((w) => ` AND ${w}`).join("")})`,
  );
  r.params.push(...g.relays, ...notMemberD.params);
}

function membersInline(ids: readonly string[]): readonly string[] {
  // A packed list is only read through withGroupLists: taken as one id, it would show nothing.
  if (isPacked(ids)) throw new Error("a packed membership list outside withGroupLists");
  return ids;
}

/** A job's long membership list, in the temp table holding it while it runs (withGroupLists). */
const longMembers = new WeakMap<Visibility, GroupList>();

/**
 * A long list travels to the reader as one string, its ids after a space each (packGroupLists;
 * group ids hold no space): one string to copy and parse instead of 10,000 (~3 ms a job), and
 * one JSON writes as it is (a newline it would escape 10,000 times: as slow again). Only a
 * reader who is a member of many gated groups has one.
 */
const PACKED = " ";
const isPacked = (ids: readonly string[]): boolean => ids.length === 1 && ids[0]!.startsWith(PACKED);
/** Memberships up to this many go inline (json_each past MAX_INLINE_LIST); more, a temp table. */
const MAX_MEMBERS_INLINE = 256;

/** The job a reader is sent: a long membership list packed. */
export function packGroupLists<J extends ReadScope>(job: J): J {
  const g = job.visibility?.groups;
  if (!g || g.members.length <= MAX_MEMBERS_INLINE || g.members.some((id) => id.includes(PACKED))) return job;
  return { ...job, visibility: { ...job.visibility!, groups: { ...g, members: [PACKED + g.members.join(PACKED)] } } };
}

/**
 * Runs a job with its long membership list in a temp table: built as an index for each
 * statement instead, a list of 10,000 cost ~3 ms a statement, and a walk that skips many hidden
 * events runs hundreds of statements (measured: 1.4 s for a REQ of 500, 24 ms with the table).
 */
function* withGroupLists<T>(cache: StatementCache, scope: ReadScope, steps: () => ReadSteps<T>): ReadSteps<T> {
  const v = scope.visibility;
  const ids = v?.groups?.members;
  if (!ids || !(isPacked(ids) || ids.length > MAX_MEMBERS_INLINE)) return yield* steps();
  const list = cache.groupList(isPacked(ids) ? ids[0]! : PACKED + ids.join(PACKED));
  longMembers.set(v!, list);
  try {
    return yield* steps();
  } finally {
    cache.releaseList(list);
  }
}

// ---------------------------------------------------------------------------------------------
// Walks.

/** How a walk orders ties of created_at, and so what its cursor holds after created_at. */
type Tie = "seq-desc" | "seq-asc";

interface Walk {
  /** FROM of the index walked, alone (for the boundary) and joined to events (for the chunk). */
  index: string;
  joined: string;
  /** The index range's prefix (author, kind, tag value), on the walk's own columns. */
  range: Residual;
  /**
   * The filter's `since`, when the walk's index is ordered by created_at (its `until` is where
   * the cursor starts). Kept apart: SQLite bounds a range scan by one lower bound per column, so
   * `since` is left out once a chunk has its own lower bound (which is never below it).
   */
  since?: number;
  residual: Residual;
  tie: Tie;
  /** Columns of the walk: its created_at, its tie value, its seq. */
  tCol: string;
  tieCol: string;
  sCol: string;
  /** ids: its list bounds it, no boundary is needed. */
  single?: boolean;
  /**
   * A short ids list: read whole in one statement without ORDER BY (a sort of a few rows in
   * SQLite builds a temporary b-tree, ~50 us a statement) and ordered here.
   */
  unordered?: boolean;
  /** A tag walk's value (COUNT leaves out what the filter's earlier values' walks counted). */
  tag?: { name: string; value: string };
  /** Also return each match's pubkey (NIP-45 HyperLogLog) / rank (NIP-50). */
  withPubkey: boolean;
  /** NIP-50: the walk reads the full-text index (searchWalk) instead of running chunkStatements. */
  search?: SearchCursor;
  at: number;
  after: number;
  done: boolean;
  /** Index entries in the next chunk. */
  chunk: number;
  /** The least a chunk shrinks to (CHUNK_MIN unless set: a COUNT's walks with costly exclusions go down to 1). */
  minChunk?: number;
  /** A search walk's matches read this many candidates per step (a COUNT's, whose residual may be costly). */
  keysSlice?: number;
  /** Index entries read so far. */
  read: number;
}

const ORDER: Record<Tie, string> = { "seq-desc": "DESC", "seq-asc": "ASC" };

/** The cursor: entries after (at, after) in walk order. `from` = at or before a boundary instead. */
function cursorSql(w: Walk, bound: "after" | "upTo"): string {
  const t = w.tCol;
  switch (w.tie) {
    case "seq-desc":
      return bound === "after" ? `(${t}, ${w.tieCol}) < (?, ?)` : `(${t}, ${w.tieCol}) >= (?, ?)`;
    case "seq-asc":
      return bound === "after" ? `${t} <= ? AND (${t} < ? OR ${w.tieCol} > ?)` : `${t} >= ? AND (${t} > ? OR ${w.tieCol} <= ?)`;
  }
}

function cursorParams(w: Walk, at: number, after: number): Param[] {
  switch (w.tie) {
    case "seq-desc":
      return [at, after];
    case "seq-asc":
      return [at, at, after];
  }
}

const orderSql = (w: Walk) => `${w.tCol} DESC, ${w.tieCol} ${ORDER[w.tie]}`;

function newWalk(w: Omit<Walk, "at" | "after" | "done" | "chunk" | "read" | "withPubkey">, until?: number): Walk {
  const after = w.tie === "seq-asc" ? -1 : MAX_TIME;
  // The cursor starts at `until` (inclusive: every tie value passes the first cursor).
  return { ...w, withPubkey: false, at: until ?? MAX_TIME, after, done: false, chunk: CHUNK_MIN, read: 0 };
}

/** One tag value, from the tag table's primary key: (name, value, created_at, seq) backwards. */
function tagWalk(name: string, value: string, f: Filter, residual: Residual): Walk {
  return newWalk(
    {
      index: "tags t",
      joined: "tags t CROSS JOIN events e ON e.seq = t.seq AND e.created_at = t.created_at",
      range: { where: ["t.name = ?", "t.value = ?"], params: [name, tagValue(value)] },
      since: f.since,
      residual,
      tie: "seq-desc",
      tCol: "t.created_at",
      tieCol: "t.seq",
      sCol: "t.seq",
      tag: { name, value },
    },
    f.until,
  );
}

/** An events index: (prefix…, created_at, seq DESC), walked backwards (db.ts, schemas 8 and 11). */
function eventsWalk(index: string, prefix: Residual, f: Filter, residual: Residual): Walk {
  return newWalk(
    {
      index: `events e INDEXED BY ${index}`,
      joined: `events e INDEXED BY ${index}`,
      range: prefix,
      since: f.since,
      residual,
      tie: "seq-asc",
      tCol: "e.created_at",
      tieCol: "e.seq",
      sCol: "e.seq",
    },
    f.until,
  );
}

function idsWalk(ids: string[], residual: Residual): Walk {
  return newWalk({
    index: "events e",
    joined: "events e",
    range: { where: ["e.id IN (SELECT unhex(value) FROM json_each(?))"], params: [JSON.stringify(ids)] },
    residual,
    tie: "seq-asc",
    tCol: "e.created_at",
    tieCol: "e.seq",
    sCol: "e.seq",
    single: true,
    unordered: ids.length <= MAX_UNORDERED_IDS,
  });
}

/** Ids lists up to this long are read whole, unordered (Walk.unordered). */
const MAX_UNORDERED_IDS = 64;

/**
 * NIP-50: the full-text index read newest first (rowid = seq), a bounded piece per step. FTS5
 * answers a MATCH of several words by stepping every word's list until they meet, inside one
 * statement: words that are each common but never together made one statement read every list
 * to its end (issue 36: 120 such words held two cores for ~190 ms a query, 2 addresses). So the
 * rarest word drives (SearchCursor), one word's list is read at a time in bounded statements, the
 * other words are checked against the driver's candidates in JS, and the rank (bm25) is computed
 * here too (rankSearch): SQLite's reads every word's whole list in each statement that asks it.
 */
function searchWalk(terms: string[], residual: Residual, maxSeq: number): Walk {
  // Only the residual (searchKeys) of the chunk walk's fields is read: searchStep reads the index itself.
  const w = newWalk({
    index: "events_fts f",
    joined: "events_fts f",
    range: { where: [], params: [] },
    residual,
    tie: "seq-desc",
    tCol: "NULL",
    tieCol: "f.rowid",
    sCol: "f.rowid",
  });
  w.search = { terms: [...terms], density: [], next: maxSeq + 1, maxSeq };
  return w;
}

/** Where a search walk is: its words (once measured, rarest first) and the driver's window in hand. */
interface SearchCursor {
  terms: string[];
  /** Postings per seq of each word near the top of the index (terms' order), once measured. */
  density: number[];
  /** The driver reads seqs below this next. */
  next: number;
  maxSeq: number;
  window?: SearchWindow;
}

/** A run of the driver's postings being checked against the other words. */
interface SearchWindow {
  /** Candidate seqs, highest first: the driver's, less those a word already ruled out. */
  cands: number[];
  /** The word being checked (index in terms; 0 is the driver). */
  term: number;
  /** How it is checked: a probe per candidate, or a read of its postings across the window. */
  mode?: "probe" | "scan";
  /** Progress of the check: candidates probed, or the seq the scan reads down from. */
  at: number;
  /** Candidates that hold the word so far (the scan's merge: the next candidate to compare is cands[pos]). */
  kept: number[];
  pos: number;
  /** The driver's list ended with this window. */
  last: boolean;
}

/** Postings read to measure a word (how far down the index its 256th one is). */
const SEARCH_PROBE = 256;
/** Driver postings per window, a word's postings per statement, candidates probed per step. */
const SEARCH_DRIVER = 512;
const SEARCH_SCAN = 2048;
const SEARCH_PROBES = 64;
/** A probe (one MATCH on one rowid) costs about this many postings read in a scan. */
const PROBE_COST = 128;

const ftsOne = (term: string): string => ftsExpression([term]);

/** One bounded piece of a search walk: a word measured, a driver window read, a word checked, or the matches' keys. */
function searchStep(cache: StatementCache, w: Walk): Key[] {
  const c = w.search!;
  if (c.density.length < c.terms.length) return (measureTerm(cache, w, c), []);
  const win = c.window;
  if (!win) return (readDriver(cache, w, c), []);
  if (win.term < c.terms.length && win.cands.length > 0) return (checkTerm(cache, c, win), []);
  if (w.keysSlice !== undefined && win.cands.length > w.keysSlice) return searchKeys(cache, w, win.cands.splice(0, w.keysSlice));
  c.window = undefined;
  if (win.last) w.done = true;
  return win.cands.length > 0 ? searchKeys(cache, w, win.cands) : [];
}

/** How common a word is near the top of the index; a word with no postings ends the walk. Then rarest first. */
function measureTerm(cache: StatementCache, w: Walk, c: SearchCursor): void {
  // Densities are measured below the newest seq, not below a snapshot cut far above it (tools, tests).
  if (c.density.length === 0)
    c.maxSeq = Math.min(c.maxSeq, (cache.get("SELECT max(seq) AS s FROM events").get() as { s: number | null }).s ?? 0);
  const term = c.terms[c.density.length]!;
  const nth = cache
    .get("SELECT rowid AS s FROM events_fts WHERE events_fts MATCH ? AND rowid <= ? ORDER BY rowid DESC LIMIT 1 OFFSET ?")
    .get(ftsOne(term), c.maxSeq, SEARCH_PROBE - 1) as { s: number } | null;
  if (nth) c.density.push(SEARCH_PROBE / (c.maxSeq - nth.s + 1));
  else {
    const n = (
      cache.get("SELECT count(*) AS n FROM events_fts WHERE events_fts MATCH ? AND rowid <= ?").get(ftsOne(term), c.maxSeq) as { n: number }
    ).n;
    if (n === 0) w.done = true;
    c.density.push(n / Math.max(1, c.maxSeq));
  }
  w.read += SEARCH_PROBE;
  if (c.density.length < c.terms.length) return;
  const order = c.terms.map((_, i) => i).sort((a, b) => c.density[a]! - c.density[b]!);
  c.terms = order.map((i) => c.terms[i]!);
  c.density = order.map((i) => c.density[i]!);
}

/** The driver's next SEARCH_DRIVER postings: the candidates of a window. */
function readDriver(cache: StatementCache, w: Walk, c: SearchCursor): void {
  const seqs = cache
    .get("SELECT rowid FROM events_fts WHERE events_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?")
    .values(ftsOne(c.terms[0]!), c.next, SEARCH_DRIVER)
    .map((r) => r[0] as number);
  w.read += seqs.length;
  if (seqs.length === 0) return void (w.done = true);
  c.next = seqs[seqs.length - 1]!;
  c.window = { cands: seqs, term: 1, at: 0, kept: [], pos: 0, last: seqs.length < SEARCH_DRIVER };
}

/**
 * Checks the window's candidates against one more word, a bounded statement (or SEARCH_PROBES
 * probes) at a time: probes when the candidates are few against the word's postings across the
 * window, else a read of those postings.
 */
function checkTerm(cache: StatementCache, c: SearchCursor, win: SearchWindow): void {
  const term = ftsOne(c.terms[win.term]!);
  const hi = win.cands[0]!;
  const lo = win.cands[win.cands.length - 1]!;
  if (!win.mode) {
    win.mode = win.cands.length * PROBE_COST < c.density[win.term]! * (hi - lo + 1) ? "probe" : "scan";
    win.at = win.mode === "probe" ? 0 : hi;
  }
  let finished: boolean;
  if (win.mode === "probe") {
    const probe = cache.get("SELECT 1 FROM events_fts WHERE events_fts MATCH ? AND rowid = ?");
    const end = Math.min(win.cands.length, win.at + SEARCH_PROBES);
    for (; win.at < end; win.at++) if (probe.get(term, win.cands[win.at]!)) win.kept.push(win.cands[win.at]!);
    finished = win.at === win.cands.length;
  } else {
    // Both lists are highest seq first: merged, and read only from the next candidate down.
    const seqs = cache
      .get("SELECT rowid FROM events_fts WHERE events_fts MATCH ? AND rowid <= ? AND rowid >= ? ORDER BY rowid DESC LIMIT ?")
      .values(term, win.at, lo, SEARCH_SCAN);
    const { cands } = win;
    for (const r of seqs) {
      const seq = r[0] as number;
      while (win.pos < cands.length && cands[win.pos]! > seq) win.pos++;
      if (win.pos === cands.length) break;
      if (cands[win.pos] === seq) win.kept.push(seq), win.pos++;
    }
    finished = seqs.length < SEARCH_SCAN || win.pos === cands.length;
    if (!finished) win.at = cands[win.pos]!;
  }
  if (!finished) return;
  win.cands = win.kept;
  win.kept = [];
  win.pos = 0;
  win.term++;
  win.mode = undefined;
}

/** The keys of a window's matches that pass the rest of the filter, highest seq first. */
function searchKeys(cache: StatementCache, w: Walk, seqs: number[]): Key[] {
  const where = w.residual.where.length > 0 ? `WHERE ${w.residual.where.join(" AND ")}` : "";
  const pk = w.withPubkey ? "e.pubkey" : "NULL";
  const rows = cache
    .get(
      `SELECT e.created_at AS t, e.seq AS s, lower(hex(e.id)) AS id, ${eventBytesSql("e")} AS b, ${pk} AS pk FROM json_each(?) j CROSS JOIN events e ON e.seq = j.value ${where}`,
    )
    .all(JSON.stringify(seqs), ...w.residual.params) as { t: number; s: number; id: string; b: number; pk: Uint8Array | null }[];
  return rows.map((r) => ({ created_at: r.t, s: r.s, id: r.id, b: r.b, pk: r.pk ?? undefined })).sort((a, b) => b.s - a.s);
}

/** FTS5's bm25 constants. */
const BM25_K1 = 1.2;
const BM25_B = 0.75;
/**
 * Postings one statement counts while ranking, and events read (and tokenized) per step: at most
 * RANK_EVENTS and RANK_BYTES of their JSON (one event at least). By count alone a step was up to
 * 16 MiB of JSON parsed and tokenized at the 128 KiB message limit (issue 36).
 */
const RANK_COUNT = 16_384;
const RANK_EVENTS = 128;
const RANK_BYTES = 1024 * 1024;
const NO_KINDS_SKIPPED: ReadonlySet<number> = new Set();

/**
 * Sets each key's rank: FTS5's bm25 (fts5_aux.c), computed here from its parts, each read in
 * bounded statements: the index's row count and average length (its averages record), how many
 * rows hold each word (counted a chunk at a time; one word's weight is the same for every row, so
 * a single word needs none), and each event's own words (its searchable text, tokenized as
 * the writer did: nips/nip50.ts indexText).
 */
function* rankSearch(cache: StatementCache, terms: string[], keys: Key[]): Generator<undefined, void, void> {
  if (keys.length < 2) return;
  const [rows, tokensTotal] = ftsAverages(cache);
  const idf: number[] = [];
  for (const term of terms) {
    let hits = 0;
    if (terms.length > 1) {
      const count = cache.get(
        "SELECT count(*) AS n, min(rowid) AS lo FROM (SELECT rowid FROM events_fts WHERE events_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?)",
      );
      for (let below = Number.MAX_SAFE_INTEGER; ; yield) {
        const r = count.get(ftsOne(term), below, RANK_COUNT) as { n: number; lo: number | null };
        hits += r.n;
        // In half the rows or more: the weight is the floor (1e-6), however many more there are.
        if (r.n < RANK_COUNT || r.lo === null || 2 * hits >= rows) break;
        below = r.lo;
      }
    }
    const x = Math.log((rows - hits + 0.5) / (hits + 0.5));
    idf.push(x <= 0 ? 1e-6 : x);
  }
  const avgdl = rows > 0 ? tokensTotal / rows : 1;
  // Each event's searchable parts (kind, tags, content) and its length in the index (its docsize record).
  const fetch = cache.get(
    "SELECT e.seq, e.kind, e.json, d.sz FROM json_each(?) j CROSS JOIN events e ON e.seq = j.value LEFT JOIN events_fts_docsize d ON d.id = e.seq",
  );
  const bySeq = new Map(keys.map((k) => [k.s, k]));
  for (let i = 0; i < keys.length; yield) {
    const part: number[] = [];
    let bytes = 0;
    while (i < keys.length && part.length < RANK_EVENTS && (part.length === 0 || bytes + keys[i]!.b <= RANK_BYTES)) {
      bytes += keys[i]!.b;
      part.push(keys[i++]!.s);
    }
    for (const [seq, kind, json, sz] of fetch.values(JSON.stringify(part)) as [number, number, string, Uint8Array | null][]) {
      const { tags, content } = JSON.parse(json) as Pick<NostrEvent, "tags" | "content">;
      const text = searchableText({ kind, tags, content } as NostrEvent, NO_KINDS_SKIPPED);
      const tf = frequencies(text, terms);
      const d = sz ? varint(sz, 0)[0] : tokens(text).length;
      let score = 0;
      for (let t = 0; t < terms.length; t++)
        score += (idf[t]! * (tf[t]! * (BM25_K1 + 1))) / (tf[t]! + BM25_K1 * (1 - BM25_B + (BM25_B * d) / avgdl));
      bySeq.get(seq)!.r = -score;
    }
  }
}

/**
 * How often each term is a word of the text, as nips/nip50.ts tokens would count it. ASCII text
 * (most of it) is searched in place: tokens are then the runs of [a-z0-9] of its lower case.
 */
function frequencies(text: string, terms: string[]): number[] {
  if (!ASCII.test(text)) {
    const words = tokens(text);
    return terms.map((t) => words.reduce((n, w) => (w === t ? n + 1 : n), 0));
  }
  const lower = text.toLowerCase();
  return terms.map((t) => {
    let n = 0;
    for (let i = lower.indexOf(t); i >= 0; i = lower.indexOf(t, i + t.length))
      if (!WORD_CHAR.test(lower[i - 1] ?? " ") && !WORD_CHAR.test(lower[i + t.length] ?? " ")) n++;
    return n;
  });
}

const ASCII = /^[\x00-\x7f]*$/;
const WORD_CHAR = /[a-z0-9]/;

/** The full-text index's row count and total tokens: its averages record (rowid 1 of its data table), as bm25 reads them. */
function ftsAverages(cache: StatementCache): [number, number] {
  const row = cache.get("SELECT block FROM events_fts_data WHERE id = 1").get() as { block: Uint8Array } | null;
  if (!row) return [0, 0];
  const [rows, at] = varint(row.block, 0);
  const [total] = varint(row.block, at);
  return [rows, total];
}

/** SQLite's varint (FTS5 writes its records with it): big-endian 7 bits a byte, the 9th byte whole. */
function varint(b: Uint8Array, at: number): [number, number] {
  let v = 0;
  for (let i = 0; i < 8; i++) {
    const byte = b[at + i] ?? 0;
    v = v * 128 + (byte & 0x7f);
    if ((byte & 0x80) === 0) return [v, at + i + 1];
  }
  return [v * 256 + (b[at + 8] ?? 0), at + 9];
}

const fewestValues = (f: Filter, keys: string[]): string =>
  keys.reduce((best, k) => (f[k as `#${string}`]!.length < f[best as `#${string}`]!.length ? k : best));

/** The walks that together cover every candidate of a filter (the time walk of a feed aside). */
function walksFor(f: Filter, scope: ReadScope): { walks: Walk[]; ranked: boolean } {
  const terms = f.search !== undefined ? searchTerms(f.search) : [];
  if (terms.length > 0) return { walks: [searchWalk(terms, residualOf(f, scope, {}), scope.maxSeq)], ranked: true };
  if (f.ids) return { walks: [idsWalk(f.ids, residualOf(f, scope, { ids: true }))], ranked: false };
  if (f.authors) {
    const pairs = f.kinds !== undefined && f.authors.length * f.kinds.length <= MAX_PAIR_WALKS;
    const res = residualOf(f, scope, { authors: true, kinds: pairs, time: true });
    const walks: Walk[] = [];
    for (const a of unique(f.authors)) {
      if (pairs)
        for (const k of unique(f.kinds!))
          walks.push(eventsWalk("events_pubkey_kind", { where: ["e.pubkey = unhex(?)", "e.kind = ?"], params: [a, k] }, f, res));
      else walks.push(eventsWalk("events_pubkey", { where: ["e.pubkey = unhex(?)"], params: [a] }, f, res));
    }
    return { walks, ranked: false };
  }
  const tagKeys = TAG_KEYS(f);
  if (tagKeys.length > 0) {
    const driver = fewestValues(f, tagKeys);
    const res = residualOf(f, scope, { tag: driver, time: true });
    return { walks: unique(f[driver as `#${string}`]!).map((v) => tagWalk(driver.slice(1), v, f, res)), ranked: false };
  }
  if (f.kinds) {
    const res = residualOf(f, scope, { kinds: true, time: true });
    return { walks: unique(f.kinds).map((k) => eventsWalk("events_kind", { where: ["e.kind = ?"], params: [k] }, f, res)), ranked: false };
  }
  return { walks: [timeWalk(f, scope)], ranked: false };
}

/** A list without repeats: one walk per value, so no walk reads what another did (COUNT counts each once). */
const unique = <T>(values: readonly T[]): T[] => [...new Set(values)];

const timeWalk = (f: Filter, scope: ReadScope): Walk =>
  eventsWalk("events_created", { where: [], params: [] }, f, residualOf(f, scope, { time: true }));

/** A matching candidate: enough to order, dedupe, count and fetch it. */
interface Key {
  created_at: number;
  s: number;
  id: string;
  /** Bytes of its JSON. */
  b: number;
  pk?: Uint8Array;
  r?: number;
}

/** Prepared statements keyed by SQL text (= plan shape), bounded. */
export class StatementCache {
  private readonly map = new Map<string, Statement>();
  /** Temp tables of NIP-29 long membership lists (groupList), by the packed list. */
  private readonly lists = new Map<string, GroupList>();
  private listsMade = 0;
  constructor(
    private readonly db: Database,
    private readonly max = 256,
  ) {}

  /**
   * A temp table (this connection's) holding the ids of a packed list (a space before each) as
   * tag rows hold them (tagValue), named `temp.…` for `x IN temp.…`: the same list (a reader's
   * memberships stay the same until they join or leave) is made once and reused. Held until
   * releaseList; unheld lists beyond the newest MAX_LISTS are dropped.
   */
  groupList(packed: string): GroupList {
    let list = this.lists.get(packed);
    if (list) this.lists.delete(packed);
    else {
      const table = `temp.group_list_${++this.listsMade}`;
      this.db.exec(`CREATE TEMP TABLE ${table.slice(5)} (v TEXT PRIMARY KEY) WITHOUT ROWID`);
      this.db
        .prepare(`INSERT OR IGNORE INTO ${table} SELECT ${tagValueSql("value")} FROM json_each(?)`)
        .run(JSON.stringify(packed.slice(1).split(" ")));
      list = { table, users: 0 };
    }
    this.lists.set(packed, list);
    list.users++;
    this.dropUnheldLists();
    return list;
  }

  releaseList(list: GroupList): void {
    list.users--;
  }

  /** Oldest first: a list in use by a job paused between its slices is never dropped. */
  private dropUnheldLists(): void {
    let extra = this.lists.size - MAX_LISTS;
    for (const [key, list] of this.lists) {
      if (extra <= 0) return;
      if (list.users > 0) continue;
      try {
        this.db.exec(`DROP TABLE ${list.table}`);
      } catch {
        // A statement of this connection still pending ("database table is locked"): next time.
        return;
      }
      this.lists.delete(key);
      extra--;
    }
  }
  get(sql: string): Statement {
    let st = this.map.get(sql);
    if (st) {
      this.map.delete(sql);
      this.map.set(sql, st);
      return st;
    }
    st = this.db.prepare(sql);
    this.map.set(sql, st);
    // The oldest leaves the cache but is not finalized: a job paused between its slices may still
    // hold it (fetchRows, rankSearch), and a flood of distinct filters (COUNT's exclusions vary
    // with them) would close it under that job. Unreferenced, the collector finalizes it.
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
    return st;
  }
}

/** A long membership list's temp table (StatementCache.groupList). */
interface GroupList {
  table: string;
  /** Jobs running with it. */
  users: number;
}

/** Unheld membership lists a connection keeps (a few hundred KB each at 10,000 groups). */
const MAX_LISTS = 16;

/** The statements of a chunk: where it ends (the chunk-th entry ahead), and its matches up to there. */
function chunkStatements(
  w: Walk,
  need: number,
  json = false,
  bounded = false,
): {
  boundary?: { sql: string; params: Param[] };
  matches: (upTo?: [number, number]) => { sql: string; params: Param[] };
  where: (upTo?: [number, number]) => { where: string; params: Param[] };
} {
  const cursor = cursorSql(w, "after");
  const after = cursorParams(w, w.at, w.after);
  const since = w.since === undefined ? [] : [`${w.tCol} >= ?`];
  const sinceParams = w.since === undefined ? [] : [w.since];
  const boundary =
    w.single || (!w.residual.selective && !bounded)
      ? undefined
      : {
          sql: `SELECT ${w.tCol} AS t, ${w.tieCol} AS tie FROM ${w.index} WHERE ${[...w.range.where, ...since, cursor].join(" AND ")} ORDER BY ${orderSql(w)} LIMIT 1 OFFSET ?`,
          params: [...w.range.params, ...sinceParams, ...after, w.chunk - 1],
        };
  const whereOf = (upTo?: [number, number]) => {
    const where = [...w.range.where];
    const params: Param[] = [...w.range.params];
    where.push(cursor);
    params.push(...after);
    if (upTo) where.push(cursorSql(w, "upTo")), params.push(...cursorParams(w, upTo[0], upTo[1]));
    else where.push(...since), params.push(...sinceParams);
    where.push(...w.residual.where);
    params.push(...w.residual.params);
    return { where: where.join(" AND "), params };
  };
  const matches = (upTo?: [number, number]) => {
    const { where, params } = whereOf(upTo);
    // With the JSON (stepWithJson): only what it reads (each column of a row object costs),
    // created_at once (t), pubkey and sig as bytes (eventJson).
    const cols = json
      ? `${w.tCol} AS t, ${w.tieCol} AS tie, lower(hex(e.id)) AS id, e.pubkey AS pk, e.kind AS k, e.json AS j, e.sig AS g`
      : `${w.tCol} AS t, ${w.sCol} AS s, ${w.tieCol} AS tie, lower(hex(e.id)) AS id, ${eventBytesSql("e")} AS b, ${w.withPubkey ? "e.pubkey" : "NULL"} AS pk`;
    return {
      sql: `SELECT ${cols} FROM ${w.joined} WHERE ${where} ORDER BY ${orderSql(w)} LIMIT ?`,
      params: [...params, need],
    };
  };
  return { boundary, matches, where: whereOf };
}

/**
 * The first chunk statements of each walk of a filter. Exported for tests: test/differential.test.ts
 * checks with EXPLAIN QUERY PLAN that each is answered in index order (no outcome shows it).
 */
export function planStatements(f: Filter, scope: ReadScope): { sql: string; params: Param[] }[] {
  return walksFor(f, scope).walks.flatMap((w) => {
    if (w.search) return [];
    const c = chunkStatements(w, 10);
    return c.boundary ? [c.boundary, c.matches([0, 0])] : [c.matches()];
  });
}

/**
 * One chunk of a walk: at most `need` matches among its next `chunk` index entries, and the
 * walk moved past what it read. The boundary (an index-only walk of `chunk` entries) bounds
 * the work of the statement that checks candidates, however few of them match.
 */
function step(cache: StatementCache, w: Walk, need: number): Key[] {
  if (w.unordered) return stepWhole(cache, w, need);
  if (w.search) return searchStep(cache, w);
  const started = performance.now();
  const c = chunkStatements(w, Math.max(1, need));
  const upTo = boundaryOf(cache, c);
  const m = c.matches(upTo);
  const rows = cache.get(m.sql).all(...m.params) as {
    t: number;
    s: number;
    tie: number;
    id: string;
    b: number;
    pk: Uint8Array | null;
  }[];
  advance(w, rows[rows.length - 1], rows.length >= need, upTo);
  adapt(w, started);
  return rows.map((r) => ({ created_at: r.t, s: r.s, id: r.id, b: r.b, pk: r.pk ?? undefined }));
}

/** An unordered walk (a short ids list): every match in one statement, the newest `need` kept. */
function stepWhole(cache: StatementCache, w: Walk, need: number): Key[] {
  const where = [...w.range.where, ...w.residual.where].join(" AND ");
  const cols = `${w.tCol} AS t, ${w.sCol} AS s, lower(hex(e.id)) AS id, ${eventBytesSql("e")} AS b, ${w.withPubkey ? "e.pubkey" : "NULL"} AS pk`;
  const rows = cache.get(`SELECT ${cols} FROM ${w.joined} WHERE ${where}`).all(...w.range.params, ...w.residual.params) as {
    t: number;
    s: number;
    id: string;
    b: number;
    pk: Uint8Array | null;
  }[];
  w.done = true;
  w.read += rows.length;
  const keys: Key[] = rows.map((r) => ({ created_at: r.t, s: r.s, id: r.id, b: r.b, pk: r.pk ?? undefined }));
  return keys.sort(newestFirst).slice(0, Math.max(1, need));
}

/** Moves a walk past what a chunk read: the last row taken, else the boundary, else its end. */
function advance(w: Walk, last: { t: number; tie: number } | undefined, stoppedEarly: boolean, upTo: [number, number] | undefined): void {
  if (stoppedEarly && last) {
    w.at = last.t;
    w.after = last.tie;
  } else if (upTo) {
    w.at = upTo[0];
    w.after = upTo[1];
  } else w.done = true;
}

function boundaryOf(cache: StatementCache, c: ReturnType<typeof chunkStatements>): [number, number] | undefined {
  if (!c.boundary) return undefined;
  const b = cache.get(c.boundary.sql).get(...c.boundary.params) as { t: number | null; tie: number } | null;
  return b ? [b.t ?? 0, b.tie] : undefined;
}

function adapt(w: Walk, started: number, max = CHUNK_MAX): void {
  w.read += w.chunk;
  const ms = performance.now() - started;
  if (ms > CHUNK_TARGET_MS) w.chunk = Math.max(w.minChunk ?? CHUNK_MIN, w.chunk >> 1);
  else if (ms < CHUNK_TARGET_MS / 4) w.chunk = Math.min(max, w.chunk << 1);
}

interface Row {
  created_at: number;
  id: string;
  json: string;
}

/** Like step, with the events' JSON read in the same statement, up to FETCH_BYTES (one row at least). */
function stepWithJson(cache: StatementCache, w: Walk, need: number): Row[] {
  const started = performance.now();
  const c = chunkStatements(w, need, true);
  const upTo = boundaryOf(cache, c);
  const m = c.matches(upTo);
  const out: Row[] = [];
  let bytes = 0;
  let last: { t: number; tie: number } | undefined;
  let early = false;
  type R = { t: number; tie: number; id: string; pk: Uint8Array; k: number; j: string; g: Uint8Array | null };
  for (const r of cache.get(m.sql).iterate(...m.params) as IterableIterator<R>) {
    const json = eventJson(r.id, r.pk, r.t, r.k, r.j, r.g);
    out.push({ created_at: r.t, id: r.id, json });
    last = r;
    bytes += json.length;
    if (out.length >= need || bytes >= FETCH_BYTES) {
      early = true;
      break;
    }
  }
  advance(w, last, early, upTo);
  adapt(w, started);
  return out;
}

/**
 * A REQ of one filter answered by one walk (a profile, a thread, one hashtag, one kind): the
 * walk's order is the answer's but for ties of created_at, so rows are handed on as soon as
 * nothing unread can come before them, and held only while they tie with the walk's frontier.
 */
function* singleWalk(cache: StatementCache, w: Walk, limit: number, window?: Window): ReadSteps<Row | null | undefined> {
  w.chunk = window?.chunk ?? Math.min(CHUNK_MAX / 4, Math.max(CHUNK_MIN, limit + 1));
  let emitted = 0;
  let held: Row[] = [];
  let last: Row | null = null;
  /** The answer is full but for ties of its last created_at (floor): read them a chunk at a time. */
  let settling = false;
  while (!w.done) {
    if (window) w.chunk = Math.min(w.chunk, window.entries - w.read);
    held.push(...stepWithJson(cache, w, Math.max(CHUNK_MIN, limit - emitted - held.length, settling ? w.chunk : 0)));
    held.sort(newestFirst);
    if (w.done) break;
    // Unread entries are at or below the frontier: rows above it are final.
    let final = 0;
    while (final < held.length && held[final]!.created_at > w.at) final++;
    const take = Math.min(final, limit - emitted);
    if (take > 0) {
      yield held.slice(0, take).map((r) => r.json);
      emitted += take;
      last = held[take - 1]!;
      held = held.slice(take);
    }
    if (emitted >= limit) return;
    const want = limit - emitted;
    if (held.length >= want) {
      if (w.at < held[want - 1]!.created_at) break;
      // Only ties of the last kept created_at are still open: read no older entries, and keep
      // only the best `want` rows (a tie read later can only push the others further out), so
      // thousands of events in one second cost a linear walk and `want` rows of memory.
      floor(w, held[want - 1]!.created_at);
      held.length = want;
      settling = true;
    }
    // Past the window with the answer still open: the caller finishes it another way.
    if (window && w.read >= window.entries) return last;
    yield;
  }
  const rest = held.slice(0, limit - emitted).map((r) => r.json);
  if (rest.length > 0) yield rest;
}

/** A bound on a single walk: it gives up after this many index entries, reading chunks of `chunk` at first. */
interface Window {
  entries: number;
  chunk: number;
}

/**
 * Ends a walk's range at `since` (inclusive) once the answer is full down to that created_at:
 * older entries cannot displace what is kept, only ties of it can. Without it the walk would
 * read another chunk (limit rows) to settle the ties of one second.
 */
function floor(w: Walk, since: number): void {
  if (w.since === undefined || w.since < since) w.since = since;
}

const byRank = (a: Key, b: Key) => (a.r ?? 0) - (b.r ?? 0) || newestFirst(a, b);

/** The newest `limit` matches of a set of walks, deduplicated by seq. */
class TopKeys {
  private keys: Key[] = [];
  private readonly seqs = new Set<number>();
  /** Keys were added since the last sort. */
  private dirty = false;
  constructor(private readonly limit: number) {}
  add(ks: Key[]): void {
    for (const k of ks) if (!this.seqs.has(k.s)) this.seqs.add(k.s), this.keys.push(k), (this.dirty = true);
    if (this.keys.length >= 2 * this.limit) this.trim();
  }
  /**
   * Full, and every key the walk left unread comes after the worst kept: the walk can stop. A
   * walk may still hold ties of its cursor's created_at (its ties are in seq order, the
   * answer's in id order).
   */
  settled(w: Walk): boolean {
    if (this.keys.length < this.limit) return false;
    this.trim();
    const worst = this.keys[this.keys.length - 1]!;
    return w.at < worst.created_at;
  }
  result(): Key[] {
    this.trim();
    return this.keys;
  }
  /** The last key kept, once full: anything older can no longer be in the answer. */
  worst(): Key | undefined {
    if (this.keys.length < this.limit) return undefined;
    this.trim();
    return this.keys[this.keys.length - 1];
  }
  private trim(): void {
    if (!this.dirty) return;
    this.dirty = false;
    this.keys.sort(newestFirst);
    if (this.keys.length > this.limit) {
      for (const k of this.keys.slice(this.limit)) this.seqs.delete(k.s);
      this.keys.length = this.limit;
    }
  }
}

/** One filter's newest `limit` keys (search: the most relevant among the newest matches). */
function* filterKeys(
  cache: StatementCache,
  f: Filter,
  limit: number,
  scope: ReadScope,
  recentFirst = true,
): Generator<undefined, Key[], void> {
  const { walks, ranked } = walksFor(f, scope);
  if (ranked) {
    const matches: Key[] = [];
    const w = walks[0]!;
    const window = Math.max(limit, SEARCH_WINDOW);
    while (!w.done && matches.length < window) {
      matches.push(...step(cache, w, window - matches.length));
      yield;
    }
    // The newest `window` matches (a search walk yields them highest seq first).
    if (matches.length > window) matches.length = window;
    yield* rankSearch(cache, w.search!.terms, matches);
    return matches.sort(byRank).slice(0, limit);
  }
  const top = new TopKeys(limit);
  if (recentFirst && isFeed(f)) {
    // The newest recentWindow events of the relay first (see planTuning).
    const w = timeWalk(f, scope);
    w.chunk = Math.min(CHUNK_MAX / 4, planTuning.recentWindow);
    while (!w.done && w.read < planTuning.recentWindow && !top.settled(w)) {
      w.chunk = Math.min(w.chunk, planTuning.recentWindow - w.read);
      top.add(step(cache, w, limit));
      yield;
    }
    if (w.done || top.settled(w)) return top.result();
  }
  for (const w of walks) {
    w.chunk = Math.min(CHUNK_MAX / 4, Math.max(CHUNK_MIN, limit + 1));
    const full = top.worst();
    if (full) floor(w, full.created_at);
    while (!w.done && !top.settled(w)) {
      top.add(step(cache, w, limit));
      const worst = top.worst();
      if (worst) floor(w, worst.created_at);
      yield;
    }
  }
  return top.result();
}

const isFeed = (f: Filter): boolean => f.authors !== undefined && f.authors.length > RECENT_FIRST_AUTHORS && !f.ids;

/**
 * A REQ of one feed filter: the newest recentWindow events of the relay walked as a single walk
 * (the time index is in NIP-01 order and carries pubkey and kind, so rows are read, with their
 * JSON, only for matches). If the window does not settle the answer, the full plan's keys finish
 * it, after the last row already sent.
 */
function* feedJob(cache: StatementCache, f: Filter, limit: number, job: QueryJob): ReadSteps<void> {
  const window = { entries: planTuning.recentWindow, chunk: Math.min(FEED_CHUNK, planTuning.recentWindow) };
  const last = yield* singleWalk(cache, timeWalk(f, job), limit, window);
  if (last === undefined) return;
  const keys = (yield* filterKeys(cache, f, limit, job, false)).filter((k) => !last || newestFirst(last, k) < 0);
  yield* fetchRows(cache, keys);
}

/** The first chunk of a feed's time walk (index entries): most feeds of the bench find their 50 in ~270. */
const FEED_CHUNK = 512;

/** REQ: every filter's keys, merged and ordered, then the events' JSON in small batches. */
function* queryJob(cache: StatementCache, job: QueryJob): ReadSteps<void> {
  if (job.filters.length === 1 && job.limits[0]! > 0) {
    const f = job.filters[0]!;
    const { walks, ranked } = walksFor(f, job);
    if (isFeed(f) && !ranked) return yield* feedJob(cache, f, job.limits[0]!, job);
    if (walks.length === 1 && !ranked && !walks[0]!.unordered) {
      yield* singleWalk(cache, walks[0]!, job.limits[0]!);
      return;
    }
  }
  const chosen = new Map<number, Key>();
  for (let i = 0; i < job.filters.length; i++) {
    const limit = job.limits[i]!;
    if (limit <= 0) continue;
    for (const k of yield* filterKeys(cache, job.filters[i]!, limit, job)) if (!chosen.has(k.s)) chosen.set(k.s, k);
  }
  const keys = [...chosen.values()];
  // Search results keep their relevance order; everything else is merged by time.
  if (!job.filters.some((f) => f.search !== undefined && searchTerms(f.search).length > 0)) keys.sort(newestFirst);
  yield* fetchRows(cache, keys);
}

/** The events' JSON of keys, in their order, in batches of at most FETCH_BYTES (one event at least). */
function* fetchRows(cache: StatementCache, keys: Key[]): ReadSteps<void> {
  const fetch = cache.get(`SELECT e.seq, ${eventColsSql("e")} FROM events e WHERE e.seq IN (SELECT value FROM json_each(?))`);
  for (let i = 0; i < keys.length; ) {
    // As many events as fit in FETCH_BYTES (at least one), at most FETCH_MAX.
    let end = i + 1;
    for (let bytes = keys[i]!.b; end < keys.length && end - i < FETCH_MAX && bytes + keys[end]!.b <= FETCH_BYTES; end++)
      bytes += keys[end]!.b;
    const part = keys.slice(i, end);
    i = end;
    const bySeq = new Map<number, string>();
    for (const r of fetch.values(JSON.stringify(part.map((k) => k.s))) as EventColumns[]) bySeq.set(r[0], rowJson(r));
    // An event deleted since its key was read is left out.
    const out: string[] = [];
    for (const k of part) {
      const json = bySeq.get(k.s);
      if (json !== undefined) out.push(json);
    }
    yield out;
  }
}

/** queryJob, its rows as EVENT frames when the job asks for them (QueryJob.frame). */
export function queryFrames(cache: StatementCache, job: QueryJob): ReadSteps<void> {
  const steps = withGroupLists(cache, job, () => queryJob(cache, job));
  return job.frame === undefined ? steps : framed(steps, job.frame);
}

function* framed(steps: ReadSteps<void>, prefix: string): ReadSteps<void> {
  for (;;) {
    const r = steps.next();
    if (r.done) return;
    yield r.value?.map((json) => `${prefix}${json}]`);
  }
}

/**
 * NIP-45: distinct events matching any filter; HyperLogLog registers over their pubkeys.
 *
 * Exact, and in constant memory: nothing remembers which events were counted. Each event is
 * counted by the first walk that reaches it: a filter's walks leave out what the earlier filters
 * match (their conditions, negated, join the residual), and a tag walk leaves out the events of
 * the filter's earlier values; the other walks of one filter cover disjoint ranges (one author,
 * kind or pair each, values without repeats). Each walk is counted a chunk of index entries at a
 * time by `count(*)` (the HLL reads the chunk's pubkeys), so a COUNT holds a cursor, not rows:
 * a Set of every counted seq was ~10 MB per COUNT at 200k events, and a reader interleaves
 * hundreds of jobs.
 */
export function countJob(cache: StatementCache, job: CountJob): ReadSteps<{ count: number; hll?: string }> {
  return withGroupLists(cache, job, () => countSteps(cache, job));
}

function* countSteps(cache: StatementCache, job: CountJob): ReadSteps<{ count: number; hll?: string }> {
  const hll = job.hllOffset === undefined ? undefined : new Hll(job.hllOffset);
  if (
    !hll &&
    job.filters.length === 1 &&
    Object.keys(job.filters[0]!).length === 0 &&
    job.now === 0 &&
    !job.visibility?.restrictedKinds.length &&
    !job.visibility?.groups &&
    !job.visibility?.hidden
  ) {
    // Everything (the status page's total, asked every 10 s by the dashboard's history).
    return yield* countAll(cache, job.maxSeq);
  }
  let count = 0;
  /** The conditions of the filters counted so far, negated. */
  const earlier: Residual = { where: [], params: [] };
  /** Values of those conditions: what checking one row against them costs, about (a probe each). */
  let earlierValues = 0;
  for (const f of job.filters) {
    const own = matchOf(f);
    const walks = countWalks(f, job, earlierValues > 0 ? rowsPerStep(earlierValues) : undefined);
    for (const [i, w] of walks.entries()) {
      const exclude: Residual = { where: [...earlier.where], params: [...earlier.params] };
      if (w.tag && i > 0) {
        const before = walks.slice(0, i).map((x) => x.tag!.value);
        const sub: Residual = { where: [], params: [] };
        inList(sub, "x.value", before, "tag");
        exclude.where.push(
          `NOT EXISTS (SELECT 1 FROM tags x WHERE x.name = ? AND ${sub.where[0]} AND x.created_at = e.created_at AND x.seq = e.seq)`,
        );
        exclude.params.push(w.tag.name, ...sub.params);
      }
      w.residual = {
        where: [...w.residual.where, ...exclude.where],
        params: [...w.residual.params, ...exclude.params],
        selective: w.residual.selective || exclude.where.length > 0,
      };
      // Exclusions cost each row of a chunk a check of every earlier filter: start at what they
      // allow, and let a slow chunk shrink to one row (a step is one statement: it cannot be cut short).
      const rows = rowsPerStep(earlierValues + (w.tag ? i : 0));
      w.chunk = exclude.where.length > 0 ? rows : 256;
      if (exclude.where.length > 0) w.minChunk = 1;
      if (w.search) w.keysSlice = exclude.where.length > 0 ? rows : SEARCH_DRIVER;
      w.withPubkey = hll !== undefined;
      while (!w.done) {
        count += w.search ? countKeys(searchStep(cache, w), hll) : countStep(cache, w, hll);
        yield;
      }
    }
    // A filter without conditions matches every event: nothing is left for the next ones.
    if (own.where.length === 0) break;
    earlier.where.push(`NOT coalesce((${own.where.join(" AND ")}), 0)`);
    earlier.params.push(...own.params);
    earlierValues += valuesOf(f);
  }
  return hll ? { count, hll: hll.hex() } : { count };
}

/**
 * Index probes a COUNT's step may spend checking its rows against the earlier filters (one per
 * value of their lists, about 1-2 us each): 19 filters of 1,000 tag values each read one row a step.
 */
const COUNT_EXCLUSION_PROBES = 4096;

/** Rows a COUNT's step reads first when each is checked against `values` values of earlier filters. */
const rowsPerStep = (values: number): number =>
  values === 0 ? CHUNK_MIN : Math.max(1, Math.min(CHUNK_MIN, Math.floor(COUNT_EXCLUSION_PROBES / values)));

/** The values of a filter's lists (and search words): what checking a row against it costs. */
function valuesOf(f: Filter): number {
  let n = (f.ids?.length ?? 0) + (f.authors?.length ?? 0) + (f.kinds?.length ?? 0) + 1;
  for (const key of TAG_KEYS(f)) n += f[key as `#${string}`]!.length;
  if (f.search !== undefined) n += searchTerms(f.search).length;
  return n;
}

/**
 * A filter's walks for a COUNT: an ids list, which a query reads in one statement, is split into
 * walks of `rows` ids each when the rows are also checked against earlier filters (the ids are
 * made unique first: each event is counted by the one walk holding its id).
 */
function countWalks(f: Filter, scope: ReadScope, rows: number | undefined): Walk[] {
  const { walks } = walksFor(f, scope);
  if (rows === undefined || !f.ids || walks.length !== 1 || walks[0]!.search) return walks;
  const ids = unique(f.ids);
  const residual = walks[0]!.residual;
  const out: Walk[] = [];
  for (let i = 0; i < ids.length; i += rows) out.push(idsWalk(ids.slice(i, i + rows), residual));
  return out;
}

/** What makes an event match a filter, as SQL on `e` (the scope's conditions aside: every filter shares them). */
function matchOf(f: Filter): Residual {
  const r = conditionsOf(f, {});
  const terms = f.search !== undefined ? searchTerms(f.search) : [];
  // One word a probe: FTS5 answers a MATCH of several words by stepping their lists until they
  // meet, even with its rowid fixed, so a probe of words that never meet is not bounded (searchWalk).
  for (const t of terms) {
    r.where.push("EXISTS (SELECT 1 FROM events_fts WHERE events_fts MATCH ? AND events_fts.rowid = e.seq)");
    r.params.push(ftsOne(t));
  }
  return r;
}

/** A search step's matches counted (their pubkeys into the HLL). */
function countKeys(keys: Key[], hll: Hll | undefined): number {
  if (hll) for (const k of keys) hll.add(k.pk!);
  return keys.length;
}

/** Index entries one statement of a count may read, at most (count(*) of entries is cheap). */
const COUNT_CHUNK_MAX = 16_384;

/** One chunk of a walk counted (its matches' pubkeys into the HLL), the walk moved past it. */
function countStep(cache: StatementCache, w: Walk, hll: Hll | undefined): number {
  const started = performance.now();
  const c = chunkStatements(w, 0, false, true);
  const upTo = boundaryOf(cache, c);
  const { where, params } = c.where(upTo);
  let n = 0;
  if (hll)
    for (const r of cache.get(`SELECT e.pubkey AS pk FROM ${w.joined} WHERE ${where}`).iterate(...params) as IterableIterator<{
      pk: Uint8Array;
    }>)
      hll.add(r.pk), n++;
  else n = (cache.get(`SELECT count(*) AS n FROM ${w.joined} WHERE ${where}`).get(...params) as { n: number }).n;
  advance(w, undefined, false, upTo);
  adapt(w, started, COUNT_CHUNK_MAX);
  return n;
}

/** Entries of the time index one slice of countAll reads (~5 ms here). */
const COUNT_CHUNK = 20_000;

/**
 * Every stored event up to maxSeq, counted on the time index (entries of ~50 bytes, not the
 * table's rows: 10 ms instead of 50 at 100k events) one range of created_at at a time, so that
 * the reader takes other jobs between ranges. In one statement this held a reader for half a
 * second at 1M events, every 10 s.
 */
function* countAll(cache: StatementCache, maxSeq: number): ReadSteps<{ count: number }> {
  const boundary = cache.get(
    "SELECT created_at AS t FROM events INDEXED BY events_created WHERE created_at >= ? ORDER BY created_at LIMIT 1 OFFSET ?",
  );
  const range = cache.get(
    "SELECT count(*) AS n FROM events INDEXED BY events_created WHERE created_at >= ? AND created_at < ? AND seq <= ?",
  );
  let count = 0;
  for (let from = Number.NEGATIVE_INFINITY; ; yield) {
    const b = boundary.get(from, COUNT_CHUNK) as { t: number } | null;
    // The last range is open; more than a chunk in one second is a range of its own.
    const to = b === null ? Number.POSITIVE_INFINITY : Math.max(b.t, from + 1);
    count += (range.get(from, to, maxSeq) as { n: number }).n;
    if (b === null) return { count };
    from = to;
  }
}

/** NIP-77: (created_at, id) of every matching event, up to max (limit is ignored). */
export function negJob(cache: StatementCache, job: NegJob): ReadSteps<NegItems> {
  return withGroupLists(cache, job, () => negSteps(cache, job));
}

function* negSteps(cache: StatementCache, job: NegJob): ReadSteps<NegItems> {
  const { limit: _ignored, ...filter } = job.filter;
  const { walks } = walksFor(filter, job);
  const seen = new Set<number>();
  const timestamps: number[] = [];
  const ids: string[] = [];
  for (const w of walks) {
    w.chunk = 256;
    while (!w.done) {
      for (const k of step(cache, w, job.max + 1 - ids.length)) {
        if (seen.has(k.s)) continue;
        seen.add(k.s);
        if (ids.length === job.max) return packNegItems(timestamps, ids, true);
        timestamps.push(k.created_at);
        ids.push(k.id);
      }
      yield;
    }
  }
  return packNegItems(timestamps, ids, false);
}

/** Runs a job to its end in one go (in-memory stores, tests, offline tools). */
export function runToEnd<T>(steps: ReadSteps<T>, rows?: string[]): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    if (rows && r.value) for (const json of r.value) rows.push(json);
  }
}

export function runQuery(cache: StatementCache, job: QueryJob): string[] {
  const rows: string[] = [];
  runToEnd(
    withGroupLists(cache, job, () => queryJob(cache, job)),
    rows,
  );
  return rows;
}

export const runNegItems = (cache: StatementCache, job: NegJob) => runToEnd(negJob(cache, job));
