// At start: another relay's database in the data directory. Pointing bunstr at a nostr-rs-relay
// or strfry directory would otherwise start an empty bunstr.sqlite beside it without a word.
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Config } from "../config/schema.ts";
import { databasePath } from "./options.ts";

/** One warning per other relay's database found where bunstr keeps its own. */
export function foreignDataWarnings(config: Config): string[] {
  if (config.database.engine !== "sqlite" || config.database.in_memory) return [];
  const db = databasePath(config);
  const dirs = [...new Set([resolve(config.database.data_directory), dirname(db)])];
  const out: string[] = [];
  for (const dir of dirs) {
    const nostrDb = join(dir, "nostr.db");
    if (existsSync(nostrDb))
      out.push(
        `warning: ${nostrDb} is a nostr-rs-relay database; bunstr does not serve it (it serves ${db}). ` +
          `To bring its events over: bunstr import --from nostr-rs-relay ${nostrDb} --db ${db}  ` +
          `(then move nostr.db away to silence this warning)`,
      );
    const mdb = join(dir, "data.mdb");
    if (existsSync(mdb))
      out.push(
        `warning: ${mdb} looks like a strfry (LMDB) database; bunstr cannot read it (it serves ${db}). ` +
          `To bring its events over: strfry export > events.jsonl, then bunstr import events.jsonl --db ${db}  ` +
          `(then move data.mdb away to silence this warning)`,
      );
  }
  return out;
}
