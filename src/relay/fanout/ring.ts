// The fanout's catch-up ring: the events fanned out lately, so that a new subscription gets
// those committed while its stored query ran (relay/read/live.ts). The feeds memory answers
// (relay/answers/feeds.ts) are an index of its slots. It keeps each event's JSON, and its
// kind and created_at in typed arrays, not the parsed event: thousands of parsed events (their
// tags, their strings) were most of the main thread's live heap, and the live heap sets how far
// JSC lets the heap grow before its next full collection (bench/RESULTS.md). A catch-up decides
// from kind, created_at and the id and pubkey read off the JSON's fixed layout, with a text check
// of tag values, and parses only the events a tag condition or a search still has to confirm.
import { fixedLayout, ID_AT, PUBKEY_AT, type NostrEvent } from "../../protocol/event.ts";
import { matchAny, type CompiledFilter } from "../../protocol/filter.ts";
import { expirationOf } from "../../nips/nip40.ts";

/** An event the ring gives back; `event` is parsed from the JSON when first asked for. */
export class Recent {
  private parsed: NostrEvent | undefined;
  constructor(
    readonly seq: number,
    readonly kind: number,
    readonly json: string,
    /** Only some may read it (a restricted kind, a group's event: policy/visibility.ts gated). */
    readonly gated: boolean,
    parsed?: NostrEvent,
  ) {
    this.parsed = parsed;
  }
  get event(): NostrEvent {
    this.parsed ??= JSON.parse(this.json) as NostrEvent;
    return this.parsed;
  }
}

const NO = 0;
const YES = 1;
const MAYBE = 2;

/** A filter with its tag values as they are written in JSON (`"value"`), for the text check. */
interface Prepared {
  f: CompiledFilter;
  quoted: string[][];
}

const prepare = (filters: readonly CompiledFilter[]): Prepared[] =>
  filters.filter((f) => !f.neverMatch).map((f) => ({ f, quoted: f.tags.map(([, values]) => [...values].map((v) => JSON.stringify(v))) }));

/**
 * NO when the filter cannot match the event, YES when it does, MAYBE when only the parsed event
 * can tell (a tag value appears in the JSON, a search, or JSON of another layout).
 */
function verdict(p: Prepared, kind: number, createdAt: number, json: string, fixed: boolean): number {
  const f = p.f;
  if (f.kinds && !f.kinds.has(kind)) return NO;
  if (f.since !== undefined && createdAt < f.since) return NO;
  if (f.until !== undefined && createdAt > f.until) return NO;
  if (!fixed) return MAYBE;
  if (f.ids && !f.ids.has(json.slice(ID_AT, ID_AT + 64))) return NO;
  if (f.authors && !f.authors.has(json.slice(PUBKEY_AT, PUBKEY_AT + 64))) return NO;
  // Each tag condition needs one of its values somewhere in the JSON (the tags are JSON.stringify'd).
  for (const values of p.quoted) if (!values.some((q) => json.includes(q))) return NO;
  return p.quoted.length > 0 || f.search ? MAYBE : YES;
}

/** What reads the ring's slots by seq (relay/answers/feeds.ts FeedIndex). */
export interface SlotIndex {
  /** The event at `seq` leaves the ring (its slot still holds it). */
  evict(seq: number): void;
}

export class CatchUpRing {
  /** By seq % size: the JSON (undefined once evicted), its seq, kind, created_at and NIP-40 expiration (NaN: none). */
  readonly json: (string | undefined)[];
  readonly seqs: Float64Array;
  readonly kinds: Float64Array;
  readonly times: Float64Array;
  readonly expires: Float64Array;
  /** 1: only some may read the event (policy/visibility.ts gated), decided once at broadcast. */
  readonly gated: Uint8Array;
  /** The index of these slots, told of each event leaving them (indexedBy). */
  private index?: SlotIndex;
  private bytes = 0;
  /** The oldest seq still in the ring. */
  private oldest = 1;
  /** The newest seq added. */
  private newest = 0;

  constructor(
    size: number,
    private readonly maxBytes: number,
  ) {
    this.json = new Array(size).fill(undefined);
    this.seqs = new Float64Array(size);
    this.kinds = new Float64Array(size);
    this.times = new Float64Array(size);
    this.expires = new Float64Array(size);
    this.gated = new Uint8Array(size);
  }

  /** The one index that reads these slots (relay/answers/feeds.ts): told of an event before its slot is cleared or reused. */
  indexedBy(index: SlotIndex): void {
    this.index = index;
  }

  /** Whether the event at `seq` (just added) is gated. */
  gatedAt(seq: number): boolean {
    return this.gated[seq % this.gated.length] === 1;
  }

  /** Keeps the event, bounded by count and by bytes of JSON; `gated`: only some may read it. */
  add(seq: number, e: NostrEvent, json: string, gated = false): void {
    const size = this.json.length;
    while (this.oldest <= seq - size) this.evict();
    const slot = seq % size;
    // serializeEvent's template makes a rope of ~11 strings (the event's own among them): reading a
    // character flattens it, so the ring holds one string per event and nothing of the parsed one.
    if (json.charCodeAt(0) !== 123) throw new Error("fanout: not an event's JSON");
    this.json[slot] = json;
    this.seqs[slot] = seq;
    this.kinds[slot] = e.kind;
    this.times[slot] = e.created_at;
    this.expires[slot] = expirationOf(e) ?? Number.NaN;
    this.gated[slot] = gated ? 1 : 0;
    this.newest = seq;
    this.bytes += json.length;
    while (this.bytes > this.maxBytes && this.oldest < seq) this.evict();
  }

  private evict(): void {
    const slot = this.oldest % this.json.length;
    const json = this.json[slot];
    if (json !== undefined && this.seqs[slot] === this.oldest) {
      this.index?.evict(this.oldest);
      this.bytes -= json.length;
      this.json[slot] = undefined;
    }
    this.oldest++;
  }

  /**
   * Events added after `afterSeq` that match `filters`, oldest first; `complete` is false when
   * the ring no longer holds all of them.
   */
  recent(afterSeq: number, filters: readonly CompiledFilter[]): { events: Recent[]; complete: boolean } {
    const events: Recent[] = [];
    const prepared = prepare(filters);
    const oldest = Math.max(afterSeq + 1, this.oldest);
    for (let s = oldest; s <= this.newest; s++) {
      const slot = s % this.json.length;
      const json = this.json[slot];
      if (json === undefined || this.seqs[slot] !== s) continue;
      const kind = this.kinds[slot]!;
      const createdAt = this.times[slot]!;
      const fixed = fixedLayout(json);
      let v = NO;
      for (const p of prepared) {
        const pv = verdict(p, kind, createdAt, json, fixed);
        if (pv === NO) continue;
        v = pv;
        if (v === YES) break;
      }
      if (v === YES) events.push(new Recent(s, kind, json, this.gated[slot] === 1));
      else if (v === MAYBE) {
        const event = JSON.parse(json) as NostrEvent;
        if (matchAny(filters, event)) events.push(new Recent(s, kind, json, this.gated[slot] === 1, event));
      }
    }
    return { events, complete: oldest === afterSeq + 1 };
  }
}
