// Reading another relay's SQLite database, for `bunstr import --from nostr-rs-relay`. Opened
// read-only (the other relay may still be running on it; WAL lets us read beside it) and read in
// pages by rowid, so memory stays bounded whatever its size.
//
// nostr-rs-relay (src/repo/sqlite_migration.rs, schema versions 1 to 18): table `event`, one row
// per event, `id INTEGER PRIMARY KEY` and `content TEXT`, the whole event as JSON, in every
// version. Since version 2 a `hidden` column marks events it no longer serves: deleted by NIP-09,
// or (before version 15) replaced by a newer version. Hidden rows are skipped and counted.
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";

/** The file is missing or is not the database it was said to be. */
export class ForeignDatabaseError extends Error {}

export interface ForeignSource {
  /** The other relay's schema version (PRAGMA user_version). */
  version: number;
  /** Rows that will be read (not hidden). */
  total: number;
  /** Rows skipped: marked hidden (deleted or replaced) by the other relay. */
  hidden: number;
  /** The event JSON of each row that is read, parsed (a row that does not parse is handed on as its text, to be counted invalid), in pages. */
  batches(): Generator<unknown[]>;
  close(): void;
}

const NOSTR_RS_RELAY_APPLICATION_ID = 1654008667;

export function openNostrRsRelay(path: string, pageSize = 1000): ForeignSource {
  if (!existsSync(path)) throw new ForeignDatabaseError(`${path}: no such file`);
  let db: Database;
  try {
    db = new Database(path, { readonly: true });
  } catch (e) {
    throw new ForeignDatabaseError(`${path}: cannot open: ${(e as Error).message}`);
  }
  try {
    const columns = new Set((db.query("PRAGMA table_info(event)").all() as { name: string }[]).map((c) => c.name));
    if (!columns.has("content") || !columns.has("event_hash")) {
      const { application_id } = db.query("PRAGMA application_id").get() as { application_id: number };
      const what =
        application_id === NOSTR_RS_RELAY_APPLICATION_ID
          ? "has no event table"
          : "is not a nostr-rs-relay database (no event table with content)";
      throw new ForeignDatabaseError(`${path} ${what}`);
    }
    const { user_version: version } = db.query("PRAGMA user_version").get() as { user_version: number };
    const hasHidden = columns.has("hidden");
    // hidden is NULL on rows written before it was set everywhere; only a true value hides.
    const shown = hasHidden ? "(hidden IS NULL OR hidden = 0)" : "1";
    const { n: total } = db.query(`SELECT count(*) AS n FROM event WHERE ${shown}`).get() as { n: number };
    const { n: hidden } = hasHidden
      ? (db.query("SELECT count(*) AS n FROM event WHERE NOT (hidden IS NULL OR hidden = 0)").get() as { n: number })
      : { n: 0 };
    const page = db.query(`SELECT id, content FROM event WHERE id > ? AND ${shown} ORDER BY id LIMIT ?`);
    return {
      version,
      total,
      hidden,
      *batches() {
        let after = -1;
        for (;;) {
          const rows = page.all(after, pageSize) as { id: number; content: string }[];
          if (rows.length === 0) return;
          after = rows[rows.length - 1]!.id;
          yield rows.map((r) => parseOrText(r.content));
        }
      },
      close: () => db.close(),
    };
  } catch (e) {
    db.close();
    if (e instanceof ForeignDatabaseError) throw e;
    throw new ForeignDatabaseError(`${path}: ${(e as Error).message}`);
  }
}

function parseOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
