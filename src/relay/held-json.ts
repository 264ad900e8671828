// Event JSON kept in memory past the request that read it (relay/tag-answer.ts,
// relay/replaceable-answer.ts), and what it costs there.
//
// A reader's reply arrives as one string that the frames are cut from: a frame cut from it keeps
// the whole reply alive, and one character outside Latin-1 anywhere in the reply makes all of it
// two bytes per character (JavaScriptCore). A copy through UTF-8 is its own string, of one byte
// per character unless the event itself needs two (~5 us per KiB: done once, when kept).

const NOT_LATIN1 = /[^\u0000-\u00ff]/;

/** A copy of `json` that holds nothing else. */
export const ownCopy = (json: string): string => Buffer.from(json).toString();

/** The bytes a string of one's own holds: one per character, or two if any is outside Latin-1. */
export const heldBytes = (s: string): number => (NOT_LATIN1.test(s) ? 2 : 1) * s.length;
