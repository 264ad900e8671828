// `bunstr backup` and `bunstr compact`: the store does the work (SQLite: VACUUM INTO and VACUUM;
// Postgres: pg_dump and VACUUM (ANALYZE)); here, the progress line while it runs.
import type { BackupResult, BulkStore, CompactResult } from "../store/types.ts";
import { watchFileGrowth } from "./progress.ts";

/** A consistent copy of the database at `dest`, never half-written there. The caller has checked `dest`. */
export function backupDatabase(db: BulkStore, dest: string): Promise<BackupResult> {
  return db.backup(dest, (file, expected) => watchFileGrowth("backup", file, expected));
}

/** Returns the space of deleted events and refreshes the planner's statistics. */
export function compactDatabase(db: BulkStore): Promise<CompactResult> {
  return db.compact((file, expected) => watchFileGrowth("compact", file, expected));
}
