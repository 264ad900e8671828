// `bunstr serve`: load config, open the store, start the relay; SIGHUP reloads the config,
// SIGTERM/SIGINT stop cleanly, SIGUSR2 drains for a zero-downtime restart (docs/operations.md).
import { log } from "../log.ts";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import { configErrors, configWarnings } from "../config/warnings.ts";
import { startRelay, type Relay, type Shutdown } from "../relay/server.ts";
import { configuredVerifier } from "../verify/configured.ts";
import { VERSION } from "../version.ts";
import { parseServeFlags, type ServeFlags } from "./args.ts";
import { foreignDataWarnings } from "./foreign-data.ts";
import { claimPort, checkPort, claimPrefix } from "./listeners.ts";
import { databasePath, loadConfig, openStore, postgresUrl } from "./options.ts";
import { ConfigReloader } from "./reload.ts";
import { connectionCeiling } from "../relay/connection/fd-guard.ts";
import { raiseOpenFileLimit } from "./rlimit.ts";
import { resolveRelayKey } from "./relay-key.ts";
import { checkHost, databaseError, listenError, machineInterfaces, postgresError } from "./startup.ts";
import { listeningOn } from "./listening.ts";

/** Defaults, then the --config file, then the flags (CLI > file > default). */
const loadServeConfig = (flags: ServeFlags): Promise<Config> => loadConfig(flags.config, flags.overrides, { lenient: flags.lenient });

/**
 * What serve derives from the file before using it, at start and on every reload alike (or a
 * reload would see a change that is none): max_connections = 0 means "from the open-files limit".
 */
function settle(config: Config, files: number | undefined): Config {
  // Past the descriptor limit accept() fails in a busy loop: websockets alone must never get
  // there (the relay's own files, HTTP connections and the cutting margin of src/relay/connection/fd-guard.ts
  // need the rest), so max_connections is at most the ceiling (503 past it).
  if (files === undefined) return config;
  const ceiling = connectionCeiling(files);
  if (config.limits.max_connections === 0) config.limits.max_connections = ceiling;
  else if (config.limits.max_connections > ceiling) {
    log.warn(
      `warning: [limits] max_connections = ${config.limits.max_connections} does not fit the open-files limit ${files}; using ${ceiling} (raise the limit: docs/deploy.md, Open files)`,
    );
    config.limits.max_connections = ceiling;
  }
  return config;
}

/** Below this the relay serves few clients, and a flood of connections reaches the limit fast. */
const LOW_FILE_LIMIT = 4096;

/** Linux resets connections still queued on a SO_REUSEPORT listener when it closes, unless this is 1. */
function migrateQueuedConnections(): string | undefined {
  try {
    return readFileSync("/proc/sys/net/ipv4/tcp_migrate_req", "utf8").trim();
  } catch {
    return undefined;
  }
}

export async function serve(argv: string[]): Promise<void> {
  const flags = parseServeFlags(argv);
  if (flags.config) flags.config = resolve(flags.config);
  const loaded = await loadServeConfig(flags);
  // The level and format before the first line about the config or the limits.
  log.configure(loaded.log);
  const files = raiseOpenFileLimit();
  const config = settle(loaded, files);
  for (const line of configWarnings(config)) log.warn(line);
  const errors = configErrors(config);
  if (errors.length > 0) throw new ConfigError(errors);
  // The address and the port before the database: a relay that cannot listen leaves no file behind.
  await checkHost(config.network.host);
  const dbPath = databasePath(config);
  const claims = claimPrefix(config, dbPath);
  await checkPort(config, claims);
  for (const line of foreignDataWarnings(config)) log.warn(line);
  const { store, where } = await openStore(config).catch((err: unknown) => {
    if (config.database.engine === "postgres") throw postgresError(err, postgresUrl(config));
    throw databaseError(err, dbPath) ?? err;
  });
  if (files !== undefined && files < LOW_FILE_LIMIT)
    log.warn(
      `warning: the open-files limit is ${files}: at most ${config.limits.max_connections} websocket connections, and a flood of connections reaches it quickly; ` +
        "raise the hard limit (systemd: LimitNOFILE=65536; docs/deploy.md, Open files)",
    );
  // Every worker thread and database connection the relay will use is open before it listens:
  // later, a flood of connections may have taken the descriptors (and a thread that cannot get
  // its own ends the process).
  const verifier = configuredVerifier(config);
  let relayKey;
  // Said once the relay listens: a start that fails says only why.
  const keyLines: string[] = [];
  try {
    await Promise.all([verifier.ready?.(), store.ready()]);
    // The relay's own key (NIP-11 self; NIP-29 signatures): said where, the first time it is made.
    relayKey = await resolveRelayKey(config, store, (line) => keyLines.push(line));
  } catch (err) {
    verifier.close();
    await store.close();
    throw databaseError(err, dbPath) ?? err;
  }
  let relay: Relay;
  try {
    relay = startRelay({ config, store, verifier, fileLimit: files, relayKey });
  } catch (err) {
    verifier.close();
    await store.close();
    throw listenError(err, config.network.host, config.network.port) ?? err;
  }
  // State built from the store (NIP-29 groups) before the relay says it listens.
  await relay.ready;

  const reloader = new ConfigReloader({
    file: flags.config,
    live: config,
    relay,
    load: async () => settle(await loadServeConfig(flags), files),
  });
  process.on("SIGHUP", () => void reloader.reload("SIGHUP"));

  let stopping: Shutdown | undefined;
  const stop = async (signal: string, how: Shutdown) => {
    if (stopping && how === "restart") {
      // A second SIGUSR2 (a deploy script run twice, a retry): the hand-over or shutdown under
      // way goes on. Exiting here would cut the drain short, and exit 1 would have systemd's
      // Restart=on-failure start this process again beside the new one.
      log.info(`${signal} again: ${stopping === "restart" ? "the hand-over" : "the shutdown"} is already under way, ignored`);
      return;
    }
    if (stopping) {
      log.error(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = how;
    reloader.close();
    if (how === "restart") {
      log.info(`${signal}: draining for a restart: no longer listening, finishing in-flight events, then closing connections with 1012`);
      if (config.network.reuse_port && migrateQueuedConnections() === "0")
        log.warn(
          "note: net.ipv4.tcp_migrate_req = 0: connections queued on this listener as it closes are reset; set it to 1 for a lossless handover",
        );
    } else log.info(`${signal}: shutting down`);
    try {
      await relay.close(how);
    } catch (e) {
      // Whatever failed, say it in a line rather than crash with a stack trace.
      log.error(`${signal}: could not shut down cleanly: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    }
    log.info("bye");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM", "stop"));
  process.on("SIGINT", () => void stop("SIGINT", "stop"));
  process.on("SIGUSR2", () => void stop("SIGUSR2", "restart"));
  // Last: whoever reads this line (a test, a supervisor, a deploy script) may signal the relay at
  // once, so its handlers are in place first. A SIGTERM before them took the default action: the
  // process died without its shutdown (a loaded test run caught it in that gap).
  for (const line of keyLines) log.info(line);
  if (claims) claimPort(claims, relay.server.port!);
  log.info(
    `bunstr ${VERSION} listening on ${listeningOn({ host: config.network.host, port: relay.server.port!, path: config.network.path, relayUrl: config.info.relay_url, interfaces: machineInterfaces() ?? {} })} (database: ${where}, signatures: ${relay.ctx.verifier.name}, pid ${process.pid})`,
  );
}
