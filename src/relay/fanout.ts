// Live fanout through Bun's native pub/sub. Subscriptions with the same id and the same
// canonical filters, on any connection, form one group = one topic: matched once, serialized
// once, published once in native code. Events of restricted kinds (DMs) are the exception: they
// go to each member that may read them, one send per member. A short ring of recent events lets
// a new subscription catch up on what was committed while its stored query ran (relay/ring.ts),
// and answers some feeds without the store (relay/ring-answer.ts).
import type { NostrEvent } from "../protocol/event.ts";
import { canonicalFilterKey, type CompiledFilter } from "../protocol/filter.ts";
import type { ChangeWatch } from "../store/types.ts";
import { LiveIndex, type Indexed } from "./monitors.ts";
import { CatchUpRing, type Recent } from "./ring.ts";

export type { Recent } from "./ring.ts";

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

/** A single filter asked of memory (Fanout.answer). */
export interface MemoryQuery {
  f: CompiledFilter;
  limit: number;
  /** NIP-40's now, 0 = no expiry. */
  now: number;
  /** Kinds only some may read. */
  restricted: ReadonlySet<number>;
  /** The connection has not authenticated (sees no restricted kind). */
  anonymous: boolean;
}

export interface MemoryAnswer {
  events: string[];
  from: "ring" | "replaceable" | "tag";
}

export class Fanout {
  /** Groups by canonical key (subscription id + sorted canonical filters). */
  private readonly groups = new Map<string, Group>();
  /** Topic names are short counters: Bun hashes and copies the topic on every publish. */
  private nextTopic = 0;
  private readonly index = new LiveIndex<Group>();
  private readonly ring: CatchUpRing;
  /** Sequence number of the last event fanned out. */
  seq = 0;
  deliveries = 0;

  constructor(private readonly opts: FanoutOptions) {
    this.ring = new CatchUpRing(opts.ringSize ?? 8192, opts.ringBytes ?? 16 * 1024 * 1024);
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
    const restricted = this.opts.restricted(event);
    this.ring.add(seq, event, json, restricted);
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

  /**
   * Events fanned out after `afterSeq` that match `filters`, oldest first; `complete` is false
   * when the ring no longer holds all of them.
   */
  recent(afterSeq: number, filters: readonly CompiledFilter[]): { events: Recent[]; complete: boolean } {
    return this.ring.recent(afterSeq, filters);
  }

  /**
   * The store's answer to one filter from memory, or undefined: from the ring
   * (relay/ring-answer.ts), the replaceable events by author and kind
   * (relay/replaceable-answer.ts), or an answer to one tag value kept for anonymous readers
   * (relay/tag-answer.ts). `now`: NIP-40's, 0 = no expiry; `restricted`: kinds only some may read.
   */
  answer(q: MemoryQuery): MemoryAnswer | undefined {
    const { f, limit, now, restricted } = q;
    const ring = this.ring.feeds.answer(f, limit, now, restricted);
    if (ring) return { events: ring, from: "ring" };
    const replaceables = this.ring.replaceables.answer(f, limit, now, restricted);
    if (replaceables) return { events: replaceables, from: "replaceable" };
    const tag = q.anonymous ? this.ring.tagAnswers.answer(f, limit, now, restricted) : undefined;
    return tag && { events: tag, from: "tag" };
  }

  /** Which of memory's answers would keep the store's answer to this filter (`fill`), if one would. */
  wants(q: MemoryQuery): MemoryAnswer["from"] | undefined {
    if (this.ring.replaceables.wants(q.f, q.limit, q.restricted)) return "replaceable";
    if (q.anonymous && this.ring.tagAnswers.wants(q.f, q.limit)) return "tag";
    return undefined;
  }

  /** The store's answer (event JSONs) to a filter `wants` chose `into` for, read while nothing was committed (Store.changes.mark). */
  fill(q: MemoryQuery, into: MemoryAnswer["from"], jsons: readonly string[]): void {
    if (into === "replaceable") this.ring.replaceables.fill(q.f, jsons, q.now);
    else if (into === "tag") this.ring.tagAnswers.fill(q.f, q.limit, jsons, q.restricted);
  }

  /** The writer queue has fanned out a batch (store/queue.ts afterFanout). */
  batchFannedOut(): void {
    this.ring.feeds.batchFannedOut();
  }

  /** The store's own deletions and unknown changes, for those answers (store/types.ts ChangeWatch). */
  readonly changes: ChangeWatch = {
    deleted: (idsAndPubkeys) => {
      this.ring.feeds.forget(idsAndPubkeys);
      this.ring.replaceables.forget(idsAndPubkeys);
      this.ring.tagAnswers.forget(idsAndPubkeys);
    },
    unknown: (maxCreatedAt, batch) => {
      this.ring.feeds.reset(maxCreatedAt, batch);
      this.ring.replaceables.reset();
      this.ring.tagAnswers.reset();
    },
  };
}
