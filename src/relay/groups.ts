// The relay's side of NIP-29 (groups/state.ts holds the state): the commit feed applies each
// committed event to the group state first (every node, commit order); after this node answered
// a group moderation, join or leave event OK true, the relay signs and writes what follows from
// it (the 9000 that answers a join, the 9001 that answers a leave, then the group's regenerated
// 39000-39005), and carries out 9005 and 9008 deletions; the client's OK waits for those commits,
// so a client that got OK reads the new metadata at once. Relay-signed events go straight to the
// writer queue: no policy may refuse the relay's own event. Publications of one group and kind
// are coalesced: one in flight, at most one waiting, rendered from the state when it is sent (a
// burst of 1,000 joins writes a few 39002s). At start: the rebuild, then reconcile() (every
// 39xxx whose stored tags differ from what the state renders is written again). Commits of other
// processes on the same SQLite file (a hand-over's old process, `bunstr import` into the served
// file) reach this one only as ChangeWatch.unknown: they are read by seq and applied then.
import { log } from "../log.ts";
import type { GroupChange } from "../groups/state.ts";
import { GroupGates } from "./group-gates.ts";
import { isGroupActionKind, REBUILD_KINDS, RELAY_GROUP_KINDS, type RelayGroupKind } from "../nips/nip29.ts";
import { writeCost } from "../policy/write-cost.ts";
import { nowSeconds, serializeEvent, type NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";
import { signEvent } from "../protocol/schnorr.ts";
import type { ChangeWatch, WriteOutcome } from "../store/types.ts";
import type { GroupPublisher, GroupTemplate, RelayContext } from "./context.ts";
import { GroupPurge } from "./groups-purge.ts";

/** Changes kept for accepted() to pick up: a bound, since other nodes' events are applied too and never picked up. */
const MAX_CHANGES = 4096;
/** How long accepted() waits for its event to come through the commit feed (Postgres: it may follow the OK). */
const FEED_WAIT_MS = 5000;
/** Rows read per page of a catch-up by seq. */
const PAGE = 500;
/**
 * How long after applying another node's 9005 or 9008 this node deletes its targets again (the
 * accepting node has done it by then; if it died, or its feed came late, this one does it).
 */
const SWEEP_AFTER_MS = 2 * FEED_WAIT_MS;
/** Relay events reconcile() has in the writer queue at once. */
const RECONCILE_AT_ONCE = 64;
/** Ids applied from the feed, kept to skip them in a catch-up by seq; beyond it the oldest go. */
const MAX_APPLIED_IDS = 100_000;

type Publication = { tail: Promise<void>; pending?: Promise<void> };

export class GroupRelay implements GroupPublisher {
  /** What each recent commit changed, by event id, for accepted(). */
  private readonly changes = new Map<string, GroupChange | undefined>();
  /** accepted() calls waiting for their event's commit to come through the feed. */
  private readonly waiting = new Map<string, () => void>();
  private readonly publications = new Map<string, Publication>();
  /** created_at of the last 39xxx this process signed per `${kind}:${id}` (the feed may not have told it yet). */
  private readonly lastSigned = new Map<string, number>();
  /** For the catch-up by seq (unknown): rows after this seq are read; the ids the feed applied since are skipped. */
  private appliedSeq = 0;
  private readonly appliedIds = new Set<string>();
  private catchingUp: Promise<void> | undefined;
  /** Told of another change while catching up: read again after. */
  private catchUpAgain = false;
  /** Per group, the id of its latest committed moderation, join or leave event (any node's). */
  private readonly latestAction = new Map<string, string>();
  /** Ids of such events this node stored (accepted), and of the 39xxx it signed: bounded like `changes`. */
  private readonly mine = new Set<string>();
  /** Ids of this node's events whose change accepted() stopped waiting for: committed() carries it out when it comes. */
  private readonly late = new Set<string>();
  private readonly purge: GroupPurge;
  /** The start's purge of deleted groups' remains, and the last sweep of another node's deletion (tests wait for it). */
  purged: Promise<void> = Promise.resolve();
  /** The store's group_gates, kept equal to the state (relay/group-gates.ts). */
  private readonly gates: GroupGates;

  constructor(private readonly ctx: RelayContext) {
    this.purge = new GroupPurge(ctx);
    this.gates = new GroupGates(ctx.groups!, ctx.store);
  }

  private get state() {
    return this.ctx.groups!;
  }

  /** At start: the group state rebuilt from the store, then reconcile(); Relay.ready resolves after. */
  async start(): Promise<void> {
    const built = await this.state.rebuild(this.ctx.store.groups);
    // What the rebuild read ends about here; the feed's events since are in appliedIds. (Another
    // process's commit in the moment between is read at the next start.)
    this.appliedSeq = this.ctx.store.lastSeq();
    if (built.skipped > 0)
      log.warn(
        `groups: ${built.skipped} moderation events skipped on rebuild (their authors lacked the right then, their group was gone, or a limit held)`,
      );
    // Before the first read: the store's gates as the state says (Relay.ready waits for start).
    await this.gates.reconcile();
    await this.reconcile();
    // A purge cut short (a crash, a hand-over mid-9008), a 9005 whose node died after the commit:
    // finished now; until then the state reads a deleted group's rows as no one's.
    this.purged = this.purge.remains();
  }

  /** From the commit feed (every node, commit order): the state first; the change kept for accepted(). */
  committed(e: NostrEvent): void {
    const change = this.gates.apply(e);
    if (!REBUILD_KINDS.includes(e.kind)) return;
    this.remember(e.id);
    if (!isGroupActionKind(e.kind)) return this.mend(e);
    // Only an event that changed its group (one of a group that does not exist is no one's business).
    if (change) this.latestAction.set(change.group, e.id);
    this.deletedBy(change);
    if (this.late.delete(e.id)) {
      // accepted() answered OK before this came: what follows from it is carried out now.
      if (change) void this.carryOut(e, change);
      return;
    }
    // Another node's 9005 or 9008: deleted again here a little later, in case its node does not.
    if (change && (change.deleteIds || change.deleteGroup)) this.sweepLater(e.id, change);
    this.changes.set(e.id, change);
    if (this.changes.size > MAX_CHANGES) this.changes.delete(this.changes.keys().next().value!);
    this.waiting.get(e.id)?.();
  }

  /** A deleted group is written to no more: what this relay kept per group goes with it. */
  private deletedBy(change: GroupChange | undefined): void {
    if (change?.deleteGroup) this.forget(change.group);
  }

  /**
   * Unless it is this node's own by then: accepted() names it after the OK, which on SQLite comes
   * after this feed, and carries its deletion out itself.
   */
  private sweepLater(id: string, change: GroupChange): void {
    const timer = setTimeout(() => {
      if (!this.ctx.closing && !this.mine.has(id)) this.purged = this.purged.then(() => this.deletions(change));
    }, SWEEP_AFTER_MS);
    timer.unref?.();
  }

  /** A 9005's or a 9008's deletion (idempotent); never throws. */
  private async deletions(change: GroupChange): Promise<void> {
    try {
      if (change.deleteIds) await this.purge.deleteEvents(change.group, change.deleteIds);
      if (change.deleteGroup) await this.purge.deleteGroup(change.group);
    } catch (err) {
      if (!this.ctx.closing) log.error(`groups: deleting in group ${change.group} failed:`, err);
    }
  }

  /**
   * After this node's OK true for a group moderation, join or leave event (write/ingest.ts,
   * act()): the follow-ups and the regenerated 39xxx written and committed, 9005 and 9008
   * deletions done. Never throws: what fails is logged, and reconcile() mends the metadata.
   */
  async accepted(e: NostrEvent): Promise<Refusal | undefined> {
    // Only the kinds committed() keeps a change for (the others in 9000-9022 are refused anyway).
    if (!isGroupActionKind(e.kind) || !REBUILD_KINDS.includes(e.kind)) return undefined;
    this.own(e.id);
    const told = await this.changeOf(e.id);
    if (!told) {
      // Stored, its change not told yet (Postgres: the feed is late): OK now, the rest when it comes.
      this.late.add(e.id);
      if (this.late.size > MAX_CHANGES) this.late.delete(this.late.values().next().value!);
      return undefined;
    }
    if (!told.change) return this.state.skippedBecause(e.id);
    await this.carryOut(e, told.change);
    return undefined;
  }

  /** The follow-ups written, the deletions done, the 39xxx regenerated. Never throws: what fails is logged, and reconcile() mends the metadata. */
  private async carryOut(e: NostrEvent, change: GroupChange): Promise<void> {
    try {
      for (const t of change.followUps) await this.write(t);
      if (change.deleteIds) await this.purge.deleteEvents(change.group, change.deleteIds);
      if (change.deleteGroup) await this.purge.deleteGroup(change.group);
      await Promise.all(change.regenerate.map((kind) => this.publish(change.group, kind)));
    } catch (err) {
      log.error(`groups: what follows event ${e.id} (kind ${e.kind}) failed:`, err);
    }
  }

  /** A relay-signed moderation event (the console, NIP-86): written, then what follows from it, as accepted(). */
  async act(t: GroupTemplate): Promise<WriteOutcome> {
    const e = signEvent({ ...t, created_at: nowSeconds() }, this.ctx.relayKey);
    const outcome = await this.ctx.writer.enqueue({ event: e, json: serializeEvent(e), cost: writeCost(e) });
    if (outcome.stored) await this.accepted(e);
    return outcome;
  }

  /** Writes again every relay-signed 39xxx whose stored tags differ from the state's (start, catch-up). */
  async reconcile(): Promise<number> {
    let n = 0;
    const writes: Promise<void>[] = [];
    for (const g of this.state.list())
      for (const kind of RELAY_GROUP_KINDS as RelayGroupKind[]) {
        if (!this.stale(g.id, kind)) continue;
        n++;
        writes.push(this.publish(g.id, kind));
        // A few at a time: thousands at once (a start after an import) would overrun the writer queue's bound.
        if (writes.length === RECONCILE_AT_ONCE) await Promise.all(writes.splice(0));
      }
    await Promise.all(writes);
    return n;
  }

  /**
   * Beside memory's answers, the store's changes not named one by one (server wiring: one
   * ChangeWatch per store): another process's commits are read by seq and applied.
   */
  watch(next: ChangeWatch): ChangeWatch {
    return {
      deleted: (ids) => next.deleted(ids),
      unknown: (maxCreatedAt, batch) => {
        next.unknown(maxCreatedAt, batch);
        if (!batch && this.state.ready) void this.catchUp();
      },
    };
  }

  /** Reads the moderation events committed after appliedSeq that the feed did not bring, applies them, reconciles. */
  catchUp(): Promise<void> {
    if (this.catchingUp) {
      this.catchUpAgain = true;
      return this.catchingUp;
    }
    this.catchingUp = (async () => {
      try {
        let found = 0;
        // Another process's 9005s and 9008s: it does not delete (an import), or may have stopped.
        const deletions: GroupChange[] = [];
        for (this.catchUpAgain = true; this.catchUpAgain; ) {
          this.catchUpAgain = false;
          // Not past the snapshot seq: an event of this process's writer past it is not told to the feed yet.
          const upTo = this.ctx.store.lastSeq();
          for (let more = true; more; ) {
            const rows = await this.ctx.store.groups.inOrder(REBUILD_KINDS, this.appliedSeq, PAGE);
            more = rows.length === PAGE;
            for (const row of rows) {
              if (row.seq > upTo) {
                more = false;
                break;
              }
              this.appliedSeq = row.seq;
              const e = JSON.parse(row.json) as NostrEvent;
              if (this.appliedIds.delete(e.id)) continue;
              const change = this.gates.apply(e);
              this.deletedBy(change);
              if (change && (change.deleteIds || change.deleteGroup)) deletions.push(change);
              found++;
            }
          }
        }
        if (found > 0) await this.reconcile();
        for (const change of deletions) await this.deletions(change);
      } catch (err) {
        log.error("groups: catching up on another process's commits failed:", err);
      } finally {
        this.catchingUp = undefined;
      }
    })();
    return this.catchingUp;
  }

  /**
   * A relay-signed 39xxx of another node (Postgres) committed after this node's moderation of the
   * group, rendered from a state that had not seen it: this node, the writer of the group's latest
   * moderation event (exactly one node is), writes it again. Its own never (no loop).
   */
  private mend(e: NostrEvent): void {
    if (e.pubkey !== this.ctx.relayKey.pubkey || this.mine.has(e.id) || !(RELAY_GROUP_KINDS as number[]).includes(e.kind)) return;
    const group = e.tags.find((t) => t[0] === "d")?.[1];
    if (group === undefined || !this.mine.has(this.latestAction.get(group) ?? "")) return;
    if (this.stale(group, e.kind as RelayGroupKind)) void this.publish(group, e.kind as RelayGroupKind);
  }

  private forget(group: string): void {
    this.latestAction.delete(group);
    for (const kind of RELAY_GROUP_KINDS) this.lastSigned.delete(`${kind}:${group}`);
  }

  private own(id: string): void {
    this.mine.add(id);
    if (this.mine.size > MAX_CHANGES) this.mine.delete(this.mine.values().next().value!);
  }

  private remember(id: string): void {
    if (!this.ctx.store.changes) return; // Postgres: every node's commits come through the feed
    this.appliedIds.add(id);
    if (this.appliedIds.size > MAX_APPLIED_IDS) this.appliedIds.delete(this.appliedIds.values().next().value!);
  }

  /** The change its commit made, once the feed told it (at once on SQLite, where the feed comes before the OK); undefined: not told in FEED_WAIT_MS. */
  private async changeOf(id: string): Promise<{ change: GroupChange | undefined } | undefined> {
    if (!this.changes.has(id)) {
      const told = new Promise<void>((resolve) => this.waiting.set(id, resolve));
      const timer = setTimeout(() => this.waiting.get(id)?.(), FEED_WAIT_MS);
      await told;
      clearTimeout(timer);
      this.waiting.delete(id);
    }
    if (!this.changes.has(id)) return undefined;
    const change = this.changes.get(id);
    this.changes.delete(id);
    return { change };
  }

  /** Does the stored 39xxx of `id` differ from what the state renders? */
  private stale(id: string, kind: RelayGroupKind): boolean {
    const tags = this.state.render(id, kind);
    if (!tags) return false;
    const published = this.state.published(id, kind);
    // A group without pins has no 39005 to write.
    if (!published) return kind !== 39005 || tags.length > 1;
    return JSON.stringify(published.tags) !== JSON.stringify(tags);
  }

  /**
   * Writes the group's `kind` as the state renders it when its turn comes: one in flight per
   * group and kind, at most one waiting, which every caller meanwhile shares.
   */
  private publish(id: string, kind: RelayGroupKind): Promise<void> {
    const key = `${kind}:${id}`;
    let p = this.publications.get(key);
    if (!p) this.publications.set(key, (p = { tail: Promise.resolve() }));
    if (p.pending) return p.pending;
    const pub = p;
    const run: Promise<void> = pub.tail.then(async () => {
      if (pub.pending === run) pub.pending = undefined;
      await this.publishNow(id, kind);
    });
    pub.pending = run;
    pub.tail = run.catch((err) => log.error(`groups: could not write ${kind} of ${id}:`, err));
    void pub.tail.then(() => {
      if (this.publications.get(key) === pub && !pub.pending) this.publications.delete(key);
    });
    return run;
  }

  private async publishNow(id: string, kind: RelayGroupKind): Promise<void> {
    const tags = this.state.render(id, kind);
    if (!tags || !this.stale(id, kind)) return;
    const key = `${kind}:${id}`;
    const after = Math.max(this.state.published(id, kind)?.created_at ?? 0, this.lastSigned.get(key) ?? 0);
    const created_at = Math.max(nowSeconds(), after + 1);
    this.lastSigned.set(key, created_at);
    await this.write({ kind, content: "", tags }, created_at);
  }

  /** Signs and writes a relay event; resolves after its commit. */
  private async write(t: GroupTemplate, created_at = nowSeconds()): Promise<void> {
    const e = signEvent({ ...t, created_at }, this.ctx.relayKey);
    this.own(e.id);
    const outcome = await this.ctx.writer.enqueue({ event: e, json: serializeEvent(e), cost: writeCost(e) });
    if (!outcome.stored && !outcome.duplicate) log.error(`groups: the relay's kind ${e.kind} was not stored: ${outcome.refusal.message}`);
  }
}
