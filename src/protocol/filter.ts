// REQ filters (NIP-01): validate and compile once, then match without allocating.
import { isHex64, type NostrEvent } from "./event.ts";
import { MAX_KIND } from "./kinds.ts";
import { ProtocolError } from "./reasons.ts";

/** A filter as it arrived on the wire, after validation. */
export interface Filter {
  ids?: string[];
  authors?: string[];
  kinds?: number[];
  since?: number;
  until?: number;
  limit?: number;
  /** NIP-50 full-text search. */
  search?: string;
  [tag: `#${string}`]: string[] | undefined;
}

export interface CompiledFilter {
  readonly source: Filter;
  readonly ids?: Set<string>;
  readonly authors?: Set<string>;
  readonly kinds?: Set<number>;
  /** Tag conditions, AND-ed; the values of one tag are OR-ed. */
  readonly tags: ReadonlyArray<readonly [name: string, values: Set<string>]>;
  readonly since?: number;
  readonly until?: number;
  readonly limit?: number;
  /** NIP-50: the live counterpart of the store's full-text search. */
  readonly search?: CompiledSearch;
  /** An empty list somewhere (or since > until): the filter can match nothing. */
  readonly neverMatch: boolean;
}

/** A NIP-50 query compiled for live events (policy/visibility.ts builds it). */
export interface CompiledSearch {
  /** The query's normalized words: an event matches when it has every one of them. */
  readonly terms: readonly string[];
  /** The term the live index files the filter under (relay/fanout/monitors.ts); undefined when there are no terms. */
  readonly indexTerm?: string;
  /** Kinds it never matches (restricted kinds: policy/visibility.ts): the live index need not read their words. */
  readonly skipKinds?: ReadonlySet<number>;
  readonly match: (e: NostrEvent) => boolean;
}

export interface FilterLimits {
  /** Most values in one list (ids, authors, kinds, one tag). */
  maxValues: number;
  /** Longest string value (a tag value); unset = no limit. */
  maxValueLength?: number;
  /** Given when search (NIP-50) is enabled: builds the live matcher for a query string. */
  compileSearch?: (query: string) => CompiledSearch;
}

const TAG_KEY = /^#[a-zA-Z]$/;
const isTimestamp = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

function stringList(key: string, v: unknown, limits: FilterLimits, hex: boolean): string[] {
  const max = limits.maxValues;
  if (!Array.isArray(v)) throw new ProtocolError("invalid", `"${key}" must be an array`);
  if (v.length > max) throw new ProtocolError("invalid", `"${key}" has more than ${max} values`);
  const longest = limits.maxValueLength ?? Number.POSITIVE_INFINITY;
  for (const x of v) {
    if (typeof x !== "string") throw new ProtocolError("invalid", `"${key}" values must be strings`);
    if (x.length > longest) throw new ProtocolError("invalid", `"${key}" has a value longer than ${longest} characters`);
    if (hex && !isHex64(x)) throw new ProtocolError("invalid", `"${key}" values must be 64 lowercase hex characters`);
  }
  return v as string[];
}

/** Validates one filter object; throws ProtocolError("invalid") with the reason. */
export function compileFilter(raw: unknown, limits: FilterLimits): CompiledFilter {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new ProtocolError("invalid", "filter must be a JSON object");
  const source: Filter = {};
  let ids: Set<string> | undefined, authors: Set<string> | undefined, kinds: Set<number> | undefined;
  let since: number | undefined, until: number | undefined, limit: number | undefined;
  let search: CompiledSearch | undefined;
  const tags: [string, Set<string>][] = [];
  let neverMatch = false;
  for (const [key, v] of Object.entries(raw as Record<string, unknown>)) {
    switch (key) {
      case "ids":
      case "authors": {
        const list = stringList(key, v, limits, true);
        source[key] = list;
        if (key === "ids") ids = new Set(list);
        else authors = new Set(list);
        if (list.length === 0) neverMatch = true;
        break;
      }
      case "kinds": {
        if (!Array.isArray(v)) throw new ProtocolError("invalid", `"kinds" must be an array`);
        if (v.length > limits.maxValues) throw new ProtocolError("invalid", `"kinds" has more than ${limits.maxValues} values`);
        for (const k of v)
          if (typeof k !== "number" || !Number.isInteger(k) || k < 0 || k > MAX_KIND)
            throw new ProtocolError("invalid", `"kinds" values must be integers between 0 and 65535`);
        source.kinds = v;
        kinds = new Set(v);
        if (v.length === 0) neverMatch = true;
        break;
      }
      case "since":
      case "until":
      case "limit":
        if (!isTimestamp(v)) throw new ProtocolError("invalid", `"${key}" must be a non-negative integer`);
        source[key] = v;
        if (key === "since") since = v;
        else if (key === "until") until = v;
        else limit = v;
        break;
      case "search":
        if (!limits.compileSearch) throw new ProtocolError("invalid", `unsupported filter key "search"`);
        if (typeof v !== "string") throw new ProtocolError("invalid", `"search" must be a string`);
        if (v.length > 1000) throw new ProtocolError("invalid", `"search" is longer than 1000 characters`);
        source.search = v;
        search = limits.compileSearch(v);
        break;
      default: {
        if (!TAG_KEY.test(key)) throw new ProtocolError("invalid", `unsupported filter key "${key.slice(0, 40)}"`);
        const name = key[1]!;
        const list = stringList(key, v, limits, name === "e" || name === "p");
        source[key as `#${string}`] = list;
        tags.push([name, new Set(list)]);
        if (list.length === 0) neverMatch = true;
      }
    }
  }
  if (since !== undefined && until !== undefined && since > until) neverMatch = true;
  return { source, ids, authors, kinds, tags, since, until, limit, search, neverMatch };
}

export function matchFilter(f: CompiledFilter, e: NostrEvent): boolean {
  if (f.neverMatch) return false;
  if (f.ids && !f.ids.has(e.id)) return false;
  if (f.kinds && !f.kinds.has(e.kind)) return false;
  if (f.authors && !f.authors.has(e.pubkey)) return false;
  if (f.since !== undefined && e.created_at < f.since) return false;
  if (f.until !== undefined && e.created_at > f.until) return false;
  for (const [name, values] of f.tags) if (!hasTag(e, name, values)) return false;
  return f.search === undefined || f.search.match(e);
}

function hasTag(e: NostrEvent, name: string, values: Set<string>): boolean {
  for (const t of e.tags) if (t[0] === name && t.length > 1 && values.has(t[1]!)) return true;
  return false;
}

export const matchAny = (filters: readonly CompiledFilter[], e: NostrEvent): boolean => {
  for (const f of filters) if (matchFilter(f, e)) return true;
  return false;
};

/**
 * A canonical text for a filter, without `limit` (which only shapes the stored query):
 * equal texts mean the same live matches. Keys and list values are sorted.
 */
export function canonicalFilterKey(f: CompiledFilter): string {
  const s = f.source;
  const parts: string[] = [];
  for (const key of Object.keys(s).sort()) {
    if (key === "limit") continue;
    const v = s[key as keyof Filter];
    if (Array.isArray(v)) {
      // A list holds only numbers (kinds) or only strings: each sorted without a comparator call
      // per pair (a feed's 50 authors took this 30-60 us with one, on every REQ's join).
      const unique = [...new Set(v as (string | number)[])];
      const sorted = typeof unique[0] === "number" ? (unique as number[]).sort((a, b) => a - b) : (unique as string[]).sort();
      parts.push(`${JSON.stringify(key)}:${JSON.stringify(sorted)}`);
    } else parts.push(`${JSON.stringify(key)}:${JSON.stringify(v)}`);
  }
  return `{${parts.join(",")}}`;
}
