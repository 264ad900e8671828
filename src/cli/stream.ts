// `bunstr stream <relay-url> [--filter JSON] [--since N]`: import a remote relay's events as they
// arrive, reconnecting after drops, until SIGINT or SIGTERM; then a summary.
import { duration, int, Progress } from "../ops/progress.ts";
import { streamFromRelay } from "../ops/stream.ts";
import { importVerifier } from "../verify/configured.ts";
import { groupStateFor } from "./import.ts";
import { openBulk, resolveDatabase, UsageError } from "./options.ts";
import { parseRemoteArgs } from "./remote.ts";

const STREAM_USAGE =
  "usage: bunstr stream <ws[s]://relay> [--filter JSON] [--since N] [--no-verify] [--json] [--config F] [--data-dir D | --db F]";

export async function streamCommand(argv: string[]): Promise<number> {
  const args = parseRemoteArgs(argv, "stream", STREAM_USAGE, { since: { type: "string" } });
  if (!args) return 0;
  const { values, url, filter } = args;
  if (values.since !== undefined && !/^\d{1,15}$/.test(values.since))
    throw new UsageError(`--since must be a unix time in seconds, not ${JSON.stringify(values.since)}`);
  const { config, dbPath } = await resolveDatabase(values);
  const db = await openBulk(config, dbPath, "create");
  const groups = await groupStateFor(config, db);
  const verifier = values["no-verify"] ? undefined : importVerifier(config);
  const progress = new Progress("stream");
  const stamp = () => new Date().toISOString().slice(0, 19) + "Z";
  const streamer = streamFromRelay(db, {
    config,
    url,
    filter,
    since: values.since !== undefined ? Number(values.since) : filter.since,
    verifier,
    groups,
    log: (t) => {
      progress.end();
      console.error(`${stamp()} stream: ${t}`);
    },
    onProgress: (s) => progress.update(() => `${int(s.received)} received, ${int(s.accepted)} stored, ${int(s.drops)} reconnects`),
  });
  console.error(`${stamp()} stream: ${url} -> ${dbPath}`);
  const stop = () => streamer.stop();
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    const s = await streamer.done;
    progress.end();
    if (values.json) console.log(JSON.stringify({ database: dbPath, url, ...s }));
    else {
      const invalid = s.badJson + s.badEvent + s.badId + s.badSig;
      console.log(`streamed from ${url} into ${dbPath} for ${duration(s.seconds)}: ${int(s.connects)} connections, ${int(s.drops)} drops`);
      console.log(
        `  received ${int(s.received)}: stored ${int(s.accepted)}, duplicate ${int(s.duplicate)}, older ${int(s.older)}, deleted ${int(s.deleted)}, ` +
          `refused ${int(s.refused)}, ephemeral ${int(s.ephemeral)}, invalid ${int(invalid)}`,
      );
    }
  } finally {
    clearInterval(keepAlive);
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    verifier?.close();
    await db.close();
  }
  return 0;
}
