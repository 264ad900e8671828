// Command-line flags of `bunstr serve`, mapped onto config keys (CLI > file > default).
import { parseArgs } from "node:util";

export const USAGE = `bunstr — a Nostr relay

Usage:
  bunstr [serve] [flags]         run the relay
  bunstr config init             print a fully commented default config
  bunstr config check [--lenient] FILE
                                 validate a config file: every problem, with file:line
  bunstr admin add|remove NPUB|HEX --config FILE
                                 who may use /admin and NIP-86: edits [admin] pubkeys in FILE
                                 (comments kept), then reloads the relay running with FILE (SIGHUP)
  bunstr admin list --config FILE
                                 the admins FILE lists
  bunstr export [--filter JSON] [--since N] [--until N] [--include-expired] > events.jsonl
                                 stored events as JSON lines, in commit order (relay may run)
  bunstr import [FILE] [--no-verify] [--json] < events.jsonl
                                 JSON lines in, with the relay's checks and storage rules (relay may run)
  bunstr backup FILE [--force]   consistent copy of the database (relay may run)
  bunstr compact [--online]      VACUUM, checkpoint, optimize (holds the write lock: stop the relay)
  bunstr stats [--json]          events, authors, kinds, sizes
  bunstr sync URL [--filter JSON] [--dir down|up|both]
                                 NIP-77 reconcile with a remote relay, then download/upload the difference
  bunstr stream URL [--filter JSON] [--since N]
                                 import a remote relay's new events as they come, until SIGINT/SIGTERM
  bunstr --version | --help

Flags of serve:
  --config FILE     TOML config (nostr-rs-relay's config.toml loads too)
  --host ADDR       listen address            [network] host     (default 0.0.0.0)
  --port N          listen port               [network] port     (default 7447)
  --path PATH       websocket/NIP-11 path     [network] path     (default /)
  --db FILE         SQLite database file      [database] file
  --data-dir DIR    directory for the database [database] data_directory (default ./data)
  --auth            require NIP-42 auth       [options] auth = "always"
  --no-verify       skip signature checks     [options] verify_signatures = false
  --lenient         start even if the --config file has unknown keys (each is warned about)
  --debug           on a failure, print the error with its stack (any command)

export, import, backup, compact, stats, sync and stream find the database as serve does:
  --config FILE, --db FILE, --data-dir DIR, --lenient (see docs/operations.md)

Exit codes: 0 ok, 1 unexpected failure, 2 command-line or config mistake, 3 cannot listen
(host, port), 4 data directory or database unusable (docs/operations.md, Exit codes)
`;

export interface ServeFlags {
  config?: string;
  overrides: [path: string, value: unknown][];
  /** Unknown keys in the --config file are warnings, not errors. */
  lenient: boolean;
}

export function parseServeFlags(argv: string[]): ServeFlags {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      config: { type: "string" },
      host: { type: "string" },
      port: { type: "string" },
      path: { type: "string" },
      db: { type: "string" },
      "data-dir": { type: "string" },
      auth: { type: "boolean" },
      "no-verify": { type: "boolean" },
      lenient: { type: "boolean" },
    },
  });
  const overrides: [string, unknown][] = [];
  if (values.host !== undefined) overrides.push(["network.host", values.host]);
  if (values.port !== undefined) overrides.push(["network.port", /^\d+$/.test(values.port) ? Number(values.port) : values.port]);
  if (values.path !== undefined) overrides.push(["network.path", values.path]);
  if (values.db !== undefined) overrides.push(["database.file", values.db]);
  if (values["data-dir"] !== undefined) overrides.push(["database.data_directory", values["data-dir"]]);
  if (values.auth) overrides.push(["options.auth", "always"]);
  if (values["no-verify"]) overrides.push(["options.verify_signatures", false]);
  return { config: values.config, overrides, lenient: values.lenient ?? false };
}
