// Live fanout through Bun's native pub/sub. Subscriptions with the same id and the same
// canonical filters, on any connection, form one group = one topic: matched once, serialized
// once, published once in native code. Gated events (restricted kinds such as DMs, NIP-29 group
// events: policy/visibility.ts) are the exception: they go to each member that may read them at
// that moment, one send per member. A short ring of recent events lets
// a new subscription catch up on what was committed while its stored query ran (relay/fanout/ring.ts,
// relay/read/live.ts); the memory answers read it too (relay/answers/).
import type { NostrEvent } from "../../protocol/event.ts";
import { canonicalFilterKey, type CompiledFilter } from "../../protocol/filter.ts";
import { LiveIndex, type Indexed } from "./monitors.ts";
import { CatchUpRing, type Recent } from "./ring.ts";

export type { Recent } from "./ring.ts";

/** What fanout needs of a connection (a Bun ServerWebSocket of a Session is one). */
interface Member {
  readonly data: { readonly closed: boolean; readonly authed: ReadonlySet<string>; readonly deflate: boolean };
  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
  send(frame: string, compress?: boolean): unknown;
}

export interface Group {
  readonly subId: string;
  /** The canonical text of the filters (sorted canonicalFilterKey), made when a second group of the same subscription id could be this one. */
  key?: string;
  readonly topic: string;
  /** `["EVENT",<subId>,` — the only bytes that differ between groups for the same event. */
  readonly prefix: string;
  readonly filters: readonly CompiledFilter[];
  readonly members: Set<Member>;
  entries: Indexed<Group>[];
}

interface FanoutOptions {
  publish: (topic: string, frame: string) => number;
  /** Of the gated events, those that may not go to a whole topic now: each member is asked (canRead). */
  restricted: (e: NostrEvent) => boolean;
  /**
   * Events only some may read, now or later (policy/visibility.ts gated: a restricted kind, a
   * group's event): flagged in the ring, for the catch-up and memory's answers. Absent: restricted.
   */
  gated?: (e: NostrEvent) => boolean;
  /** Whether one connection may read a gated event, now. */
  canRead: (ws: Member, e: NostrEvent) => boolean;
  ringSize?: number;
  /** The ring also keeps at most this many bytes of event JSON (big events push old ones out). */
  ringBytes?: number;
}

export class Fanout {
  /**
   * Groups by subscription id, then by their filters' canonical text (Group.key). That text is
   * made only when a subscription id has more than one group: making it (sorting and
   * stringifying a feed's 50 authors) was ~6% of the main thread's time per REQ under the
   * issue-15 mix, where every REQ's id was its own.
   */
  private readonly groups = new Map<string, Group | Map<string, Group>>();
  private groupsOpen = 0;
  /** Topic names are short counters: Bun hashes and copies the topic on every publish. */
  private nextTopic = 0;
  private readonly index = new LiveIndex<Group>();
  /** The events fanned out lately, by seq: a new subscription's catch-up (recent). */
  readonly ring: CatchUpRing;
  /** Sequence number of the last event fanned out. */
  seq = 0;
  deliveries = 0;

  constructor(private readonly opts: FanoutOptions) {
    this.ring = new CatchUpRing(opts.ringSize ?? 8192, opts.ringBytes ?? 16 * 1024 * 1024);
  }

  get groupCount(): number {
    return this.groupsOpen;
  }

  /** Adds the socket to the group for this subscription id and filter set (creating it). */
  join(ws: Member, subId: string, filters: readonly CompiledFilter[]): Group {
    const g = this.find(subId, filters) ?? this.open(subId, filters);
    g.members.add(ws);
    ws.subscribe(g.topic);
    return g;
  }

  /** The group of this subscription id with the same filters, if open: their canonical texts decide, made only when the id has one. */
  private find(subId: string, filters: readonly CompiledFilter[]): Group | undefined {
    const same = this.groups.get(subId);
    if (same === undefined) return undefined;
    const key = filtersKey(filters);
    if (same instanceof Map) return same.get(key);
    same.key ??= filtersKey(same.filters);
    return same.key === key ? same : undefined;
  }

  /** A new group (after find: an open group of the same id has its key). */
  private open(subId: string, filters: readonly CompiledFilter[]): Group {
    const same = this.groups.get(subId);
    const g: Group = {
      subId,
      key: same === undefined ? undefined : filtersKey(filters),
      topic: (this.nextTopic++).toString(36),
      prefix: `["EVENT",${JSON.stringify(subId)},`,
      filters,
      members: new Set(),
      entries: [],
    };
    g.entries = this.index.add(g, filters);
    if (same === undefined) this.groups.set(subId, g);
    else if (same instanceof Map) same.set(g.key!, g);
    else
      this.groups.set(
        subId,
        new Map([
          [same.key!, same],
          [g.key!, g],
        ]),
      );
    this.groupsOpen++;
    return g;
  }

  leave(ws: Member, g: Group): void {
    if (!ws.data.closed) ws.unsubscribe(g.topic);
    g.members.delete(ws);
    if (g.members.size > 0) return;
    this.index.remove(g.entries);
    this.groupsOpen--;
    const same = this.groups.get(g.subId);
    if (same instanceof Map) same.delete(g.key!);
    if (same === g || (same instanceof Map && same.size === 0)) this.groups.delete(g.subId);
  }

  /** Sends a newly committed (or ephemeral) event to every matching group; returns its seq in the ring. */
  broadcast(event: NostrEvent, json: string): number {
    const seq = ++this.seq;
    const gated = this.opts.gated ? this.opts.gated(event) : this.opts.restricted(event);
    const restricted = gated && (!this.opts.gated || this.opts.restricted(event));
    this.ring.add(seq, event, json, gated);
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
    return seq;
  }

  /**
   * Events fanned out after `afterSeq` that match `filters`, oldest first; `complete` is false
   * when the ring no longer holds all of them.
   */
  recent(afterSeq: number, filters: readonly CompiledFilter[]): { events: Recent[]; complete: boolean } {
    return this.ring.recent(afterSeq, filters);
  }
}

/** The canonical text of a subscription's filters: equal texts mean the same live matches. */
const filtersKey = (filters: readonly CompiledFilter[]): string => filters.map(canonicalFilterKey).sort().join("\n");
