// Live fanout through Bun's native pub/sub. Subscriptions with the same id and the same
// canonical filters, on any connection, form one group = one topic: matched once, serialized
// once, published once in native code. Events of restricted kinds (DMs) are the exception: they
// go to each member that may read them, one send per member. A short ring of recent events lets
// a new subscription catch up on what was committed while its stored query ran. The ring keeps
// each event's JSON and its kind and created_at in typed arrays, not the parsed event: thousands
// of parsed events (their tags, their strings) were most of the main thread's live heap, and the
// live heap sets how far JSC lets the heap grow before a full collection (bench/RESULTS.md). A
// catch-up parses only the entries past its snapshot whose kind and time a filter could match.
import type { NostrEvent } from "../protocol/event.ts";
import { canonicalFilterKey, matchAny, type CompiledFilter } from "../protocol/filter.ts";
import { LiveIndex, type Indexed } from "./monitors.ts";

/** What fanout needs of a connection (a Bun ServerWebSocket of a Session is one). */
export interface Member {
  readonly data: { readonly closed: boolean; readonly authed: ReadonlySet<string>; readonly deflate: boolean };
  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
  send(frame: string, compress?: boolean): unknown;
}

export interface Group {
  readonly key: string;
  readonly topic: string;
  /** `["EVENT",<subId>,` — the only bytes that differ between groups for the same event. */
  readonly prefix: string;
  readonly filters: readonly CompiledFilter[];
  readonly members: Set<Member>;
  entries: Indexed<Group>[];
}

export interface Recent {
  seq: number;
  event: NostrEvent;
  json: string;
}

/** Whether some filter could match an event of this kind and created_at (the rest is checked on the parsed event). */
function mayMatch(filters: readonly CompiledFilter[], kind: number, createdAt: number): boolean {
  for (const f of filters) {
    if (f.neverMatch) continue;
    if (f.kinds && !f.kinds.has(kind)) continue;
    if (f.since !== undefined && createdAt < f.since) continue;
    if (f.until !== undefined && createdAt > f.until) continue;
    return true;
  }
  return false;
}

export interface FanoutOptions {
  publish: (topic: string, frame: string) => number;
  /** Events that may not go to a whole topic (restricted kinds). */
  restricted: (e: NostrEvent) => boolean;
  /** Whether one connection may read a restricted event. */
  canRead: (ws: Member, e: NostrEvent) => boolean;
  ringSize?: number;
  /** The ring also keeps at most this many bytes of event JSON (big events push old ones out). */
  ringBytes?: number;
}

export class Fanout {
  /** Groups by canonical key (subscription id + sorted canonical filters). */
  private readonly groups = new Map<string, Group>();
  /** Topic names are short counters: Bun hashes and copies the topic on every publish. */
  private nextTopic = 0;
  private readonly index = new LiveIndex<Group>();
  /** The ring, by seq % size: the JSON (undefined once evicted), its seq, kind and created_at. */
  private readonly json: (string | undefined)[];
  private readonly seqs: Float64Array;
  private readonly kinds: Float64Array;
  private readonly times: Float64Array;
  private readonly ringBytes: number;
  private bytes = 0;
  /** The oldest seq still in the ring. */
  private oldest = 1;
  /** Sequence number of the last event fanned out. */
  seq = 0;
  deliveries = 0;

  constructor(private readonly opts: FanoutOptions) {
    const size = opts.ringSize ?? 8192;
    this.json = new Array(size).fill(undefined);
    this.seqs = new Float64Array(size);
    this.kinds = new Float64Array(size);
    this.times = new Float64Array(size);
    this.ringBytes = opts.ringBytes ?? 16 * 1024 * 1024;
  }

  get groupCount(): number {
    return this.groups.size;
  }

  /** Adds the socket to the group for this subscription id and filter set (creating it). */
  join(ws: Member, subId: string, filters: readonly CompiledFilter[]): Group {
    const key = `${subId}\n${filters.map(canonicalFilterKey).sort().join("\n")}`;
    let g = this.groups.get(key);
    if (!g) {
      g = {
        key,
        topic: (this.nextTopic++).toString(36),
        prefix: `["EVENT",${JSON.stringify(subId)},`,
        filters,
        members: new Set(),
        entries: [],
      };
      g.entries = this.index.add(g, filters);
      this.groups.set(key, g);
    }
    g.members.add(ws);
    ws.subscribe(g.topic);
    return g;
  }

  leave(ws: Member, g: Group): void {
    if (!ws.data.closed) ws.unsubscribe(g.topic);
    g.members.delete(ws);
    if (g.members.size > 0) return;
    this.index.remove(g.entries);
    this.groups.delete(g.key);
  }

  /** Sends a newly accepted event to every matching group. */
  broadcast(event: NostrEvent, json: string): void {
    const seq = ++this.seq;
    this.remember(seq, event.kind, event.created_at, json);
    const restricted = this.opts.restricted(event);
    this.index.match(event, (g) => {
      const frame = `${g.prefix}${json}]`;
      if (!restricted) {
        this.opts.publish(g.topic, frame);
        this.deliveries += g.members.size;
        return;
      }
      for (const ws of g.members) {
        if (!this.opts.canRead(ws, event)) continue;
        ws.send(frame, ws.data.deflate);
        this.deliveries++;
      }
    });
  }

  /** Keeps the event for catch-up, bounded by count and by bytes. */
  private remember(seq: number, kind: number, createdAt: number, json: string): void {
    const size = this.json.length;
    while (this.oldest <= seq - size) this.evict();
    const slot = seq % size;
    // serializeEvent's template makes a rope of ~11 strings (the event's own among them): reading a
    // character flattens it, so the ring holds one string per event and nothing of the parsed one.
    if (json.charCodeAt(0) !== 123) throw new Error("fanout: not an event's JSON");
    this.json[slot] = json;
    this.seqs[slot] = seq;
    this.kinds[slot] = kind;
    this.times[slot] = createdAt;
    this.bytes += json.length;
    while (this.bytes > this.ringBytes && this.oldest < seq) this.evict();
  }

  private evict(): void {
    const slot = this.oldest % this.json.length;
    const json = this.json[slot];
    if (json !== undefined && this.seqs[slot] === this.oldest) {
      this.bytes -= json.length;
      this.json[slot] = undefined;
    }
    this.oldest++;
  }

  /**
   * Events fanned out after `afterSeq` that match `filters`, oldest first; `complete` is false
   * when the ring no longer holds all of them.
   */
  recent(afterSeq: number, filters: readonly CompiledFilter[]): { events: Recent[]; complete: boolean } {
    const events: Recent[] = [];
    const oldest = Math.max(afterSeq + 1, this.oldest);
    for (let s = oldest; s <= this.seq; s++) {
      const slot = s % this.json.length;
      const json = this.json[slot];
      if (json === undefined || this.seqs[slot] !== s || !mayMatch(filters, this.kinds[slot]!, this.times[slot]!)) continue;
      const event = JSON.parse(json) as NostrEvent;
      if (matchAny(filters, event)) events.push({ seq: s, event, json });
    }
    return { events, complete: oldest === afterSeq + 1 };
  }
}
