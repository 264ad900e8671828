// `bunstr backup FILE [--force]`, `bunstr compact`, `bunstr stats [--json]`.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseFlags } from "./args.ts";
import { backupDatabase, compactDatabase } from "../ops/backup.ts";
import { bytes, duration, int } from "../ops/progress.ts";
import { openedElsewhere } from "../store/sqlite/maintenance.ts";
import { databaseFlags, openBulk, resolveDatabase, UsageError } from "./options.ts";
import { backupKeyFile, keyFileOf } from "./relay-key.ts";

const BACKUP_USAGE = "usage: bunstr backup FILE [--force] [--config F] [--data-dir D | --db F]";
const COMPACT_USAGE = "usage: bunstr compact [--online] [--config F] [--data-dir D | --db F]";
const STATS_USAGE = "usage: bunstr stats [--json] [--top N] [--config F] [--data-dir D | --db F]";

export async function backupCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags({
    args: argv,
    allowPositionals: true,
    options: { ...databaseFlags, force: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) return (console.log(BACKUP_USAGE), 0);
  if (positionals.length !== 1) throw new UsageError(`backup needs one destination file\n${BACKUP_USAGE}`);
  const { config, dbPath } = await resolveDatabase(values);
  const dest = resolve(positionals[0]!);
  if (dest === dbPath || dest === `${dbPath}-wal` || dest === `${dbPath}-shm`) throw new UsageError(`${dest} is the database itself`);
  const keyFile = keyFileOf(config);
  for (const file of [dest, ...(keyFile && existsSync(keyFile) ? [`${dest}.key`] : [])])
    if (existsSync(file) && !values.force) {
      console.error(`error: ${file} exists; use --force to replace it`);
      return 1;
    }
  const db = await openBulk(config, dbPath, "readonly");
  try {
    const r = await backupDatabase(db, dest);
    console.log(`backup of ${dbPath} written to ${r.file}: ${bytes(r.bytes)}, ${int(r.events)} events, in ${duration(r.seconds)}`);
    // The relay key beside it: a restore without it is a relay with another identity (NIP-29 groups).
    const keyCopy = backupKeyFile(config, r.file);
    if (keyCopy) console.log(`  relay key ${keyFile} copied to ${keyCopy} (mode 0600; keep it private; restore it beside the database)`);
    // What the Postgres backup ran (BulkStore.backup there hands over to pg_dump).
    if (config.database.engine === "postgres")
      console.log(`  pg_dump --format=custom of one snapshot; restore with: pg_restore --dbname=URL ${r.file}`);
  } finally {
    await db.close();
  }
  return 0;
}

export async function compactCommand(argv: string[]): Promise<number> {
  const { values } = parseFlags({
    args: argv,
    options: { ...databaseFlags, online: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) return (console.log(COMPACT_USAGE), 0);
  const { config, dbPath } = await resolveDatabase(values);
  if (config.database.engine === "postgres") {
    const db = await openBulk(config, dbPath, "readwrite");
    try {
      const r = await compactDatabase(db);
      console.log(
        `compacted ${dbPath} in ${duration(r.seconds)} by VACUUM (ANALYZE): database ${bytes(r.before.file)} -> ${bytes(r.after.file)}; ` +
          "the space of deleted rows is reused (Postgres keeps the files' size; VACUUM FULL, which locks each table, would return it)",
      );
    } finally {
      await db.close();
    }
    return 0;
  }
  if (existsSync(dbPath) && openedElsewhere(dbPath)) {
    if (!values.online) {
      console.error(
        `error: another process has ${dbPath} open (a running relay?). compact holds the write lock for the whole VACUUM ` +
          "(about 1 s per 100,000 events); the relay's writes wait up to 5 s and then fail. Stop the relay first, or pass --online to go ahead.",
      );
      return 1;
    }
    console.error("compact: another process has the database open (--online): its writes wait while VACUUM runs");
  }
  const db = await openBulk(config, dbPath, "readwrite");
  let r;
  try {
    r = await compactDatabase(db);
  } finally {
    await db.close();
  }
  console.log(
    `compacted ${dbPath} in ${duration(r.seconds)} (write lock held ${duration(r.phases.vacuum ?? 0)} by VACUUM): ` +
      `file ${bytes(r.before.file)} -> ${bytes(r.after.file)}, WAL ${bytes(r.before.wal)} -> ${bytes(r.after.wal)}, ${int(r.freePagesBefore)} free pages returned`,
  );
  if (r.checkpointBusy)
    console.log(
      "  the WAL could not be emptied (another process, a running relay, was reading): the rebuilt pages reach the file at its next checkpoint",
    );
  return 0;
}

export async function statsCommand(argv: string[]): Promise<number> {
  const { values } = parseFlags({
    args: argv,
    options: { ...databaseFlags, json: { type: "boolean" }, top: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) return (console.log(STATS_USAGE), 0);
  if (values.top !== undefined && !/^\d+$/.test(values.top)) throw new UsageError("--top must be a number");
  const { config, dbPath } = await resolveDatabase(values);
  const db = await openBulk(config, dbPath, "readonly");
  const started = performance.now();
  let st;
  try {
    st = await db.stats(values.top !== undefined ? Number(values.top) : 10);
  } finally {
    await db.close();
  }
  const out = {
    database: dbPath,
    events: st.events,
    authors: st.authors,
    oldest: st.oldest,
    newest: st.newest,
    kinds: st.kinds,
    distinct_kinds: st.distinctKinds,
    file_bytes: st.fileBytes,
    wal_bytes: st.walBytes,
    bytes_per_event: st.events > 0 ? Math.round((st.fileBytes + st.walBytes) / st.events) : null,
    free_bytes: st.freeBytes,
    tag_rows: st.tagRows,
    expiring: st.expiring,
    deleted_ids: st.deletedIds,
    deleted_addresses: st.deletedAddresses,
    vanished_pubkeys: st.vanished,
    schema_version: st.schemaVersion,
    seconds: (performance.now() - started) / 1000,
  };
  if (values.json) return (console.log(JSON.stringify(out, null, 2)), 0);
  const date = (t: number | null) => (t === null ? "-" : `${new Date(t * 1000).toISOString().replace(".000Z", "Z")} (${t})`);
  const lines = [
    `database        ${dbPath}`,
    `events          ${int(out.events)}`,
    `authors         ${int(out.authors)}`,
    `oldest          ${date(out.oldest)}`,
    `newest          ${date(out.newest)}`,
    `size            ${bytes(out.file_bytes)} file + ${bytes(out.wal_bytes)} WAL, ${out.bytes_per_event === null ? "-" : bytes(out.bytes_per_event)} per event${out.free_bytes === null ? "" : `, ${bytes(out.free_bytes)} free (compact returns it)`}`,
    `tags indexed    ${int(out.tag_rows)}`,
    `tombstones      ${int(out.deleted_ids)} deleted ids, ${int(out.deleted_addresses)} deleted addresses, ${int(out.vanished_pubkeys)} vanished pubkeys`,
    `expiring        ${int(out.expiring)} events with an expiration tag`,
    `kinds           ${int(out.distinct_kinds)} distinct; top ${out.kinds.length}:`,
    ...out.kinds.map(
      (k) =>
        `  ${String(k.kind).padStart(6)}  ${int(k.count).padStart(12)}  ${((100 * k.count) / Math.max(1, out.events)).toFixed(1).padStart(5)}%`,
    ),
  ];
  console.log(lines.join("\n"));
  return 0;
}
