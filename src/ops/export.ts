// `bunstr export`: every stored event as one JSON line, byte for byte as stored, in commit order
// (so an import replays deletions and replacements as they happened). Pages of PAGE events,
// each page its own short read: constant memory, and a running relay is never held up.
import { compileFilter, matchFilter, type CompiledFilter, type Filter } from "../protocol/filter.ts";
import { compileSearch } from "../nips/nip50.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { BulkStore, ExportScope } from "../store/types.ts";

const PAGE = 1000;

interface ExportOptions {
  /** A NIP-01 filter (without limit); ids, authors, kinds, since and until are matched in SQL. */
  filter?: Filter;
  since?: number;
  until?: number;
  /** Leave out events expired at this time, as the relay hides them; 0 keeps them. */
  now: number;
  /** Receives one page of lines ("…\n…\n"); awaited, so a slow reader slows the export down. */
  write: (chunk: string) => void | Promise<void>;
  onProgress?: (p: { events: number; scanned: number; total: number }) => void;
}

interface ExportSummary {
  events: number;
  bytes: number;
}

/** Validates an export filter: a NIP-01 filter object; `limit` has no meaning here. */
export function parseExportFilter(text: string): CompiledFilter {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error(`--filter is not JSON: ${text.slice(0, 80)}`);
  }
  if (raw && typeof raw === "object" && "limit" in raw) throw new Error("--filter: limit is not supported by export (use since/until)");
  return compileFilter(raw, {
    maxValues: 1_000_000,
    compileSearch: (q) => compileSearch(q, new Set()),
  });
}

export async function exportEvents(db: BulkStore, opts: ExportOptions, compiled?: CompiledFilter): Promise<ExportSummary> {
  const f = opts.filter ?? {};
  const scope: ExportScope = {
    since: maxOf(f.since, opts.since),
    until: minOf(f.until, opts.until),
    kinds: f.kinds,
    authors: f.authors,
    ids: f.ids,
    now: opts.now,
  };
  // Tags and search are checked on the event itself; everything else was already matched in SQL.
  const needsMatch = compiled !== undefined && (compiled.tags.length > 0 || compiled.search !== undefined);
  if (compiled?.neverMatch) return { events: 0, bytes: 0 };
  const page = db.exportPager(scope);
  // The cut: what was committed when the export started (later writes are for the next export).
  const { min, max } = await db.seqRange();
  let after = min - 1;
  let events = 0;
  let bytes = 0;
  while (after < max) {
    const rows = await page(after, max, PAGE);
    if (rows.length === 0) break;
    after = rows[rows.length - 1]!.seq;
    let chunk = "";
    for (const r of rows) {
      if (needsMatch && !matchFilter(compiled!, JSON.parse(r.json) as NostrEvent)) continue;
      chunk += `${r.json}\n`;
      events++;
    }
    if (chunk) {
      bytes += Buffer.byteLength(chunk);
      await opts.write(chunk);
    }
    opts.onProgress?.({ events, scanned: after - min + 1, total: max - min + 1 });
  }
  return { events, bytes };
}

const maxOf = (a?: number, b?: number) => (a === undefined ? b : b === undefined ? a : Math.max(a, b));
const minOf = (a?: number, b?: number) => (a === undefined ? b : b === undefined ? a : Math.min(a, b));
