// Live fanout through Bun's native pub/sub. Subscriptions with the same id and the same
// canonical filters, on any connection, form one group = one topic: matched once, serialized
// once, published once in native code. A short ring of recent events lets a new subscription
// catch up on what was committed while its stored query ran, so nothing falls in the gap.
import { createHash } from "node:crypto";
import type { NostrEvent } from "../protocol/event.ts";
import { canonicalFilterKey, matchAny, type CompiledFilter } from "../protocol/filter.ts";
import { LiveIndex, type Indexed } from "./monitors.ts";

export interface Group {
  readonly topic: string;
  /** `["EVENT",<subId>,` — the only bytes that differ between groups for the same event. */
  readonly prefix: string;
  readonly filters: readonly CompiledFilter[];
  members: number;
  entries: Indexed<Group>[];
}

interface Recent {
  seq: number;
  event: NostrEvent;
  json: string;
}

export class Fanout {
  private readonly groups = new Map<string, Group>();
  private readonly index = new LiveIndex<Group>();
  private readonly ring: (Recent | undefined)[];
  /** Sequence number of the last event fanned out. */
  seq = 0;
  deliveries = 0;

  constructor(
    private readonly publish: (topic: string, frame: string) => number,
    ringSize = 8192,
  ) {
    this.ring = new Array(ringSize);
  }

  get groupCount(): number {
    return this.groups.size;
  }

  /** Joins (or creates) the group for this subscription id and filter set. */
  acquire(subId: string, filters: readonly CompiledFilter[]): Group {
    const key = `${subId}\n${filters.map(canonicalFilterKey).sort().join("\n")}`;
    const topic = createHash("sha256").update(key).digest("base64url");
    let g = this.groups.get(topic);
    if (!g) {
      g = { topic, prefix: `["EVENT",${JSON.stringify(subId)},`, filters, members: 0, entries: [] };
      g.entries = this.index.add(g, filters);
      this.groups.set(topic, g);
    }
    g.members++;
    return g;
  }

  release(g: Group): void {
    if (--g.members > 0) return;
    this.index.remove(g.entries);
    this.groups.delete(g.topic);
  }

  /** Sends a newly accepted event to every matching group. */
  broadcast(event: NostrEvent, json: string): void {
    const seq = ++this.seq;
    this.ring[seq % this.ring.length] = { seq, event, json };
    this.index.match(event, (g) => {
      const sent = this.publish(g.topic, `${g.prefix}${json}]`);
      if (sent > 0) this.deliveries += g.members;
    });
  }

  /**
   * Events fanned out after `afterSeq` that match `filters`, oldest first; `complete` is false
   * when the ring no longer holds all of them.
   */
  recent(afterSeq: number, filters: readonly CompiledFilter[]): { events: Recent[]; complete: boolean } {
    const events: Recent[] = [];
    const oldest = Math.max(afterSeq + 1, this.seq - this.ring.length + 1);
    for (let s = oldest; s <= this.seq; s++) {
      const r = this.ring[s % this.ring.length];
      if (r && r.seq === s && matchAny(filters, r.event)) events.push(r);
    }
    return { events, complete: oldest === afterSeq + 1 };
  }
}
