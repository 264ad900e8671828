// Who may read what. Kinds in [authorization] restricted_read_kinds (DMs, gift wraps) are shown
// only to their author and the pubkeys they p-tag, once the connection authenticated as one of
// them (NIP-42). The rule is applied wherever an event could leave the relay: stored reads (the
// store filters by visibilityFor), live fanout and catch-up (canRead), in-memory search
// matching (filterLimits) and the full-text index, which leaves those kinds out (writeRules).
import { setOf, type Config } from "../config/schema.ts";
import { compileSearch, searchSyntax } from "../nips/nip50.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { FilterLimits } from "../protocol/filter.ts";
import { ProtocolError } from "../protocol/reasons.ts";
import type { Visibility } from "../store/types.ts";
import type { WriteRules } from "../store/types.ts";

export const restrictedKinds = (config: Config): ReadonlySet<number> => setOf(config.authorization.restricted_read_kinds);

/** May a connection authenticated as `authed` read this event? */
export function canRead(config: Config, authed: ReadonlySet<string>, e: NostrEvent): boolean {
  if (!restrictedKinds(config).has(e.kind)) return true;
  if (authed.has(e.pubkey)) return true;
  for (const t of e.tags) if (t[0] === "p" && t[1] !== undefined && authed.has(t[1])) return true;
  return false;
}

/** What a stored read of this connection may return. */
export const visibilityFor = (config: Config, authed: ReadonlySet<string>): Visibility => ({
  restrictedKinds: config.authorization.restricted_read_kinds,
  viewers: [...authed],
});

/** How REQ filters are compiled: their size limits, and NIP-50 search that never matches a restricted kind. */
export function filterLimits(config: Config): FilterLimits {
  const skip = restrictedKinds(config);
  return {
    maxValues: config.limits.max_filter_values,
    maxValueLength: config.limits.max_filter_value_length,
    compileSearch: config.nips.nip50
      ? (q) => {
          const syntax = searchSyntax(q);
          if (syntax) throw new ProtocolError("invalid", `search syntax NIP-50 does not define (${syntax}): search for plain words`);
          const search = compileSearch(q, skip);
          // Each term is another index a search reads (store/sqlite/query.ts searchWalk).
          const max = config.nips.nip50_max_terms;
          if (search.terms.length > max) throw new ProtocolError("invalid", `a search may have at most ${max} words`);
          return search;
        }
      : undefined,
  };
}

/** What the writer is told: NIP-09 and NIP-62 on or off, and the search index (without restricted kinds). */
export function writeRules(config: Config): WriteRules {
  return { deletion: config.nips.nip09, vanish: config.nips.nip62, search: config.nips.nip50, searchSkipKinds: restrictedKinds(config) };
}
