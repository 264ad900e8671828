// What the answers kept in memory past their request share (relay/tag-answer.ts,
// relay/replaceable-answer.ts): which answers are worth keeping, and what an event's JSON costs
// there.
//
// A reader's reply arrives as one string that the frames are cut from: a frame cut from it keeps
// the whole reply alive, and one character outside Latin-1 anywhere in the reply makes all of it
// two bytes per character (JavaScriptCore). A copy through UTF-8 is its own string, of one byte
// per character unless the event itself needs two (~5 us per KiB of the main thread's).

const NOT_LATIN1 = /[^\u0000-\u00ff]/;

/** A copy of `json` that holds nothing else. */
export const ownCopy = (json: string): string => Buffer.from(json).toString();

/** The bytes a string of one's own holds: one per character, or two if any is outside Latin-1. */
export const heldBytes = (s: string): number => (NOT_LATIN1.test(s) ? 2 : 1) * s.length;

/**
 * Keeping an answer costs the main thread its copy; most filters are asked once. An answer is
 * kept the second time its filter is read from the store: the filters asked once are remembered
 * (up to `max` of them, then forgotten all at once).
 */
export class SecondAsk {
  private readonly once = new Set<string>();
  constructor(private readonly max = 8192) {}

  /** Was this key asked before (since the last time it was kept)? Remembers it if not. */
  again(key: string): boolean {
    if (this.once.delete(key)) return true;
    if (this.once.size >= this.max) this.once.clear();
    this.once.add(key);
    return false;
  }
}
