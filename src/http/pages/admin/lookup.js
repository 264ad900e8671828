// @ts-check
// Events looked up over the relay's websocket by key: the profiles (kind 0) of the pubkeys the
// page shows, and the events reported for moderation.
import { subscribe, unsubscribe } from "./socket.js";

/** Profiles (and events) kept per page: enough for every row on it many times over. */
const LOOKUP_CAP = 5000;

/**
 * Events looked up by key (a pubkey's kind 0, an event by id), batched: keys asked for within a
 * few ms go in one REQ; each key is asked once per page, and what came back is kept.
 * @template T
 * @param {string} prefix subscription ids
 * @param {(keys: string[]) => Record<string, unknown>} filterFor
 * @param {(e: SignedEvent) => string} keyOf
 * @param {(e: SignedEvent) => T} parse
 * @param {(key: string) => void} repaint called when a key's answer (or its absence) is known
 */
export function lookup(prefix, filterFor, keyOf, parse, repaint) {
  /** @type {Map<string, { at: number, value: T | null }>} */
  const known = new Map();
  /** @type {Set<string>} */
  const asked = new Set();
  /** @type {string[]} */
  const waiting = [];
  let n = 0;
  /** A page left open for days must not keep every answer: past the cap the oldest go (asked again if shown again). */
  const remember = (/** @type {string} */ key, /** @type {{ at: number, value: T | null }} */ v) => {
    known.delete(key);
    known.set(key, v);
    if (known.size <= LOOKUP_CAP) return;
    for (const old of [...known.keys()].slice(0, known.size - LOOKUP_CAP + LOOKUP_CAP / 10)) {
      known.delete(old);
      asked.delete(old);
    }
  };
  /** @param {SignedEvent} e */
  const offer = (e) => {
    const key = keyOf(e);
    const prev = known.get(key);
    if (prev && prev.value !== null && prev.at >= e.created_at) return false;
    remember(key, { at: e.created_at, value: parse(e) });
    asked.add(key);
    return true;
  };
  function flush() {
    const keys = waiting.splice(0, 100);
    if (waiting.length > 0) setTimeout(flush, 0);
    const id = prefix + ++n;
    const done = () => {
      for (const k of keys) {
        if (!known.has(k)) remember(k, { at: 0, value: null });
        repaint(k);
      }
    };
    subscribe(id, {
      filters: [filterFor(keys)],
      onEvent: (e) => void (keys.includes(keyOf(e)) && offer(e)),
      onEose: () => {
        unsubscribe(id);
        done();
      },
      onClosed: done,
    });
  }
  return {
    /** What is known of a key: its value, null (the relay has none), undefined (not yet). @param {string} key */
    get: (key) => known.get(key)?.value,
    /** @param {string} key */
    want(key) {
      if (asked.has(key)) return;
      asked.add(key);
      if (waiting.push(key) === 1) setTimeout(flush, 20);
    },
    /** An event seen elsewhere (the live view): kept, and shown, if newer. @param {SignedEvent} e */
    offer(e) {
      if (offer(e)) repaint(keyOf(e));
    },
  };
}
