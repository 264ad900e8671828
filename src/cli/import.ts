// `bunstr import [FILE] [--no-verify] [--json]`: JSON lines (stdin by default) into the database;
// `bunstr import --from nostr-rs-relay PATH/nostr.db`: that relay's SQLite database, read directly.
import { existsSync, fstatSync } from "node:fs";
import { parseFlags } from "./args.ts";
import { bytes, duration, eta, int, Progress } from "../ops/progress.ts";
import { importEvents, importGroupState, importParsed, type ImportOptions, type ImportSummary } from "../ops/import.ts";
import type { GroupState } from "../groups/state.ts";
import type { Config } from "../config/schema.ts";
import { ForeignDatabaseError, openNostrRsRelay, type ForeignSource } from "../store/sqlite/foreign.ts";
import type { BulkStore } from "../store/types.ts";
import { importVerifier } from "../verify/configured.ts";
import { databaseFlags, openBulk, resolveDatabase, UsageError, type DatabaseFlagValues } from "./options.ts";
import { resolveRelayKey } from "./relay-key.ts";

const IMPORT_USAGE =
  "usage: bunstr import [FILE] [--no-verify] [--json] [--config F] [--data-dir D | --db F] < events.jsonl\n" +
  "       bunstr import --from nostr-rs-relay PATH/nostr.db [--no-verify] [--json] [--config F] [--data-dir D | --db F]\n" +
  "  from strfry: strfry export > events.jsonl, then bunstr import events.jsonl";

/** The relays whose database `--from` reads. */
const FROM = ["nostr-rs-relay"];

export async function importCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags({
    args: argv,
    allowPositionals: true,
    options: {
      ...databaseFlags,
      "no-verify": { type: "boolean" },
      json: { type: "boolean" },
      from: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return (console.log(IMPORT_USAGE), 0);
  if (values.from !== undefined) return importFrom(values.from, positionals, values);
  if (positionals.length > 1) throw new UsageError(`import takes one input file at most\n${IMPORT_USAGE}`);
  const file = positionals[0] !== undefined && positionals[0] !== "-" ? positionals[0] : undefined;
  if (!file && process.stdin.isTTY) throw new UsageError(`import reads JSON lines from stdin or FILE\n${IMPORT_USAGE}`);
  const { config, dbPath } = await resolveDatabase(values);

  let input: AsyncIterable<Uint8Array>;
  let size: number | undefined;
  try {
    if (file) {
      const f = Bun.file(file);
      if (!(await f.exists())) throw new Error(`${file}: no such file`);
      size = f.size;
      input = f.stream();
    } else {
      const st = fstatSync(0);
      size = st.isFile() ? st.size : undefined;
      input = Bun.stdin.stream();
    }
  } catch (e) {
    console.error(`error: cannot read the input: ${(e as Error).message}`);
    return 1;
  }

  const target = targetLabel(config, dbPath);
  const db = await openTarget(config, dbPath);
  if (!db) return 1;
  const groups = await groupStateFor(config, db);
  const verifier = values["no-verify"] ? undefined : importVerifier(config);
  const summary = await runImport(db, verifier, undefined, (progress) =>
    importEvents(db, input, {
      config,
      verifier,
      groups,
      // Lines read run ahead of lines settled (verifying, waiting for their transaction).
      ...busyAndProgress(progress, (s, settled) => {
        const rate = settled / Math.max(s.seconds, 1e-3);
        const part = size ? `, ${eta((s.bytes * settled) / Math.max(1, s.lines), size, s.seconds)}` : "";
        return `${int(settled)} lines, ${int(s.accepted)} stored, ${int(rate)}/s${part}`;
      }),
    }),
  );
  if (!summary) return 1;
  if (values.json) console.log(JSON.stringify({ database: dbPath, verified: verifier !== undefined, ...summary }));
  else printSummary(summary, target, verifier?.name);
  return 0;
}

/**
 * NIP-29 ([groups] enabled): the target's group state, with the relay key found as `serve`
 * finds it (created if there is none yet, said on stderr: stdout may be --json).
 */
export async function groupStateFor(config: Config, db: BulkStore): Promise<GroupState | undefined> {
  if (!config.groups.enabled) return undefined;
  const key = await resolveRelayKey(config, db, (line) => console.error(line));
  return importGroupState(db, config, key.pubkey);
}

/** The database to import into, or undefined after saying why it cannot be opened. */
/**
 * The database as the summary names it. An import creates the file when there is none, which is
 * how a relay is moved; but a `--config` whose relative data_directory is read from another working
 * directory than the relay's (issue 34: `./data` from /root) would fill a new database nobody serves
 * without a word: the summary says it was new.
 */
function targetLabel(config: Config, dbPath: string): string {
  const fresh = config.database.engine === "sqlite" && !config.database.in_memory && !existsSync(dbPath);
  return fresh ? `${dbPath} (a new database: there was none)` : dbPath;
}

async function openTarget(config: Config, dbPath: string): Promise<BulkStore | undefined> {
  try {
    // Into Postgres too (moving a relay to several nodes: bunstr export | bunstr import --config pg.toml).
    return await openBulk(config, dbPath, "create");
  } catch (e) {
    console.error(`error: cannot open the database ${dbPath}: ${(e as Error).message}`);
    return undefined;
  }
}

/** `--from nostr-rs-relay PATH`: every event its database still serves, through the same admission as a JSON-lines import. */
async function importFrom(
  from: string,
  positionals: string[],
  values: DatabaseFlagValues & { "no-verify"?: boolean; json?: boolean },
): Promise<number> {
  if (!FROM.includes(from)) throw new UsageError(`import --from reads ${FROM.join(", ")}; "${from}" is not one of them\n${IMPORT_USAGE}`);
  if (positionals.length !== 1) throw new UsageError(`import --from ${from} takes the path of its database (nostr.db)\n${IMPORT_USAGE}`);
  const path = positionals[0]!;
  const { config, dbPath } = await resolveDatabase(values);
  let source: ForeignSource;
  try {
    source = openNostrRsRelay(path);
  } catch (e) {
    if (!(e instanceof ForeignDatabaseError)) throw e;
    console.error(`error: cannot read the nostr-rs-relay database: ${e.message}`);
    return 1;
  }
  const target = targetLabel(config, dbPath);
  const db = await openTarget(config, dbPath);
  if (!db) return (source.close(), 1);
  const groups = await groupStateFor(config, db);
  const verifier = values["no-verify"] ? undefined : importVerifier(config);
  const summary = await runImport(db, verifier, source, (progress) =>
    importParsed(db, source.batches(), {
      ...busyAndProgress(
        progress,
        (s, settled) =>
          `${int(settled)} of ${int(source.total)} events, ${int(s.accepted)} stored, ${eta(settled, source.total, s.seconds)}`,
      ),
      config,
      verifier,
      groups,
    }),
  );
  if (!summary) return 1;
  const from_ = { from, path, schemaVersion: source.version, hidden: source.hidden };
  if (values.json) console.log(JSON.stringify({ database: dbPath, verified: verifier !== undefined, ...from_, ...summary }));
  else {
    console.log(
      `read ${int(source.total)} events from nostr-rs-relay's ${path} (schema v${source.version}); ` +
        `skipped ${int(source.hidden)} it marked hidden (deleted, or replaced by a newer version)`,
    );
    printSummary(summary, target, verifier?.name, "event");
  }
  return 0;
}

/**
 * Runs an import with its progress line, the verify workers held open (they are unref'd: the
 * relay's server keeps its process alive, here nothing would), and everything closed after;
 * undefined after saying why it stopped.
 */
async function runImport(
  db: BulkStore,
  verifier: { close(): void } | undefined,
  source: { close(): void } | undefined,
  run: (progress: Progress) => Promise<ImportSummary>,
): Promise<ImportSummary | undefined> {
  const progress = new Progress("import");
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    const summary = await run(progress);
    progress.end();
    return summary;
  } catch (e) {
    progress.end();
    // Reading failed half-way, or SQLite did (disk full, I/O error): what was committed stays.
    console.error(`error: import stopped: ${(e as Error).message}`);
    return undefined;
  } finally {
    clearInterval(keepAlive);
    verifier?.close();
    source?.close();
    await db.close();
  }
}

/** The progress line and the locked-database note, as ImportOptions. */
function busyAndProgress(
  progress: Progress,
  render: (s: ImportSummary, settled: number) => string,
): Pick<ImportOptions, "onBusy" | "onProgress"> {
  return {
    onBusy: () => {
      progress.end();
      console.error("import: the database is locked by another writer (a compact?); waiting for it");
    },
    onProgress: (s) =>
      progress.update(() =>
        render(s, s.accepted + s.duplicate + s.older + s.deleted + s.refused + s.ephemeral + s.badJson + s.badEvent + s.badId + s.badSig),
      ),
  };
}

function printSummary(s: ImportSummary, dbPath: string, verifierName: string | undefined, unit: "line" | "event" = "line"): void {
  const invalid = s.badJson + s.badEvent + s.badId + s.badSig;
  const size = unit === "line" ? ` (${bytes(s.bytes)})` : "";
  console.log(
    `imported ${int(s.lines)} ${unit}s${size} into ${dbPath} in ${duration(s.seconds)}, ${int(s.lines / Math.max(s.seconds, 1e-3))} ${unit}s/s; signatures: ${verifierName ?? "not checked (--no-verify)"}`,
  );
  console.log(
    `  accepted ${int(s.accepted)}, duplicate ${int(s.duplicate)}, older than the stored version ${int(s.older)}, ` +
      `deleted or vanished ${int(s.deleted)}, refused by config ${int(s.refused)}, ephemeral (not stored) ${int(s.ephemeral)}`,
  );
  console.log(
    `  invalid ${int(invalid)}: bad JSON ${int(s.badJson)}, bad event ${int(s.badEvent)}, bad id ${int(s.badId)}, bad signature ${int(s.badSig)}`,
  );
  for (const p of s.problems) console.log(`  ${unit} ${p.line}: ${p.reason}`);
}
