// `bunstr sync <relay-url> [--filter JSON] [--dir down|up|both]`: NIP-77 reconciliation with a
// remote relay, then the missing events downloaded (verified, as an import) and/or uploaded.
import { duration, int, Progress } from "../ops/progress.ts";
import { syncWithRelay, type Direction, type SyncSummary } from "../ops/sync.ts";
import { importVerifier } from "../verify/configured.ts";
import { groupStateFor } from "./import.ts";
import { openBulk, resolveDatabase, UsageError } from "./options.ts";
import { parseRemoteArgs } from "./remote.ts";

const SYNC_USAGE =
  "usage: bunstr sync <ws[s]://relay> [--filter JSON] [--dir down|up|both] [--no-verify] [--json] [--config F] [--data-dir D | --db F]";

export async function syncCommand(argv: string[]): Promise<number> {
  const args = parseRemoteArgs(argv, "sync", SYNC_USAGE, { dir: { type: "string", default: "both" } });
  if (!args) return 0;
  const { values, url, filter } = args;
  const direction = values.dir as Direction;
  if (!["down", "up", "both"].includes(direction))
    throw new UsageError(`--dir must be down, up or both, not ${JSON.stringify(values.dir)}`);
  const { config, dbPath } = await resolveDatabase(values);
  const db = await openBulk(config, dbPath, "create");
  const verifier = values["no-verify"] || direction === "up" ? undefined : importVerifier(config);
  const progress = new Progress("sync");
  const keepAlive = setInterval(() => {}, 1 << 30);
  let s: SyncSummary;
  try {
    const groups = direction === "up" ? undefined : await groupStateFor(config, db);
    s = await syncWithRelay(db, { config, url, filter, direction, verifier, groups, onProgress: (t) => progress.update(() => t) });
  } catch (e) {
    progress.end();
    console.error(`error: sync stopped: ${(e as Error).message}`);
    return 1;
  } finally {
    clearInterval(keepAlive);
    verifier?.close();
    await db.close();
  }
  progress.end();
  if (values.json) console.log(JSON.stringify({ database: dbPath, url, direction, ...s }));
  else printSyncSummary(s, url, dbPath, direction);
  return 0;
}

/** "blocked 3, invalid 1" */
const byReason = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([r, n]) => `${r} ${int(n)}`)
    .join(", ");
const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/** Every have and need id is accounted for: what went up, what came down, and what did not and why. */
function printSyncSummary(s: SyncSummary, url: string, dbPath: string, direction: Direction): void {
  const how = s.method === "negentropy" ? `NIP-77, ${s.roundTrips} round trips` : `plain REQ download (${s.fallbackReason})`;
  console.log(`synced ${dbPath} with ${url} (${direction}) in ${duration(s.seconds)}: ${how}`);
  console.log(`  local ${int(s.local)}, only here (have) ${int(s.have)}, only there (need) ${int(s.need)}`);
  if (direction !== "up") {
    const i = s.imported;
    const invalid = i ? i.badJson + i.badEvent + i.badId + i.badSig : 0;
    console.log(
      `  downloaded ${int(s.received)}: stored ${int(i?.accepted ?? 0)}, duplicate ${int(i?.duplicate ?? 0)}, older ${int(i?.older ?? 0)}, ` +
        `deleted ${int(i?.deleted ?? 0)}, refused ${int(i?.refused ?? 0)}, invalid ${int(invalid)}` +
        (s.notReceived > 0 ? `; not sent by the remote ${int(s.notReceived)} (it refused to serve them or no longer holds them)` : ""),
    );
  } else if (s.need > 0) console.log(`  only there: not downloaded (--dir up)`);
  if (direction !== "down") {
    const refused = byReason(s.refused);
    const gone = total(s.gone);
    console.log(
      `  uploaded ${int(s.uploaded)}, refused ${int(total(s.refused))}${refused ? ` (${refused})` : ""}` +
        (s.alreadyThere > 0 ? `, already there ${int(s.alreadyThere)} (the remote held them; its answer did not list them)` : "") +
        (gone > 0 ? `, not uploaded because no longer here ${int(gone)} (${byReason(s.gone)})` : ""),
    );
  } else if (s.have > 0) console.log(`  only here: not uploaded (--dir down)`);
}
