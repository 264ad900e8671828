// The reference NIP-01 filter matcher for benchmarks and the differential test: the filter text
// read literally, with arrays only (no Sets, no src/ code), so it can check the relay's answers.
//   ids/authors/kinds: the event's field is in the list;
//   #<single-letter>: the event has a tag with that name whose first value is in the list;
//   since <= created_at <= until; every condition present must hold (AND), values of one list OR;
//   stored results: created_at descending, ties by lowest id (lexical), at most `limit`.
import type { NostrEvent } from "../../src/protocol/event.ts";

export type RawFilter = Record<string, unknown>;

/** The filter's conditions pulled out of the object once, kept as plain arrays. */
export interface Naive {
  ids?: string[];
  authors?: string[];
  kinds?: number[];
  tags: [name: string, values: string[]][];
  since?: number;
  until?: number;
}

export function naiveOf(f: RawFilter): Naive {
  // Every field set (even to undefined) so all filters share one object shape: keeps millions
  // of reference matches fast.
  const n: Naive = { ids: undefined, authors: undefined, kinds: undefined, tags: [], since: undefined, until: undefined };
  for (const [key, v] of Object.entries(f)) {
    if (key === "ids") n.ids = v as string[];
    else if (key === "authors") n.authors = v as string[];
    else if (key === "kinds") n.kinds = v as number[];
    else if (key === "since") n.since = v as number;
    else if (key === "until") n.until = v as number;
    else if (key.startsWith("#")) n.tags.push([key.slice(1), v as string[]]);
  }
  return n;
}

export function naiveMatch(n: Naive, e: NostrEvent): boolean {
  if (n.ids && !n.ids.includes(e.id)) return false;
  if (n.authors && !n.authors.includes(e.pubkey)) return false;
  if (n.kinds && !n.kinds.includes(e.kind)) return false;
  if (n.since !== undefined && e.created_at < n.since) return false;
  if (n.until !== undefined && e.created_at > n.until) return false;
  for (const [name, values] of n.tags) {
    let found = false;
    for (const t of e.tags)
      if (t[0] === name && t.length >= 2 && values.includes(t[1]!)) {
        found = true;
        break;
      }
    if (!found) return false;
  }
  return true;
}

/** NIP-01 order of stored results: newest first, ties by lowest id. */
export const nip01Order = (a: NostrEvent, b: NostrEvent): number => {
  if (a.created_at !== b.created_at) return b.created_at - a.created_at;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
};

/** The stored answer of one filter: matching events, ordered, limited. */
export function naiveQuery(f: RawFilter, events: readonly NostrEvent[], limit: number): NostrEvent[] {
  const n = naiveOf(f);
  return events
    .filter((e) => naiveMatch(n, e))
    .sort(nip01Order)
    .slice(0, limit);
}
