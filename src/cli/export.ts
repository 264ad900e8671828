// `bunstr export [--filter JSON] [--since N] [--until N] > events.jsonl`: stored events to stdout.
import { parseFlags } from "./args.ts";
import { exportEvents, parseExportFilter } from "../ops/export.ts";
import { bytes, duration, eta, int, Progress } from "../ops/progress.ts";
import { databaseFlags, openBulk, resolveDatabase, UsageError } from "./options.ts";

const EXPORT_USAGE =
  "usage: bunstr export [--filter JSON] [--since N] [--until N] [--include-expired] [--config F] [--data-dir D | --db F] > events.jsonl";

const timestamp = (flag: string, v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  if (!/^\d{1,15}$/.test(v)) throw new UsageError(`--${flag} must be a unix time in seconds, not ${JSON.stringify(v)}`);
  return Number(v);
};

export async function exportCommand(argv: string[]): Promise<number> {
  const { values } = parseFlags({
    args: argv,
    options: {
      ...databaseFlags,
      filter: { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
      "include-expired": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return (console.log(EXPORT_USAGE), 0);
  const since = timestamp("since", values.since);
  const until = timestamp("until", values.until);
  let compiled;
  try {
    compiled = values.filter !== undefined ? parseExportFilter(values.filter) : undefined;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const { config, dbPath } = await resolveDatabase(values);
  const db = await openBulk(config, dbPath, "readonly");

  const out = process.stdout;
  let closed = false;
  out.on("error", (e: NodeJS.ErrnoException) => {
    // The reader went away (`| head`): stop quietly, as cat does.
    if (e.code === "EPIPE") closed = true;
    else throw e;
  });
  const progress = new Progress("export");
  try {
    const s = await exportEvents(
      db,
      {
        filter: compiled?.source,
        since,
        until,
        now: values["include-expired"] || !config.nips.nip40 ? 0 : Math.floor(Date.now() / 1000),
        write: (chunk) => {
          if (closed) throw new StdoutClosed();
          if (!out.write(chunk)) return new Promise<void>((resolve) => out.once("drain", resolve));
        },
        onProgress: (p) =>
          progress.update(
            () => `${int(p.events)} events, ${int(p.events / progress.seconds)}/s, ${eta(p.scanned, p.total, progress.seconds)}`,
          ),
      },
      compiled,
    );
    progress.end();
    // Flush stdout before exiting (main calls process.exit), then one summary line on stderr.
    await new Promise<void>((resolve) => out.write("", () => resolve()));
    process.stderr.write(`exported ${int(s.events)} events (${bytes(s.bytes)}) from ${dbPath} in ${duration(progress.seconds)}\n`);
  } catch (e) {
    progress.end();
    if (!(e instanceof StdoutClosed)) throw e;
  } finally {
    await db.close();
  }
  return 0;
}

class StdoutClosed extends Error {}
