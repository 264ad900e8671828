// The flags `bunstr sync` and `bunstr stream` share: one relay URL, --filter, --no-verify, --json
// and the database's; each command adds its own (--dir, --since).
import type { ParseArgsOptionsConfig } from "node:util";
import { parseFlags } from "./args.ts";
import type { Filter } from "../protocol/filter.ts";
import { parseSyncFilter } from "../ops/sync.ts";
import { databaseFlags, UsageError } from "./options.ts";

const remoteFlags = {
  ...databaseFlags,
  filter: { type: "string" },
  "no-verify": { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function relayUrl(text: string | undefined, usage: string): string {
  if (!text) throw new UsageError(`a relay URL is required\n${usage}`);
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new UsageError(`not a URL: ${text}\n${usage}`);
  }
  if (u.protocol !== "ws:" && u.protocol !== "wss:")
    throw new UsageError(`the relay URL must start with ws:// or wss://, not ${u.protocol}//`);
  return u.href;
}

/** The parsed flags, the relay URL and the filter; undefined for --help (the usage is printed). */
export function parseRemoteArgs<O extends ParseArgsOptionsConfig>(argv: string[], command: "sync" | "stream", usage: string, own: O) {
  const { values, positionals } = parseFlags({ args: argv, allowPositionals: true, options: { ...remoteFlags, ...own } });
  const shared = values as { help?: boolean; filter?: string }; // what remoteFlags gives, whatever `own` adds
  if (shared.help) return void console.log(usage);
  if (positionals.length !== 1) throw new UsageError(`${command} takes one relay URL\n${usage}`);
  const url = relayUrl(positionals[0], usage);
  let filter: Filter;
  try {
    filter = parseSyncFilter(shared.filter, command);
  } catch (e) {
    throw new UsageError(`--filter: ${(e as Error).message}`);
  }
  return { values, url, filter };
}
