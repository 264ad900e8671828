// What every command shares: the config (CLI > --config file > defaults) and where the database
// is. serve, export, import, backup, compact and stats all find the same file the same way.
import { log } from "../log.ts";
import { resolve } from "node:path";
import { loadConfigFile, override, type LoadOptions } from "../config/load.ts";
import { defaults, type Config } from "../config/schema.ts";
import { PostgresBulk } from "../store/postgres/bulk.ts";
import { PostgresStore } from "../store/postgres/store.ts";
import { SqliteBulk } from "../store/sqlite/bulk.ts";
import { openDatabase } from "../store/sqlite/db.ts";
import { openExisting } from "../store/sqlite/maintenance.ts";
import { SqliteStore } from "../store/sqlite/store.ts";
import type { BulkStore, Store } from "../store/types.ts";

/** The flags that choose the config and the database, as node:util parseArgs options. */
export const databaseFlags = {
  config: { type: "string" },
  db: { type: "string" },
  "data-dir": { type: "string" },
  lenient: { type: "boolean" },
} as const;

export interface DatabaseFlagValues {
  config?: string;
  db?: string;
  "data-dir"?: string;
  lenient?: boolean;
}

/**
 * The config from defaults, then the --config file, then `overrides` (section.key, value). An
 * unknown key in the file is an error (a typo would silently do nothing) unless `lenient`.
 */
export async function loadConfig(
  file: string | undefined,
  overrides: readonly [path: string, value: unknown][],
  opts: LoadOptions = {},
): Promise<Config> {
  let config = defaults();
  if (file) {
    const loaded = await loadConfigFile(file, opts);
    config = loaded.config;
    for (const line of loaded.unknown) log.warn(`warning: ${line}`);
    if (loaded.ignored.length > 0)
      log.warn(`warning: ${file}: these settings are not used by bunstr and were ignored: ${loaded.ignored.join(", ")}`);
  }
  for (const [path, value] of overrides) override(config, path, value);
  if (!config.network.path.startsWith("/")) config.network.path = `/${config.network.path}`;
  return config;
}

/** The database file: --db / [database] file, else <data_directory>/bunstr.sqlite; relative to the working directory. */
export function databasePath(config: Config): string {
  if (config.database.in_memory) return ":memory:";
  if (config.database.file) return resolve(config.database.file);
  return resolve(config.database.data_directory, "bunstr.sqlite");
}

/**
 * Config and database for a command (--config, --db, --data-dir as serve reads them): the SQLite
 * file's path, or for engine = "postgres" the database named by its URL (for messages).
 */
export async function resolveDatabase(values: DatabaseFlagValues): Promise<{ config: Config; dbPath: string }> {
  const overrides: [string, unknown][] = [];
  if (values.db !== undefined) overrides.push(["database.file", values.db]);
  if (values["data-dir"] !== undefined) overrides.push(["database.data_directory", values["data-dir"]]);
  const config = await loadConfig(values.config, overrides, { lenient: values.lenient });
  if (config.database.engine === "postgres") {
    const url = new URL(postgresUrl(config));
    return { config, dbPath: `postgres ${url.host}${url.pathname}` };
  }
  const dbPath = databasePath(config);
  if (dbPath === ":memory:") throw new UsageError("[database] in_memory = true: there is no database file to work on");
  return { config, dbPath };
}

/** The Postgres connection URL: [database] postgres_url, else $DATABASE_URL. */
export function postgresUrl(config: Config): string {
  const url = config.database.postgres_url || process.env.DATABASE_URL || "";
  if (!url) throw new UsageError('[database] engine = "postgres" needs postgres_url (or DATABASE_URL in the environment)');
  return url;
}

/**
 * The database as the operator commands see it (ops/): the SQLite file (`readonly` and
 * `readwrite` need it to exist, `create` makes it) or Postgres, whose schema is migrated.
 */
export async function openBulk(config: Config, dbPath: string, mode: "readonly" | "readwrite" | "create"): Promise<BulkStore> {
  if (config.database.engine === "postgres") {
    const url = postgresUrl(config);
    return new PostgresBulk(await PostgresStore.open({ url, poolSize: 2 }), url);
  }
  const db =
    mode === "create"
      ? openDatabase({ path: dbPath, synchronous: config.database.synchronous as "normal" | "full" })
      : openExisting(dbPath, mode);
  return new SqliteBulk(db, dbPath);
}

/** Where serve keeps events, as config says: the SQLite file, or Postgres (and its bus). */
export async function openStore(config: Config): Promise<{ store: Store; where: string }> {
  if (config.database.engine === "postgres") {
    const url = postgresUrl(config);
    const store = await PostgresStore.open({
      url,
      busUrl: config.database.bus_url,
      poolSize: config.database.postgres_pool,
      queryTimeoutMs: config.database.query_timeout_ms,
    });
    const where = `postgres ${new URL(url).host}${new URL(url).pathname}${config.database.bus_url ? `, bus ${new URL(config.database.bus_url).host}` : ""}`;
    return { store, where };
  }
  const path = databasePath(config);
  const store = new SqliteStore({
    path,
    synchronous: config.database.synchronous as "normal" | "full",
    readerWorkers: config.database.reader_workers,
    queryTimeoutMs: config.database.query_timeout_ms,
    writerThread: true,
  });
  return { store, where: path };
}

/** A command-line mistake: printed as `error: …` with exit status 2. */
export class UsageError extends Error {}
