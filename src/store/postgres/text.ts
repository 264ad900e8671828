// What Postgres text (and jsonb) cannot hold: NUL, and a lone UTF-16 surrogate, both of which a
// Nostr event's JSON may carry escaped. One such value must not fail a whole write batch.

/** Storable as Postgres text, exactly as it is. */
export const pgSafe = (s: string): boolean => !s.includes("\0") && s.isWellFormed();

/** Made storable (U+FFFD for what cannot be), for keys only ever compared with themselves: the d of an address. */
export const pgText = (s: string): string => (pgSafe(s) ? s : s.replaceAll("\0", "\uFFFD").toWellFormed());
