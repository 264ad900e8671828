// `bunstr sync <relay-url> [--filter JSON] [--dir down|up|both]`: NIP-77 reconciliation with a
// remote relay, then the missing events downloaded (verified, as an import) and/or uploaded.
import { parseArgs } from "node:util";
import { duration, int, Progress } from "../ops/progress.ts";
import { parseSyncFilter, syncWithRelay, type Direction, type SyncSummary } from "../ops/sync.ts";
import { openDatabase } from "../store/sqlite/db.ts";
import { importVerifier } from "../verify/configured.ts";
import { databaseFlags, resolveDatabase, UsageError } from "./options.ts";

export const SYNC_USAGE =
  "usage: bunstr sync <ws[s]://relay> [--filter JSON] [--dir down|up|both] [--no-verify] [--json] [--config F] [--data-dir D | --db F]";

export function relayUrl(text: string | undefined, usage: string): string {
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

export async function syncCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...databaseFlags,
      filter: { type: "string" },
      dir: { type: "string", default: "both" },
      "no-verify": { type: "boolean" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return (console.log(SYNC_USAGE), 0);
  if (positionals.length !== 1) throw new UsageError(`sync takes one relay URL\n${SYNC_USAGE}`);
  const url = relayUrl(positionals[0], SYNC_USAGE);
  const direction = values.dir as Direction;
  if (!["down", "up", "both"].includes(direction))
    throw new UsageError(`--dir must be down, up or both, not ${JSON.stringify(values.dir)}`);
  let filter;
  try {
    filter = parseSyncFilter(values.filter, "sync");
  } catch (e) {
    throw new UsageError(`--filter: ${(e as Error).message}`);
  }
  const { config, dbPath } = await resolveDatabase(values);
  const db = openDatabase({ path: dbPath, synchronous: config.database.synchronous as "normal" | "full" });
  const verifier = values["no-verify"] || direction === "up" ? undefined : importVerifier(config);
  const progress = new Progress("sync");
  const keepAlive = setInterval(() => {}, 1 << 30);
  let s: SyncSummary;
  try {
    s = await syncWithRelay(db, { config, url, filter, direction, verifier, onProgress: (t) => progress.update(() => t) });
  } catch (e) {
    progress.end();
    console.error(`error: sync stopped: ${(e as Error).message}`);
    return 1;
  } finally {
    clearInterval(keepAlive);
    verifier?.close();
    db.close();
  }
  progress.end();
  if (values.json) console.log(JSON.stringify({ database: dbPath, url, direction, ...s }));
  else printSyncSummary(s, url, dbPath, direction);
  return 0;
}

function printSyncSummary(s: SyncSummary, url: string, dbPath: string, direction: Direction): void {
  const how = s.method === "negentropy" ? `NIP-77, ${s.roundTrips} round trips` : `plain REQ download (${s.fallbackReason})`;
  console.log(`synced ${dbPath} with ${url} (${direction}) in ${duration(s.seconds)}: ${how}`);
  console.log(`  local ${int(s.local)}, only here (have) ${int(s.have)}, only there (need) ${int(s.need)}`);
  if (direction !== "up") {
    const i = s.imported;
    const invalid = i ? i.badJson + i.badEvent + i.badId + i.badSig : 0;
    console.log(
      `  downloaded ${int(s.received)}: stored ${int(i?.accepted ?? 0)}, duplicate ${int(i?.duplicate ?? 0)}, older ${int(i?.older ?? 0)}, ` +
        `deleted ${int(i?.deleted ?? 0)}, refused ${int(i?.refused ?? 0)}, invalid ${int(invalid)}`,
    );
  }
  if (direction !== "down") {
    const refused = Object.entries(s.refused)
      .map(([r, n]) => `${r} ${int(n)}`)
      .join(", ");
    console.log(
      `  uploaded ${int(s.uploaded)}, refused ${int(Object.values(s.refused).reduce((a, b) => a + b, 0))}${refused ? ` (${refused})` : ""}`,
    );
  }
}
