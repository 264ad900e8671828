// Where the bytes of a stopped relay's SQLite database go: per table, its indexes, the full-text
// index, free pages (SQLite's dbstat virtual table, opened read-only after the relay exited).
import { Database } from "bun:sqlite";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Bytes per part, largest first; "free" = pages on the freelist. */
export type DbParts = [part: string, bytes: number][];

/** The parts of the *.sqlite files in `dir`, or undefined when dbstat is not available. */
export function dbParts(dir: string): DbParts | undefined {
  if (!existsSync(dir)) return undefined;
  const parts = new Map<string, number>();
  const add = (k: string, n: number) => parts.set(k, (parts.get(k) ?? 0) + n);
  try {
    for (const f of readdirSync(dir).filter((x) => x.endsWith(".sqlite"))) {
      const db = new Database(join(dir, f), { readonly: true });
      try {
        const owner = new Map<string, { type: string; table: string }>();
        for (const r of db.query("SELECT type, name, tbl_name FROM sqlite_schema").all() as {
          type: string;
          name: string;
          tbl_name: string;
        }[])
          owner.set(r.name, { type: r.type, table: r.tbl_name });
        for (const r of db.query("SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name").all() as {
          name: string;
          bytes: number;
        }[]) {
          const o = owner.get(r.name);
          if (/_fts($|_)/.test(r.name)) add("full-text index", r.bytes);
          else if (o?.type === "index" || r.name.startsWith("sqlite_autoindex_"))
            add(`${o?.table ?? r.name.replace(/^sqlite_autoindex_|_\d+$/g, "")} indexes`, r.bytes);
          else if (o?.type === "table") add(`${r.name} table`, r.bytes);
          else add("other", r.bytes);
        }
        const { free } = db
          .query("SELECT (SELECT freelist_count FROM pragma_freelist_count) * (SELECT page_size FROM pragma_page_size) AS free")
          .get() as { free: number };
        if (free > 0) add("free pages", free);
      } finally {
        db.close();
      }
    }
  } catch {
    return undefined;
  }
  return [...parts].sort((a, b) => b[1] - a[1]);
}
