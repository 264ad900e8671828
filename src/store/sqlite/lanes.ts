// Which reads go ahead in the reader pool's line (issue 35, the tail): a REQ whose cost an index
// bounds (a few ids, one value of one tag with a small limit, an author's replaceable events)
// takes its first slice before the heavier jobs of its own address group. Traced at 1M stored
// events, the slowest 1% of such REQs spent a third of their time in the pool's line behind feeds
// and hashtags of the same clients (bench/RESULTS.md, "Issue 35: one hop for a cheap REQ").
// Groups still take turns as before, so no address gets more than its share; a job that was
// wrongly thought cheap runs its later slices in the ordinary line.
import type { Filter } from "../../protocol/filter.ts";

/** Most ids, and most events of one tag value, of a lookup that goes ahead. */
const MAX_IDS = 20;
const MAX_TAG_LIMIT = 200;
/** Most authors of a replaceable-kinds lookup (one event per author and kind). */
const MAX_AUTHORS = 4;

/** NIP-01 replaceable and addressable kinds: one event per author and kind (and `d`). */
const replaceable = (k: number) => k === 0 || k === 3 || (k >= 10000 && k < 20000) || (k >= 30000 && k < 40000);

/** One filter whose cost an index bounds: a few ids, one value of one tag, an author's replaceables. */
export function isPointLookup(filters: readonly Filter[], limits: readonly number[]): boolean {
  if (filters.length !== 1) return false;
  const f = filters[0]!;
  if (f.search !== undefined) return false;
  if (f.ids) return f.ids.length <= MAX_IDS;
  const tags = Object.keys(f).filter((k) => k[0] === "#");
  if (tags.length === 1) return f[tags[0] as `#${string}`]!.length === 1 && limits[0]! <= MAX_TAG_LIMIT && !f.authors;
  if (tags.length > 0 || !f.authors || !f.kinds) return false;
  return f.authors.length <= MAX_AUTHORS && f.kinds.length <= 4 && f.kinds.every(replaceable);
}
