#!/usr/bin/env bun
// Entry point: argv -> command.
import { adminCommand } from "./cli/admin.ts";
import { USAGE } from "./cli/args.ts";
import { configCommand } from "./cli/config.ts";
import { exportCommand } from "./cli/export.ts";
import { importCommand } from "./cli/import.ts";
import { backupCommand, compactCommand, statsCommand } from "./cli/maintenance.ts";
import { UsageError } from "./cli/options.ts";
import { serve } from "./cli/serve.ts";
import { EXIT, StartupError } from "./cli/startup.ts";
import { streamCommand } from "./cli/stream.ts";
import { syncCommand } from "./cli/sync.ts";
import { ConfigError } from "./config/load.ts";
import { closest } from "./config/suggest.ts";
import { log } from "./log.ts";
import { NoDatabaseError } from "./store/sqlite/maintenance.ts";
import { VERSION } from "./version.ts";

/** The commands, for "did you mean". */
const COMMANDS = ["serve", "config", "admin", "export", "import", "backup", "compact", "stats", "sync", "stream", "version", "help"];

async function main(argv: string[]): Promise<number | undefined> {
  const [cmd, ...rest] = argv;
  if (cmd === "--version" || cmd === "-V" || cmd === "version") return (console.log(VERSION), 0);
  if (cmd === "--help" || cmd === "-h" || cmd === "help") return (console.log(USAGE), 0);
  if (cmd === "config") return configCommand(rest);
  if (cmd === "admin") return adminCommand(rest);
  if (cmd === "export") return exportCommand(rest);
  if (cmd === "import") return importCommand(rest);
  if (cmd === "backup") return backupCommand(rest);
  if (cmd === "compact") return compactCommand(rest);
  if (cmd === "stats") return statsCommand(rest);
  if (cmd === "sync") return syncCommand(rest);
  if (cmd === "stream") return streamCommand(rest);
  if (cmd === "serve") return serve(rest).then(() => undefined);
  if (cmd === undefined || cmd.startsWith("-")) return serve(argv).then(() => undefined);
  // A slip of the keyboard gets the one meant, as a misspelt flag or config key does.
  const meant = closest(cmd, COMMANDS);
  if (meant) console.error(`error: unknown command "${cmd}"; did you mean "${meant}"? (bunstr --help lists them)`);
  else console.error(`error: unknown command "${cmd}"\n\n${USAGE}`);
  return 2;
}

// --debug, anywhere on the line: a failure prints the error with its stack, not one line.
const argv = process.argv.slice(2);
const debug = argv.includes("--debug");

main(argv.filter((a) => a !== "--debug")).then(
  (code) => {
    if (code !== undefined) process.exit(code);
  },
  (err) => {
    if (debug) console.error(err);
    if (err instanceof StartupError) {
      log.error(err.message);
      process.exit(err.exitCode);
    }
    if (err instanceof ConfigError) for (const line of err.warnings) log.warn(line);
    if (err instanceof ConfigError || err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      for (const line of err.message.split("\n")) log.error(line);
      process.exit(EXIT.usage);
    }
    if (err instanceof NoDatabaseError) {
      // Most often the relay's database is elsewhere: a relative data_directory read from another
      // working directory than the service's (issue 34: `./data` run from /root).
      const hint = `; give the relay's --config, --data-dir or --db (a relative path is read from here, ${process.cwd()})`;
      log.error(err.missing ? `${err.message}${hint}` : err.message);
      process.exit(EXIT.failed);
    }
    // Unexpected: still one line (a stack of the compiled binary is minified source), unless --debug.
    if (!debug) log.error(`${err instanceof Error ? err.message : String(err)} (run again with --debug for the details)`);
    process.exit(EXIT.failed);
  },
);
