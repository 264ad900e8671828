// The operator commands' view of a SQLite file (Store's BulkStore, store/types.ts): the reads of
// export and sync, the import's writer (our own SqliteWriter on this connection, a running
// relay's writer sharing the file), stats, backup (VACUUM INTO) and compact (VACUUM).
import type { Database } from "bun:sqlite";
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname } from "node:path";
import type { Filter } from "../../protocol/filter.ts";
import { PURGE_STEP_MS } from "../queue.ts";
import type {
  BackupResult,
  BulkStore,
  BulkWriter,
  BulkWriterOptions,
  CompactResult,
  EventHead,
  ExportRow,
  ExportScope,
  GroupRecords,
  GrowthWatch,
  NegItems,
  PendingWrite,
  StoreStats,
} from "../types.ts";
import { SqliteAdmin } from "./admin.ts";
import { SqliteGroups } from "./groups.ts";
import {
  checkpoint,
  compactDatabase,
  dataVersion,
  eventHeads,
  BULK_HIDDEN,
  exportPager,
  hasHiddenTable,
  isBusy,
  openExisting,
  pageCounts,
  seqRange,
  storeCounts,
  tombstoneOf,
  tuneForBulkWrites,
  vacuumInto,
} from "./maintenance.ts";
import { runNegItems, StatementCache } from "./query.ts";
import { SqliteWriter } from "./write.ts";

/** Alone, a transaction grows until it holds the write lock about this long... */
const ALONE_TXN_MS = 1000;
/** ...up to this many events (bounds memory: the events wait in memory for their commit). */
const ALONE_TXN_MAX = 20_000;
/**
 * Once another process has committed (a relay is writing), each transaction holds the lock about
 * this long and the import then pauses as long (at most SHARED_PAUSE_MAX_MS): SQLite's busy
 * handler polls a waiting writer at growing intervals of up to 100 ms, and back-to-back
 * transactions would leave it no window (measured: a waiting writer starved for seconds).
 */
const SHARED_TXN_MS = 50;
const SHARED_PAUSE_MAX_MS = 100;
/** Keep retrying a batch the database refuses as locked (a compact running, say) this long. */
const BUSY_GIVE_UP_MS = 10 * 60_000;

/** Bytes of the database file and its WAL (the -shm index is a few KB and rebuilt at will). */
export function databaseSize(path: string): { file: number; wal: number } {
  const size = (p: string) => (existsSync(p) ? statSync(p).size : 0);
  return { file: size(path), wal: size(`${path}-wal`) };
}

function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

const noWatch: GrowthWatch = async () => () => {};

export class SqliteBulk implements BulkStore {
  readonly groups: GroupRecords = new SqliteGroups(() => this.db);
  constructor(
    /** A connection of the command's own: read-only for export, stats and backup; read-write to import or compact. */
    readonly db: Database,
    readonly path: string,
  ) {}

  async seqRange(): Promise<{ min: number; max: number }> {
    return seqRange(this.db);
  }

  exportPager(scope: ExportScope): (after: number, upTo: number, limit: number) => Promise<ExportRow[]> {
    const page = exportPager(this.db, scope);
    return async (after, upTo, limit) => page(after, upTo, limit);
  }

  async negItems(filter: Filter, now: number): Promise<NegItems> {
    const visibility = hasHiddenTable(this.db) ? { restrictedKinds: [], viewers: [], hidden: BULK_HIDDEN } : undefined;
    return runNegItems(new StatementCache(this.db), {
      filter,
      max: Number.MAX_SAFE_INTEGER - 1,
      maxSeq: Number.MAX_SAFE_INTEGER,
      now,
      visibility,
    });
  }

  async eventHeads(ids: string[]): Promise<Map<string, EventHead>> {
    return eventHeads(this.db, ids);
  }

  async tombstoneOf(id: string, head: EventHead | undefined): Promise<"nip09" | "nip62" | undefined> {
    return tombstoneOf(this.db, id, head);
  }

  /**
   * The file, written by our own writer: transactions sized by time (ALONE_TXN_MS, or
   * SHARED_TXN_MS and a pause once another process writes too), retried while it is locked.
   */
  async writer(opts: BulkWriterOptions): Promise<BulkWriter> {
    const db = this.db;
    const writer = new SqliteWriter(db);
    const { rules, batchSize } = opts;
    tuneForBulkWrites(db);
    const maxTxn = opts.maxTxn ?? ALONE_TXN_MAX;
    let ourVersion = dataVersion(db);
    /** Another process has committed since the import began: it is running, share the lock. */
    let shared = false;
    let busyReported = false;
    const once = async (writes: PendingWrite[]) => {
      const since = performance.now();
      for (;;) {
        try {
          return writer.writeBatchImmediate(writes, rules);
        } catch (err) {
          if (!isBusy(err) || performance.now() - since > BUSY_GIVE_UP_MS) throw err;
          if (!busyReported) (busyReported = true), opts.onBusy?.();
          await Bun.sleep(100);
        }
      }
    };
    /** The deletions the batch recorded (requests to vanish), in steps: a running relay's writer gets the lock between them. */
    const purgeAll = async () => {
      const since = performance.now();
      for (;;) {
        try {
          if (!writer.purgeStep(PURGE_STEP_MS)) return;
        } catch (err) {
          if (!isBusy(err) || performance.now() - since > BUSY_GIVE_UP_MS) throw err;
          await Bun.sleep(100);
          continue;
        }
        if (shared) await Bun.sleep(PURGE_STEP_MS);
      }
    };
    const target = {
      adminEntries: async () => new SqliteAdmin(db, writer).entries(),
      has: (id: string) => writer.has(id),
      txnSize: batchSize,
      async commit(writes: PendingWrite[]) {
        const t0 = performance.now();
        if (!shared && dataVersion(db) !== ourVersion) shared = true;
        const outcomes = await once(writes);
        await purgeAll();
        const t1 = performance.now();
        ourVersion = dataVersion(db);
        const perEvent = Math.max((t1 - t0) / writes.length, 1e-3);
        target.txnSize = shared
          ? Math.round(Math.min(batchSize, Math.max(50, SHARED_TXN_MS / perEvent)))
          : Math.round(Math.min(maxTxn, Math.max(batchSize, ALONE_TXN_MS / perEvent)));
        if (shared) await Bun.sleep(Math.min(SHARED_PAUSE_MAX_MS, Math.max(5, t1 - t0)));
        return outcomes;
      },
    };
    return target;
  }

  async stats(topKinds: number): Promise<StoreStats> {
    const counts = storeCounts(this.db, topKinds);
    const { pageSize, freePages } = pageCounts(this.db);
    const size = databaseSize(this.path);
    return { ...counts, fileBytes: size.file, walBytes: size.wal, freeBytes: freePages * pageSize };
  }

  /**
   * VACUUM INTO a temporary file beside `dest` (a read transaction: the relay keeps writing),
   * fsync (SQLite does not sync VACUUM INTO's output), then rename into place.
   */
  async backup(dest: string, watch: GrowthWatch = noWatch): Promise<BackupResult> {
    const started = performance.now();
    const tmp = `${dest}.partial-${process.pid}`;
    mkdirSync(dirname(dest), { recursive: true });
    rmSync(tmp, { force: true });
    const { pageSize, pageCount, freePages } = pageCounts(this.db);
    const stop = await watch(tmp, (pageCount - freePages) * pageSize);
    try {
      vacuumInto(this.db, tmp);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw e;
    } finally {
      stop();
    }
    fsyncPath(tmp);
    renameSync(tmp, dest);
    fsyncPath(dirname(dest));
    // Open what was written: proves it is a database, and counts what it holds.
    const copy = openExisting(dest, "readonly");
    const events = (copy.query("SELECT count(*) AS n FROM events").get() as { n: number }).n;
    copy.close();
    return { file: dest, bytes: statSync(dest).size, events, seconds: (performance.now() - started) / 1000 };
  }

  /** VACUUM + checkpoint(TRUNCATE) + optimize (the connection must be read-write). */
  async compact(watch: GrowthWatch = noWatch): Promise<CompactResult> {
    const started = performance.now();
    const { db, path } = this;
    // Fold the WAL in first: VACUUM then starts from (and reports against) the real file size.
    checkpoint(db, "PASSIVE");
    const before = databaseSize(path);
    const { pageSize, pageCount, freePages } = pageCounts(db);
    const phases: Record<string, number> = {};
    let phaseStart = performance.now();
    let current = "";
    // VACUUM writes the rebuilt pages through the WAL: watch it grow towards the used size.
    const stop = await watch(`${path}-wal`, (pageCount - freePages) * pageSize);
    let busy: boolean;
    try {
      busy = compactDatabase(db, (name) => {
        const now = performance.now();
        if (current) phases[current] = (now - phaseStart) / 1000;
        current = name;
        phaseStart = now;
      }).busy;
      phases[current] = (performance.now() - phaseStart) / 1000;
    } finally {
      stop();
    }
    return {
      before,
      after: databaseSize(path),
      freePagesBefore: freePages,
      checkpointBusy: busy,
      seconds: (performance.now() - started) / 1000,
      phases,
    };
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
