// NIP-50 search: turn what a user typed into terms that can never be FTS syntax, the text an
// event is indexed by, and the same match for live events.
import type { NostrEvent } from "../protocol/event.ts";
import type { CompiledSearch } from "../protocol/filter.ts";

/** Tags whose values are searchable alongside content (titles of articles, subjects of messages…). */
const TEXT_TAGS = new Set(["title", "summary", "subject", "alt", "name", "description"]);
/** Profile (kind 0) fields worth finding a person by. */
const PROFILE_FIELDS = ["name", "display_name", "displayName", "about", "nip05", "lud16", "website"];

/**
 * Words of the query, normalized like SQLite's unicode61 tokenizer (lowercase, diacritics
 * removed, split on anything that is not a letter or digit). `key:value` extensions are
 * dropped: this relay supports none of them, and NIP-50 says to ignore those.
 */
export function searchTerms(query: string): string[] {
  const terms: string[] = [];
  for (const word of query.split(/\s+/)) {
    if (/^[a-z_]+:\S/i.test(word)) continue; // extension such as include:spam, language:en
    for (const t of tokens(word)) if (!terms.includes(t)) terms.push(t);
  }
  return terms; // bounded by the 1000-character limit on the query
}

/**
 * FTS5 query syntax NIP-50 does not define (it defines plain words and key:value extensions): a
 * phrase in quotes, a prefix `word*`, an initial token `^word`, a column set `{a b}`, the
 * operators AND, OR, NOT (in capitals, as FTS5 spells them) and NEAR(...). A client writing one
 * means something this relay would not do (a phrase, a prefix, an exclusion), so it is told
 * (`invalid:`) rather than given the plain words' answer. Punctuation of ordinary text ("hello,
 * world!", "(maybe)", "c++", ":-)") is not syntax. Undefined when the query is plain.
 */
export function searchSyntax(query: string): string | undefined {
  return SYNTAX.find(([pattern]) => pattern.test(query))?.[1];
}

const SYNTAX: readonly [RegExp, string][] = [
  [/"/, "quoted phrases"],
  [/[\p{L}\p{N}]\*/u, "prefix queries"],
  [/\^[\p{L}\p{N}]/u, "initial-token queries"],
  [/[{}]/, "column filters"],
  [/(?:^|\s)(?:AND|OR|NOT)(?=\s|$)/, "boolean operators"],
  [/\bNEAR\s*[(/]/, "NEAR queries"],
];

export function tokens(text: string): string[] {
  return text
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((t) => t.length > 0);
}

/** An FTS5 MATCH expression: every term quoted (so never an operator), all required. */
export const ftsExpression = (terms: readonly string[]): string => terms.map((t) => `"${t.replaceAll('"', '""')}"`).join(" ");

/**
 * The text an event is found by, already tokenized and normalized exactly as queries are (the
 * FTS tokenizer then only splits on the spaces), so every script matches itself; "" for events
 * that are not indexed.
 */
export const indexText = (e: NostrEvent, skipKinds: ReadonlySet<number>): string => tokens(searchableText(e, skipKinds)).join(" ");

/** The raw searchable text of an event; "" for events that should not be indexed. */
export function searchableText(e: NostrEvent, skipKinds: ReadonlySet<number>): string {
  if (skipKinds.has(e.kind)) return "";
  const parts: string[] = [];
  if (e.kind === 0) {
    try {
      const profile = JSON.parse(e.content) as Record<string, unknown>;
      for (const f of PROFILE_FIELDS) if (typeof profile[f] === "string") parts.push(profile[f] as string);
    } catch {
      /* not JSON: nothing to index from the content */
    }
  } else parts.push(e.content);
  for (const t of e.tags) if (t[1] !== undefined && TEXT_TAGS.has(t[0]!)) parts.push(t[1]);
  return parts.join("\n");
}

/**
 * The words of an event's searchable text (restricted kinds included: a matcher leaves those out
 * itself). Fanout asks for one event once per live search filter it confirms, and the words of a
 * 60 KB note take a millisecond: the last event's words are kept, by the event object (events are
 * not changed once parsed), so each fanned-out event is tokenized at most once.
 */
export function eventWords(e: NostrEvent): ReadonlySet<string> {
  if (e !== lastEvent) {
    lastWords = new Set(tokens(searchableText(e, NO_SKIP)));
    lastEvent = e;
  }
  return lastWords;
}
const NO_SKIP: ReadonlySet<number> = new Set();
let lastEvent: NostrEvent | undefined;
let lastWords: ReadonlySet<string> = new Set();

/** Live matching: every term appears as a word of the event's searchable text. */
function matchesSearch(terms: readonly string[], e: NostrEvent, skipKinds: ReadonlySet<number>): boolean {
  if (terms.length === 0) return true;
  if (skipKinds.has(e.kind)) return false;
  const words = eventWords(e);
  return terms.every((t) => words.has(t));
}

/** A query compiled for live events; `skipKinds` (restricted kinds, which the index leaves out) never match a term. */
export function compileSearch(query: string, skipKinds: ReadonlySet<number>): CompiledSearch {
  // Longest first: a long word is likely a rare one, so a miss is found early, and the live index
  // files the filter under it (relay/fanout/monitors.ts; an event must have every term, so any one finds
  // all its matches, and the rarest keeps the filters each event must confirm few).
  const terms = searchTerms(query).sort((a, b) => b.length - a.length);
  return { terms, indexTerm: terms[0], skipKinds, match: (e) => matchesSearch(terms, e, skipKinds) };
}
