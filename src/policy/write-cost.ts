// What an event costs the writer, in units of an ordinary note: the EVENT rate limits charge it
// (policy/rules.ts eventRate) and the writer queue cuts its batches by it (store/queue.ts).
// Pure, and cheap (one pass over the tags): it runs before the signature check.
//
// Issue 36: a note with a few tags costs the writer ~0.3 ms; an event of 1,800 single-letter tags
// ~30 ms (a tags row and its index entries per tag) and 6-7x its size on disk; a deletion request
// looks up (and may delete) each of its targets, an `a` target every version of a coordinate.
// Charged one token an event, five addresses of such events within their bursts starved everyone's
// writes. So an event costs its work: at least 1 (what an ordinary note costs, so ordinary clients
// see the limits they always had), else the sum of its parts below.
import { DELETION_KIND } from "../nips/nip09.ts";
import type { NostrEvent } from "../protocol/event.ts";

/** Single-letter tags with a value (the ones written to the tags index) that cost one unit. */
const TAGS_PER_UNIT = 16;
/** `e` targets of a deletion request (kind 5) that cost one unit: a lookup by id, and maybe a delete. */
const E_TARGETS_PER_UNIT = 4;
/** `a` targets of a deletion request that cost one unit: a coordinate's versions looked up and deleted. */
const A_TARGETS_PER_UNIT = 2;
/** Characters of the event's JSON (its tags and content; counted as bytes) that cost one unit. */
const BYTES_PER_UNIT = 8 * 1024;
/** What the id, pubkey, sig, kind and created_at take in the stored JSON. */
const FIXED_CHARS = 240;

const SINGLE_LETTER = /^[a-zA-Z]$/;

/**
 * The event's cost to the writer in units (>= 1; an ordinary note: exactly 1). admit/admit.ts
 * finds it once and hands it to the rate limit (policy/rules.ts eventRate) and the writer queue.
 */
export function writeCost(e: NostrEvent): number {
  let indexed = 0;
  let eTargets = 0;
  let aTargets = 0;
  let chars = FIXED_CHARS + e.content.length;
  const deletion = e.kind === DELETION_KIND;
  for (const t of e.tags) {
    for (const v of t) chars += v.length + 3; // the quotes and the comma
    const name = t[0];
    if (name === undefined || t[1] === undefined || !SINGLE_LETTER.test(name)) continue;
    indexed++;
    if (!deletion) continue;
    if (name === "e") eTargets++;
    else if (name === "a") aTargets++;
  }
  const units = indexed / TAGS_PER_UNIT + eTargets / E_TARGETS_PER_UNIT + aTargets / A_TARGETS_PER_UNIT + chars / BYTES_PER_UNIT;
  return Math.max(1, units);
}
