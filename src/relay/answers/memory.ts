// The answers memory gives a REQ in place of the store's (docs/architecture.md, REQ path step 4),
// behind one object: a feed from the fanout's catch-up ring (feeds.ts), replaceable events by
// author and kind (replaceable.ts), an answer to one tag value kept from the store (tag.ts).
//
// Each stays the store's answer through what the store tells: every event it commits, in commit
// order (stored, from the relay's commit feed: relay/read/live.ts), and every event it deletes,
// or that it cannot name them (changes: store/types.ts ChangeWatch). While the store cannot
// vouch that it told every change (Store.changes.known), memory answers nothing; a store without
// the `changes` capability (Postgres: other nodes write) never lets it.
import type { NostrEvent } from "../../protocol/event.ts";
import type { CompiledFilter } from "../../protocol/filter.ts";
import type { ChangeWatch, StateMark, Store } from "../../store/types.ts";
import type { CatchUpRing } from "../fanout/ring.ts";
import { FeedIndex } from "./feeds.ts";
import { ReplaceableIndex } from "./replaceable.ts";
import { TagAnswers } from "./tag.ts";

/** A single filter asked of memory. */
export interface MemoryQuery {
  f: CompiledFilter;
  limit: number;
  /** NIP-40's now, 0 = no expiry. */
  now: number;
  /** Kinds only some may read. */
  restricted: ReadonlySet<number>;
  /** The connection has not authenticated (sees no restricted kind). */
  anonymous: boolean;
  /** The store may hide some group's events from this reader (Visibility.groups): its answer is not kept for others. */
  partial?: boolean;
}

/** Where an answer from memory came from (RelayMetrics.memoryAnswers). */
export type MemorySource = "ring" | "replaceable" | "tag";

export interface MemoryAnswer {
  events: string[];
  from: MemorySource;
}

/** A stored read whose answer memory would keep (keep), and the store's state before it (Store.changes.mark). */
export interface Keeping {
  into: Exclude<MemorySource, "ring">;
  mark: StateMark;
}

/** What memory asks of the store: whether it told every change, and whether anything was committed during a read. */
export type StoreState = Pick<Store, "changes">;

export class MemoryAnswers {
  /** The feeds the ring answers alone: an index of its slots. */
  private readonly feeds: FeedIndex;
  /** The replaceable events by author and kind. */
  private readonly replaceables = new ReplaceableIndex();
  /** Stored answers to one tag value, kept true. */
  private readonly tags = new TagAnswers();

  constructor(
    private readonly ring: CatchUpRing,
    private readonly store: StoreState,
    /** Events of groups (policy/visibility.ts groupGated), which no kept answer holds; absent: groups are off. */
    private readonly groupEvent?: (e: NostrEvent) => boolean,
  ) {
    this.feeds = new FeedIndex(ring);
    ring.indexedBy(this.feeds);
  }

  /**
   * An event the store committed, just added to the ring at `seq` (Fanout.broadcast), in commit
   * order. `gated`: only some may read it (a restricted kind, a group's event): no answer holds
   * it, and those it would be part of give up (the feeds, by the ring's flag) or are dropped.
   */
  stored(seq: number, e: NostrEvent, json: string, gated: boolean): void {
    // Not indexed: ephemeral, deleted by its own batch, or in a batch the store could not account for.
    if (!this.feeds.add(seq, json, e)) return;
    const expires = this.ring.expires[seq % this.ring.expires.length]!;
    this.replaceables.stored(e, json, expires, gated);
    this.tags.stored(e, json, expires, gated, gated && this.groupEvent?.(e) === true);
  }

  /** The events of a write batch have all been stored (CommitFeed.batchEnd). */
  batchEnd(): void {
    this.feeds.batchFannedOut();
  }

  /** The store's own deletions and unknown changes (store/types.ts ChangeWatch). */
  readonly changes: ChangeWatch = {
    deleted: (idsAndPubkeys) => {
      this.feeds.forget(idsAndPubkeys);
      this.replaceables.forget(idsAndPubkeys);
      this.tags.forget(idsAndPubkeys);
    },
    unknown: (maxCreatedAt, batch) => {
      this.feeds.reset(maxCreatedAt, batch);
      this.replaceables.reset();
      this.tags.reset();
    },
  };

  /**
   * The store's answer to one filter, or undefined: from the ring (feeds.ts), the replaceable
   * events by author and kind (replaceable.ts), or an answer to one tag value kept for
   * anonymous readers (tag.ts).
   */
  answer(q: MemoryQuery): MemoryAnswer | undefined {
    if (!this.store.changes?.known()) return undefined;
    const { f, limit, now, restricted } = q;
    const ring = this.feeds.answer(f, limit, now, restricted);
    if (ring) return { events: ring, from: "ring" };
    const replaceables = this.replaceables.answer(f, limit, now, restricted);
    if (replaceables) return { events: replaceables, from: "replaceable" };
    const tag = q.anonymous ? this.tags.answer(f, limit, now, restricted) : undefined;
    return tag && { events: tag, from: "tag" };
  }

  /**
   * Before a stored read of a filter memory did not answer: whether its answer would be kept
   * (keep), and the store's state now. Cheap (no read transaction), and a read while the writer
   * works does not count as an ask (keep.ts SecondAsk).
   */
  keeping(q: MemoryQuery): Keeping | undefined {
    const changes = this.store.changes;
    if (!changes?.known() || q.partial) return undefined;
    const mark = changes.mark();
    const into = mark && this.wants(q);
    return into && mark && { into, mark };
  }

  /**
   * After that read: keeps its answer when nothing was committed while it ran. `frames`: its
   * EVENT frames, newest first, each `prefix` characters before the event's JSON and "]" after.
   */
  keep(q: MemoryQuery, k: Keeping, frames: readonly string[], prefix: number): void {
    const changes = this.store.changes;
    if (!changes?.unchangedSince(k.mark) || !changes.known()) return;
    const jsons = frames.map((frame) => frame.slice(prefix, -1));
    // An answer read for one reader: a group's event in it is not for every reader.
    if (this.groupEvent && jsons.some((json) => this.groupEvent!(JSON.parse(json) as NostrEvent))) return;
    if (k.into === "replaceable") this.replaceables.fill(q.f, jsons, q.now);
    else this.tags.fill(q.f, q.limit, jsons, q.restricted);
  }

  /** Which of memory's answers would keep the store's answer to this filter, if one would. */
  private wants(q: MemoryQuery): Keeping["into"] | undefined {
    if (this.replaceables.wants(q.f, q.limit, q.restricted)) return "replaceable";
    if (q.anonymous && this.tags.wants(q.f, q.limit)) return "tag";
    return undefined;
  }
}
