// `bunstr backup` and `bunstr compact`: file handling around VACUUM INTO and VACUUM.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname } from "node:path";
import {
  checkpoint,
  compactDatabase,
  openExisting,
  pageCounts,
  vacuumInto,
  type CheckpointResult,
  type Db,
} from "../store/sqlite/maintenance.ts";
import { watchFileGrowth } from "./progress.ts";

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

interface BackupResult {
  file: string;
  bytes: number;
  events: number;
  seconds: number;
}

/**
 * A consistent copy of `db` at `dest`: VACUUM INTO a temporary file beside it (a read
 * transaction: the relay keeps writing), fsync (SQLite does not sync VACUUM INTO's output), then
 * rename into place, so `dest` is never a half-written file. The caller has checked `dest`.
 */
export async function backupDatabase(db: Db, dest: string): Promise<BackupResult> {
  const started = performance.now();
  const tmp = `${dest}.partial-${process.pid}`;
  mkdirSync(dirname(dest), { recursive: true });
  rmSync(tmp, { force: true });
  const { pageSize, pageCount, freePages } = pageCounts(db);
  const stop = await watchFileGrowth("backup", tmp, (pageCount - freePages) * pageSize);
  try {
    vacuumInto(db, tmp);
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

interface CompactResult {
  before: { file: number; wal: number };
  after: { file: number; wal: number };
  freePagesBefore: number;
  checkpoint: CheckpointResult;
  seconds: number;
  /** How long each phase held the database. */
  phases: Record<string, number>;
}

/** VACUUM + checkpoint(TRUNCATE) + optimize on `path` (opened read-write here). */
export async function compactFile(path: string): Promise<CompactResult> {
  const started = performance.now();
  const db = openExisting(path, "readwrite");
  try {
    // Fold the WAL in first: VACUUM then starts from (and reports against) the real file size.
    checkpoint(db, "PASSIVE");
    const before = databaseSize(path);
    const { pageSize, pageCount, freePages } = pageCounts(db);
    const phases: Record<string, number> = {};
    let phaseStart = performance.now();
    let current = "";
    // VACUUM writes the rebuilt pages through the WAL: watch it grow towards the used size.
    const stop = await watchFileGrowth("compact", `${path}-wal`, (pageCount - freePages) * pageSize);
    let cp: CheckpointResult;
    try {
      cp = compactDatabase(db, (name) => {
        const now = performance.now();
        if (current) phases[current] = (now - phaseStart) / 1000;
        current = name;
        phaseStart = now;
      });
      phases[current] = (performance.now() - phaseStart) / 1000;
    } finally {
      stop();
    }
    return {
      before,
      after: databaseSize(path),
      freePagesBefore: freePages,
      checkpoint: cp,
      seconds: (performance.now() - started) / 1000,
      phases,
    };
  } finally {
    db.close();
  }
}
