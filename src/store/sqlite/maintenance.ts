// SQL for the operator commands (export, backup, compact, stats). A relay may be running on the
// same file: WAL lets these read beside its writer; only compact takes the write lock.
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { isAddressable } from "../../protocol/kinds.ts";
import type { EventHead, ExportRow, ExportScope, StoreStats } from "../types.ts";
import { type EventColumns, eventColsSql, openDatabase, rowJson } from "./db.ts";

/** A connection, for the operator commands to hand back to the functions here. */
export type Db = Database;

/** The database file is missing or is not a bunstr database. */
export class NoDatabaseError extends Error {
  /** True when there is no file at all (a wrong path), not a file that is not a database. */
  constructor(
    message: string,
    readonly missing = false,
  ) {
    super(message);
  }
}

/**
 * Opens an existing bunstr database. Read-only connections never create or migrate anything;
 * a read-write one migrates like the relay does.
 */
export function openExisting(path: string, mode: "readonly" | "readwrite"): Database {
  if (!existsSync(path)) throw new NoDatabaseError(`no database at ${path}`, true);
  const db = openDatabase({ path, synchronous: "normal", readonly: mode === "readonly" });
  try {
    const { user_version } = db.query("PRAGMA user_version").get() as { user_version: number };
    if (user_version === 0) throw new NoDatabaseError(`${path} is not a bunstr database`);
  } catch (e) {
    db.close();
    if (e instanceof NoDatabaseError) throw e;
    throw new NoDatabaseError(`${path}: ${(e as Error).message}`);
  }
  return db;
}

/**
 * Does another process have the database open (a running relay, an export)? In WAL mode every
 * open connection holds a shared lock on the file for its lifetime, so an exclusive lock taken
 * without waiting fails exactly then. A throwaway connection asks; it creates nothing.
 */
export function openedElsewhere(path: string): boolean {
  const probe = new Database(path, { readwrite: true });
  try {
    probe.exec("PRAGMA busy_timeout = 0");
    probe.exec("PRAGMA locking_mode = EXCLUSIVE");
    probe.exec("BEGIN EXCLUSIVE");
    probe.exec("ROLLBACK");
    return false;
  } catch (e) {
    if (isBusy(e)) return true;
    throw e;
  } finally {
    probe.close();
  }
}

/** Is this error SQLite saying another connection holds the lock it needs? */
export const isBusy = (e: unknown): boolean => /^SQLITE_(BUSY|LOCKED)/.test(String((e as { code?: unknown })?.code ?? ""));

/**
 * Changes whenever another connection (a running relay) commits to the database, never for this
 * connection's own commits: how an import knows it is sharing the file with a writer.
 */
export const dataVersion = (db: Database): number => (db.query("PRAGMA data_version").get() as { data_version: number }).data_version;

/**
 * A page cache large enough for one import transaction's dirty pages (128 MB): smaller, SQLite
 * spills them to the WAL before the commit and writes many of them twice.
 */
/** A SQLite database handle (not a Store): for callers that take either. */
export const isSqliteDb = (x: unknown): x is Database => x instanceof Database;

export function tuneForBulkWrites(db: Database): void {
  db.exec("PRAGMA cache_size = -131072");
}

// ---- export -------------------------------------------------------------------------------

/** Highest and lowest committed seq: an export covers what was committed when it started. */
export function seqRange(db: Database): { min: number; max: number } {
  const r = db.query("SELECT coalesce(min(seq), 0) AS min, coalesce(max(seq), 0) AS max FROM events").get() as { min: number; max: number };
  return r;
}

/**
 * Pages through events in commit (seq) order: `page(after, upTo, limit)` returns up to `limit`
 * events with after < seq <= upTo. Each page is its own short read, so the relay's checkpoints
 * are never held back for the length of the export. The unary `+` keeps SQLite on the seq
 * order (an index on kind or created_at would need a sort of every match for each page).
 */
/** Issue 34: the file has the `hidden` table (schema 16; a file of an older schema opened read-only has not). */
export const hasHiddenTable = (db: Database): boolean =>
  db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hidden'").get() !== null;

/** What sync offers of this file (bulk negItems): what bans hide is left out, as the relay leaves it out. */
export const BULK_HIDDEN = { authors: true, events: true } as const;

export function exportPager(db: Database, scope: ExportScope): (after: number, upTo: number, limit: number) => ExportRow[] {
  const where = ["seq > ?1", "seq <= ?2"];
  const params: (string | number)[] = [];
  const add = (cond: string, value: string | number) => {
    params.push(value);
    where.push(cond.replace("?", `?${params.length + 3}`));
  };
  if (scope.since !== undefined) add("+created_at >= ?", scope.since);
  if (scope.until !== undefined) add("+created_at <= ?", scope.until);
  if (scope.kinds) add("+kind IN (SELECT value FROM json_each(?))", JSON.stringify(scope.kinds));
  if (scope.authors) add("+pubkey IN (SELECT unhex(value) FROM json_each(?))", JSON.stringify(scope.authors));
  if (scope.ids) add("+id IN (SELECT unhex(value) FROM json_each(?))", JSON.stringify(scope.ids));
  if (scope.now > 0) add("(expiration IS NULL OR +expiration > ?)", scope.now);
  // Issue 34: what a ban hides is not exported (a backup, a copy of the file, keeps it). A file of
  // an older schema, opened read-only, has no such table and hides nothing.
  if (hasHiddenTable(db))
    where.push(
      "NOT EXISTS (SELECT 1 FROM hidden hd WHERE (hd.what = 'pubkey' AND hd.key = events.pubkey) OR (hd.what = 'event' AND hd.key = events.id))",
    );
  const st = db.prepare(`SELECT events.seq, ${eventColsSql("events")} FROM events WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?3`);
  // The accepted bytes put back as a REQ's rows are (query.ts): one reassembly for both.
  return (after, upTo, limit) => (st.values(after, upTo, limit, ...params) as EventColumns[]).map((r) => ({ seq: r[0], json: rowJson(r) }));
}

/** id -> kind, pubkey, created_at and d of the stored events among `ids` (any number of ids). */
export function eventHeads(db: Database, ids: string[]): Map<string, EventHead> {
  const st = db.prepare(
    "SELECT lower(hex(id)) AS id, kind, lower(hex(pubkey)) AS pubkey, created_at, json FROM events WHERE id IN (SELECT unhex(value) FROM json_each(?))",
  );
  const heads = new Map<string, EventHead>();
  for (let i = 0; i < ids.length; i += 500)
    for (const r of st.all(JSON.stringify(ids.slice(i, i + 500))) as (Omit<EventHead, "d"> & { id: string; json: string })[]) {
      const tags = (JSON.parse(r.json) as { tags: string[][] }).tags;
      const d = isAddressable(r.kind) ? (tags.find((t) => t[0] === "d")?.[1] ?? "") : "";
      heads.set(r.id, { kind: r.kind, pubkey: r.pubkey, created_at: r.created_at, d });
    }
  return heads;
}

/** Why an event is no longer stored, as far as the tombstones tell: a NIP-09 deletion, a NIP-62 request to vanish. */
export function tombstoneOf(db: Database, id: string, head: EventHead | undefined): "nip09" | "nip62" | undefined {
  if (db.query("SELECT 1 FROM deleted_ids WHERE id = unhex(?)").get(id)) return "nip09";
  if (!head) return undefined;
  if (
    db
      .query("SELECT 1 FROM deleted_addresses WHERE pubkey = unhex(?) AND kind = ? AND d = ? AND until >= ?")
      .get(head.pubkey, head.kind, head.d, head.created_at)
  )
    return "nip09";
  const v = db.query("SELECT until FROM vanished WHERE pubkey = unhex(?)").get(head.pubkey) as { until: number } | null;
  return v && v.until >= head.created_at ? "nip62" : undefined;
}

// ---- backup and compact ---------------------------------------------------------------------

/**
 * A consistent copy of the database as one self-contained file (rollback journal, no -wal): the
 * snapshot of a read transaction, so the relay keeps writing meanwhile. `file` must not exist.
 */
export function vacuumInto(db: Database, file: string): void {
  db.run("VACUUM INTO ?", [file]);
}

/** Page counts: the file is pageCount * pageSize bytes, freePages of them reusable (compact returns them). */
export function pageCounts(db: Database): { pageSize: number; pageCount: number; freePages: number } {
  const pageSize = (db.query("PRAGMA page_size").get() as { page_size: number }).page_size;
  const pageCount = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
  const freePages = (db.query("PRAGMA freelist_count").get() as { freelist_count: number }).freelist_count;
  return { pageSize, pageCount, freePages };
}

export interface CheckpointResult {
  busy: boolean;
  walFrames: number;
  checkpointed: number;
}

export function checkpoint(db: Database, mode: "PASSIVE" | "TRUNCATE"): CheckpointResult {
  const r = db.query(`PRAGMA wal_checkpoint(${mode})`).get() as { busy: number; log: number; checkpointed: number };
  return { busy: r.busy !== 0, walFrames: r.log, checkpointed: r.checkpointed };
}

/**
 * Rebuilds the file without free pages (VACUUM), folds the WAL back (checkpoint TRUNCATE) and
 * refreshes the planner's statistics where SQLite thinks it useful (PRAGMA optimize). VACUUM
 * holds the write lock throughout. Its scratch copy goes to a temporary file, not memory
 * (the relay's connections keep temp_store = MEMORY, which would need RAM the size of the database).
 */
export function compactDatabase(db: Database, phase: (name: "vacuum" | "checkpoint" | "optimize") => void = () => {}): CheckpointResult {
  db.exec("PRAGMA temp_store = FILE");
  phase("vacuum");
  db.exec("VACUUM");
  phase("checkpoint");
  const cp = checkpoint(db, "TRUNCATE");
  phase("optimize");
  db.exec("PRAGMA optimize");
  return cp;
}

// ---- stats ----------------------------------------------------------------------------------

/** Counts for `bunstr stats`, each from an index (a few hundred ms per million events); sizes are bulk.ts's. */
export function storeCounts(db: Database, topKinds = 10): Omit<StoreStats, "fileBytes" | "walBytes" | "freeBytes"> {
  const one = <T>(sql: string) => Object.values(db.query(sql).get() as Record<string, T>)[0] as T;
  const byKind = db.query("SELECT kind, count(*) AS count FROM events GROUP BY kind ORDER BY count DESC, kind").all() as {
    kind: number;
    count: number;
  }[];
  return {
    events: one<number>("SELECT count(*) FROM events"),
    authors: one<number>("SELECT count(DISTINCT pubkey) FROM events"),
    kinds: byKind.slice(0, topKinds),
    distinctKinds: byKind.length,
    oldest: one<number | null>("SELECT min(created_at) FROM events"),
    newest: one<number | null>("SELECT max(created_at) FROM events"),
    tagRows: one<number>("SELECT count(*) FROM tags"),
    deletedIds: one<number>("SELECT count(*) FROM deleted_ids"),
    deletedAddresses: one<number>("SELECT count(*) FROM deleted_addresses"),
    vanished: one<number>("SELECT count(*) FROM vanished"),
    expiring: one<number>("SELECT count(*) FROM events WHERE expiration IS NOT NULL"),
    schemaVersion: one<number>("PRAGMA user_version"),
  };
}
