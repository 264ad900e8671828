// NIP-29 deletions (relay/groups.ts decides when): a 9005's targets, a 9008's group. Both are
// idempotent (what is gone is not found again), so they are run again wherever one could have
// been missed: at start (a node that died after the commit, a purge cut short), on every other
// node some time after it applied the 9005 or 9008 (the accepting node died, or on Postgres its
// change reached the feed late), and after a catch-up on another process's commits. What a purge
// has not reached is read by no one meanwhile (GroupState.access: a tombstone; a 9005's target
// stays readable until deleted, which is why it is retried).
import { log } from "../log.ts";
import { hTags } from "../nips/nip29.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Filter } from "../protocol/filter.ts";
import type { RelayContext } from "./context.ts";

/** Rows read per page of a 9008's deletion; ids per query of a 9005's. */
const PAGE = 500;

export class GroupPurge {
  constructor(private readonly ctx: RelayContext) {}

  private get state() {
    return this.ctx.groups!;
  }

  /**
   * What remains of each deleted group (tombstone) goes, as its 9008's purge would have done, and
   * so do the events a 9005 deleted that are still stored. Never throws (stopped meanwhile: the
   * next start purges again).
   */
  async remains(): Promise<void> {
    try {
      for (const id of this.state.deleted()) if (!this.ctx.closing) await this.deleteGroup(id);
      // PAGE ids a query, whatever their groups: thousands of groups that deleted an event or two
      // each cost a few queries, not one each.
      let page = new Map<string, string[]>();
      for (const { group, ids } of this.state.deletedByModerators())
        for (const id of ids) {
          if (this.ctx.closing) return;
          const groups = page.get(id);
          if (groups) groups.push(group);
          else page.set(id, [group]);
          if (page.size < PAGE) continue;
          await this.deleteTargets(page);
          page = new Map();
        }
      if (page.size > 0 && !this.ctx.closing) await this.deleteTargets(page);
    } catch (err) {
      if (!this.ctx.closing) log.error("groups: purging what remains of deleted groups and events failed:", err);
    }
  }

  /**
   * 9005: the named events of this group still stored (an id of another group is left alone),
   * each kept out by the store as well (a tombstone): the group state keeps only the newest
   * 10,000 targets of a group (MAX_DELETED_IDS).
   */
  async deleteEvents(group: string, ids: readonly string[]): Promise<void> {
    await this.deleteTargets(new Map(ids.map((id) => [id, [group]])));
  }

  /** The stored events of `targets` (id -> the groups whose 9005s named it) that are in one of those groups, deleted and kept out. */
  private async deleteTargets(targets: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const found = await this.stored({ ids: [...targets.keys()] }, targets.size);
    for (const e of found) {
      const groups = targets.get(e.id)!;
      if (hTags(e).some((h) => groups.includes(h))) await this.ctx.store.admin.deleteEvent(e.id, true);
    }
  }

  /** 9008: every event of the group but its 9008s, then the relay's 39xxx of it. */
  async deleteGroup(group: string): Promise<void> {
    const seen = new Set<string>();
    for (;;) {
      const page = (await this.stored({ "#h": [group] }, PAGE)).filter((e) => e.kind !== 9008 && !seen.has(e.id));
      if (page.length === 0) break;
      for (const e of page) {
        seen.add(e.id);
        await this.ctx.store.admin.deleteEvent(e.id);
      }
    }
    // The group's 39xxx, signed by this key or one the relay had before (they are never replaced).
    const relay = [this.ctx.relayKey.pubkey, ...this.ctx.config.groups.former_relay_keys];
    const meta = await this.stored(
      { authors: relay, kinds: [39000, 39001, 39002, 39003, 39004, 39005], "#d": [group] },
      100 * relay.length,
    );
    for (const e of meta) await this.ctx.store.admin.deleteEvent(e.id);
  }

  /** Stored events matching `filter`, at most `limit`. */
  private async stored(filter: Filter, limit: number): Promise<NostrEvent[]> {
    const out: NostrEvent[] = [];
    const job = { filters: [filter], limits: [limit], maxSeq: this.ctx.store.lastSeq(), now: 0 };
    for await (const rows of this.ctx.store.query(job)) for (const json of rows) out.push(JSON.parse(json) as NostrEvent);
    return out;
  }
}
