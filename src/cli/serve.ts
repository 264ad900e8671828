// `bunstr serve`: load config, open the store, start the relay, stop cleanly on SIGTERM/SIGINT.
import { resolve } from "node:path";
import { loadConfigFile, override } from "../config/load.ts";
import { defaults, type Config } from "../config/schema.ts";
import { startRelay } from "../relay/server.ts";
import { SqliteStore } from "../store/sqlite.ts";
import { VERSION } from "../version.ts";
import { parseServeFlags } from "./args.ts";
import { raiseOpenFileLimit } from "./rlimit.ts";

export async function resolveConfig(argv: string[]): Promise<Config> {
  const flags = parseServeFlags(argv);
  let config = defaults();
  if (flags.config) {
    const loaded = await loadConfigFile(flags.config);
    config = loaded.config;
    if (loaded.ignored.length > 0)
      console.warn(`warning: ${flags.config}: these settings are not used by bunstr and were ignored: ${loaded.ignored.join(", ")}`);
  }
  for (const [path, value] of flags.overrides) override(config, path, value);
  if (!config.network.path.startsWith("/")) config.network.path = `/${config.network.path}`;
  return config;
}

/** The database file: --db / [database] file, else <data_directory>/bunstr.sqlite; relative to the working directory. */
export function databasePath(config: Config): string {
  if (config.database.in_memory) return ":memory:";
  if (config.database.file) return resolve(config.database.file);
  return resolve(config.database.data_directory, "bunstr.sqlite");
}

export async function serve(argv: string[]): Promise<void> {
  const config = await resolveConfig(argv);
  const dbPath = databasePath(config);
  const files = raiseOpenFileLimit();
  // Past the descriptor limit accept() fails in a loop and the database cannot open files:
  // refuse connections (503) well before that.
  if (config.limits.max_connections === 0 && files !== undefined) config.limits.max_connections = Math.max(64, files - 256);
  if (config.network.remote_ip_header && config.network.trusted_proxies.length === 0)
    console.warn(`warning: [network] remote_ip_header is ignored until trusted_proxies lists your proxy's address`);
  const store = new SqliteStore({
    path: dbPath,
    synchronous: config.database.synchronous as "normal" | "full",
    readerWorkers: config.database.reader_workers,
    queryTimeoutMs: config.database.query_timeout_ms,
  });
  const relay = startRelay({ config, store });
  console.log(`bunstr ${VERSION} listening on ${relay.url} (database: ${dbPath}, signatures: ${relay.ctx.verifier.name})`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      console.error(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    console.log(`${signal}: shutting down`);
    await relay.close();
    console.log("bye");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}
