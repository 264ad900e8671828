// The NIP-29 group state of this process: Maps derived only from committed events, in commit
// order (the store's CommitFeed), so every node of a cluster computes the same state; rebuilt at
// start from the store. Admission reads it synchronously (judge: Map lookups, never a query);
// apply re-validates each moderation event at its commit, so a stale admission on another node
// is stored but changes nothing.
import { setOf, type Config } from "../config/schema.ts";
import {
  applyEdit,
  emptyMetadata,
  GROUP_ID_RULE,
  hTags,
  isGroupActionKind,
  isGroupId,
  isRelayGroupKind,
  parseAction,
  previousRefs,
  type GroupGate,
  REBUILD_KINDS,
  renderTags,
  type Action,
  type RelayGroupKind,
  type Role,
} from "../nips/nip29.ts";
import type { GroupJudgeContext, GroupView, ReadAccess } from "../policy/groups.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";
import type { GroupRecords } from "../store/types.ts";
import { GatedMembers } from "./gated-members.ts";
import { admins, allowed, leaveRefusal, newGroup, roleOf, type Group } from "./group.ts";
import { prefixOf } from "./window.ts";

export interface GroupChange {
  group: string;
  /** Relay-signed kinds whose content changed and must be republished. */
  regenerate: RelayGroupKind[];
  /** Templates the relay signs next: the 9000 (with ["e", <9021 id>]) after an accepted 9021, the 9001 (with ["e", <9022 id>]) after a 9022. */
  followUps: { kind: number; content: string; tags: string[][] }[];
  /** 9005: ids to delete (only those whose h is `group`: checked by the relay against the store). */
  deleteIds?: string[];
  /** 9008: every event of the group goes (but the 9008 itself). */
  deleteGroup?: true;
}

export interface GroupSummary {
  id: string;
  name: string;
  picture: string;
  private: boolean;
  restricted: boolean;
  hidden: boolean;
  closed: boolean;
  members: number;
  admins: number;
  invites: number;
  createdBy: string;
  createdAt: number;
}

const PAGE = 5000;
const MAX_PREVIOUS = 16;
const PREVIOUS_REF = /^[0-9a-f]{8,64}$/;
/** Skipped events whose reason is kept (skippedBecause). */
const MAX_SKIP_REASONS = 1024;
/**
 * 9005 targets kept per group for refusing their republication; beyond it the oldest are
 * forgotten (memory bounded by this, not by the moderators' write rate). A forgotten target stays
 * out all the same when it was stored: its deletion tombstoned its id in the store
 * (relay/groups-purge.ts), whose writer refuses it as it does an id its author deleted.
 */
export const MAX_DELETED_IDS = 10_000;

type Judged = { id: string } | { refusal: Refusal } | undefined;
const refused = (prefix: Refusal["prefix"], message: string): Judged => ({ refusal: refuse(prefix, message) });

export class GroupState implements GroupView {
  private readonly groups = new Map<string, Group>();
  /** Deleted groups (9008): the id cannot be used again. */
  private readonly tombstones = new Set<string>();
  /** Live groups each pubkey created ([groups] max_groups_per_pubkey). */
  private readonly createdCount = new Map<string, number>();
  /**
   * Groups each pubkey deleted (9008, not the relay key): they count against max_groups_per_pubkey
   * as its live groups do, so a create-then-delete loop stops there (tombstones are kept forever,
   * and count against max_groups). By the 9008's author, not the creator: the 9008 is stored for
   * good, the 9007 goes with the purge, so every rebuild counts the same.
   */
  private readonly deletedCount = new Map<string, number>();
  /** The relay's last committed 39000-39005 per `${kind}:${id}`, for reconciliation. */
  private readonly publishedTags = new Map<string, { tags: string[][]; created_at: number }>();
  /** Private or hidden groups: those the read rule has to look at. */
  private readonly gatedIds = new Set<string>();
  /** Their members, by pubkey (memberships). */
  private readonly gatedMembers = new GatedMembers();
  private isReady = false;
  /** While rebuilding: the feed's events, applied after the rebuild (skipping those it read). */
  private rebuilding: { queue: NostrEvent[]; applied: Set<string> } | undefined;
  /** Moderation events apply skipped (the author lacked the right at their commit, or a limit). */
  private skipped = 0;
  /** Why the last few skipped events were skipped, by id: what an OK for an event admitted on a stale view can say. */
  private readonly skipReasons = new Map<string, Refusal>();

  constructor(private readonly opts: { config: () => Config; relayPubkey: string }) {}

  get ready(): boolean {
    return this.isReady;
  }

  get gating(): boolean {
    return this.gatedIds.size > 0 || this.tombstones.size > 0;
  }

  /** Deleted groups (9008): their events are unreadable to all, during the purge and after it (relay/groups.ts purges them again at start). */
  deleted(): readonly string[] {
    return [...this.tombstones];
  }

  /** Per live group, the ids its 9005s deleted (relay/groups.ts deletes those still stored again at start). */
  deletedByModerators(): { group: string; ids: string[] }[] {
    const out: { group: string; ids: string[] }[] = [];
    for (const g of this.groups.values()) if (g.deletedIds.size > 0) out.push({ group: g.id, ids: [...g.deletedIds] });
    return out;
  }

  private get settings(): Config["groups"] {
    return this.opts.config().groups;
  }

  /** The relay key, or one this relay had before ([groups] former_relay_keys): may do anything. */
  private authority(pubkey: string): boolean {
    return pubkey === this.opts.relayPubkey || setOf(this.settings.former_relay_keys).has(pubkey);
  }

  // ---- rebuild and apply (the only writers of the Maps) ----

  /** Replays `records` (REBUILD_KINDS in seq order, pages of 5,000) and the `previous` windows; then ready. */
  async rebuild(records: GroupRecords): Promise<{ groups: number; members: number; events: number; skipped: number; ms: number }> {
    const started = performance.now();
    const rebuilding = (this.rebuilding = { queue: [] as NostrEvent[], applied: new Set<string>() });
    const skippedBefore = this.skipped;
    let events = 0;
    try {
      for (let after = 0; ; ) {
        const page = await records.inOrder(REBUILD_KINDS, after, PAGE);
        for (const row of page) {
          const e = JSON.parse(row.json) as NostrEvent;
          this.apply(e);
          rebuilding.applied.add(e.id);
          after = row.seq;
        }
        events += page.length;
        if (page.length < PAGE) break;
      }
      await this.seedWindows(records);
    } finally {
      this.rebuilding = undefined;
      for (const e of rebuilding.queue) if (!rebuilding.applied.has(e.id)) this.apply(e);
    }
    this.isReady = true;
    const { groups, members } = this.stats();
    return { groups, members, events, skipped: this.skipped - skippedBefore, ms: Math.round(performance.now() - started) };
  }

  private async seedWindows(records: GroupRecords): Promise<void> {
    const size = this.settings.previous_window;
    const recent = await records.recentByGroup(size, Math.max(100_000, this.groups.size * size));
    for (const g of this.groups.values()) {
      const ids = recent.get(g.id);
      if (ids && ids.length > 0) g.window.seed(ids);
      else g.window.chill();
    }
  }

  /** Each committed event, any node's, in commit order (CommitFeed.committed). Moderation events are
   *  re-validated here against the state at their commit; every h-tagged event enters its group's window. */
  applyCommitted(e: NostrEvent): GroupChange | undefined {
    if (this.rebuilding) {
      this.rebuilding.queue.push(e);
      return undefined;
    }
    return this.apply(e);
  }

  private apply(e: NostrEvent): GroupChange | undefined {
    if (isRelayGroupKind(e.kind)) {
      if (e.pubkey === this.opts.relayPubkey) this.notePublished(e);
      return undefined;
    }
    const h = hTags(e);
    if (h.length !== 1) return undefined;
    const change = isGroupActionKind(e.kind) ? this.applyAction(h[0]!, e) : undefined;
    this.groups.get(h[0]!)?.window.add(e.id);
    return change;
  }

  private notePublished(e: NostrEvent): void {
    const d = e.tags.find((t) => t[0] === "d")?.[1];
    if (d === undefined) return;
    const key = `${e.kind}:${d}`;
    const had = this.publishedTags.get(key);
    if (!had || e.created_at >= had.created_at) this.publishedTags.set(key, { tags: e.tags, created_at: e.created_at });
  }

  private skip(e: NostrEvent, why: Refusal): undefined {
    this.skipped++;
    if (this.skipReasons.size >= MAX_SKIP_REASONS) this.skipReasons.delete(this.skipReasons.keys().next().value!);
    this.skipReasons.set(e.id, why);
    return undefined;
  }

  private applyAction(id: string, e: NostrEvent): GroupChange | undefined {
    const a = parseAction(e);
    if (typeof a === "string") return this.skip(e, refuse("invalid", a));
    if (a.kind === 9007) return this.create(id, e);
    const g = this.groups.get(id);
    // A stored 9008 whose purge deleted its group's events, the 9007 among them: still deleted.
    if (!g && a.kind === 9008 && this.rebuilding) return void this.tombstone(id, e.pubkey);
    if (!g) return this.skip(e, this.missing(id));
    if (a.kind === 9021) {
      const no = this.joinRefusal(g, e.pubkey, a.code);
      if (no) return this.skip(e, no);
      // An invite code admits one join: a 9021 is readable by anyone who may read the group, so a
      // code it used is known from then on.
      if (a.code !== undefined) g.invites.delete(a.code);
      return this.join(g, e);
    }
    if (a.kind === 9022) {
      const no = leaveRefusal(g, e.pubkey);
      return no ? this.skip(e, no) : this.leave(g, e);
    }
    const authority = this.authority(e.pubkey);
    const no = allowed(g, e.pubkey, authority, a) ?? this.stateRefusal(g, a, e.pubkey, authority);
    if (no) return this.skip(e, no);
    return this.act(g, a, e.pubkey, authority);
  }

  private act(g: Group, a: Exclude<Action, { kind: 9007 | 9021 | 9022 }>, author: string, authority: boolean): GroupChange {
    const change: GroupChange = { group: g.id, regenerate: [], followUps: [] };
    // The relay's answer to a join or a leave changes nothing: the user's own 9021/9022 did, at its
    // commit; a moderator's action between the two (a removal after the join, a join after the
    // leave) is not undone by the answer arriving later.
    if (authority && ((a.kind === 9000 && a.afterJoin) || (a.kind === 9001 && a.afterLeave))) return change;
    switch (a.kind) {
      case 9000:
        change.regenerate = this.putUsers(g, a.targets);
        break;
      case 9001:
        change.regenerate = this.removeUsers(g, a.targets);
        break;
      case 9002:
        this.edit(g, applyEdit(g.meta, a.edit));
        change.regenerate = [39000];
        break;
      case 9005:
        for (const id of a.ids) g.deletedIds.add(id);
        for (const id of g.deletedIds) {
          if (g.deletedIds.size <= MAX_DELETED_IDS) break;
          g.deletedIds.delete(id);
        }
        change.deleteIds = a.ids;
        break;
      case 9008:
        this.drop(g);
        this.tombstone(g.id, author);
        change.deleteGroup = true;
        break;
      case 9009:
        g.invites.add(a.code);
        break;
      case 9010:
        g.pins = a.pins;
        change.regenerate = [39005];
        break;
    }
    return change;
  }

  private create(id: string, e: NostrEvent): GroupChange | undefined {
    const authority = this.authority(e.pubkey);
    const no = this.existsRefusal(id) ?? this.createLimit(e.pubkey, authority);
    if (no) return this.skip(e, no);
    const g = newGroup(id, emptyMetadata(), e.pubkey, e.created_at, this.settings.previous_window, false);
    if (!authority) g.members.set(e.pubkey, ["admin"]);
    this.groups.set(id, g);
    this.createdCount.set(e.pubkey, (this.createdCount.get(e.pubkey) ?? 0) + 1);
    return { group: id, regenerate: [39000, 39001, 39002, 39003], followUps: [] };
  }

  /** A deleted group's id, taken for good; the 9008's author charged for it (the relay key never is). */
  private tombstone(id: string, author: string): void {
    if (this.tombstones.has(id)) return;
    this.tombstones.add(id);
    if (!this.authority(author)) this.deletedCount.set(author, (this.deletedCount.get(author) ?? 0) + 1);
  }

  private drop(g: Group): void {
    this.groups.delete(g.id);
    const n = (this.createdCount.get(g.createdBy) ?? 1) - 1;
    if (n > 0) this.createdCount.set(g.createdBy, n);
    else this.createdCount.delete(g.createdBy);
    for (const kind of [39000, 39001, 39002, 39003, 39005]) this.publishedTags.delete(`${kind}:${g.id}`);
    // Its events become unreadable to all (a tombstone: no members), not public, while the purge deletes them.
    if (this.gatedIds.delete(g.id)) for (const pk of g.members.keys()) this.gatedMembers.delete(pk, g.id);
  }

  private edit(g: Group, meta: Group["meta"]): void {
    g.meta = meta;
    const gated = meta.private || meta.hidden;
    if (gated === this.gatedIds.has(g.id)) return;
    if (gated) this.gatedIds.add(g.id);
    else this.gatedIds.delete(g.id);
    for (const pk of g.members.keys()) this.membership(g, pk, gated);
  }

  /** A member of `g` came (or went): kept in gatedMembers while `g` is gated. */
  private membership(g: Group, pubkey: string, member: boolean): void {
    if (member && this.gatedIds.has(g.id)) this.gatedMembers.add(pubkey, g.id);
    else this.gatedMembers.delete(pubkey, g.id);
  }

  private putUsers(g: Group, targets: readonly { pubkey: string; roles: Role[] }[]): RelayGroupKind[] {
    let listed = false;
    let roles = false;
    for (const t of targets) {
      const before = g.members.get(t.pubkey);
      if (!before) listed = true;
      if (before?.[0] !== t.roles[0]) roles = true;
      g.members.set(t.pubkey, t.roles);
      this.membership(g, t.pubkey, true);
      g.removed.delete(t.pubkey);
    }
    return roles ? [39001, 39002] : listed ? [39002] : [];
  }

  /** A removal by a moderator (or the relay's console): the removed may not post nor rejoin until a 9000. */
  private removeUsers(g: Group, targets: readonly string[]): RelayGroupKind[] {
    let listed = false;
    let roles = false;
    for (const pk of targets) {
      if (roleOf(g, pk)) roles = true;
      if (g.members.delete(pk)) listed = true;
      this.membership(g, pk, false);
      g.removed.add(pk);
    }
    return roles ? [39001, 39002] : listed ? [39002] : [];
  }

  /** 9021, valid at its commit: a member at once, so the joiner may post as soon as the OK arrives; the relay's 9000 names the request. */
  private join(g: Group, e: NostrEvent): GroupChange {
    g.members.set(e.pubkey, []);
    this.membership(g, e.pubkey, true);
    return { group: g.id, regenerate: [39002], followUps: [answerTo(9000, g, e)] };
  }

  /** 9022 of a member: gone, not banned; the relay's 9001 names the request. */
  private leave(g: Group, e: NostrEvent): GroupChange {
    const hadRole = roleOf(g, e.pubkey) !== undefined;
    g.members.delete(e.pubkey);
    this.membership(g, e.pubkey, false);
    return { group: g.id, regenerate: hadRole ? [39001, 39002] : [39002], followUps: [answerTo(9001, g, e)] };
  }

  // ---- rules judge and apply share ----

  private existsRefusal(id: string): Refusal | undefined {
    if (this.tombstones.has(id)) return refuse("blocked", `group "${id}" was deleted`);
    if (this.groups.has(id)) return refuse("duplicate", `group "${id}" already exists`);
    return undefined;
  }

  private createLimit(author: string, authority: boolean): Refusal | undefined {
    const { max_groups, max_groups_per_pubkey } = this.settings;
    // Deleted groups count: their ids stay taken (and held in memory) for good.
    if (this.groups.size + this.tombstones.size >= max_groups)
      return refuse("blocked", `this relay hosts the most groups it allows (${max_groups})`);
    if (!authority && (this.createdCount.get(author) ?? 0) + (this.deletedCount.get(author) ?? 0) >= max_groups_per_pubkey)
      return refuse("blocked", `you have created the most groups allowed (${max_groups_per_pubkey})`);
    return undefined;
  }

  private full(g: Group, adding: number): Refusal | undefined {
    const max = this.settings.max_members_per_group;
    return g.members.size + adding > max ? refuse("blocked", `group is full (${max} members)`) : undefined;
  }

  /**
   * A removal is kept until a 9000 puts the pubkey back (it may not post nor rejoin), so the list
   * is bounded, as members are, by max_members_per_group: past it a 9001 is refused, not an old
   * removal forgotten.
   */
  private removedFull(g: Group, targets: readonly string[]): Refusal | undefined {
    const max = this.settings.max_members_per_group;
    const adding = new Set(targets.filter((pk) => !g.removed.has(pk))).size;
    return g.removed.size + adding > max
      ? refuse("blocked", `this group's list of removed users is full (${max}): put some back (kind 9000) first`)
      : undefined;
  }

  private joinRefusal(g: Group, pubkey: string, code: string | undefined): Refusal | undefined {
    if (g.members.has(pubkey)) return refuse("duplicate", "already a member");
    if (g.removed.has(pubkey)) return refuse("blocked", "you were removed from this group");
    if (g.meta.closed && code === undefined) return refuse("restricted", "this group is closed: joining needs an invite code");
    if (g.meta.closed && !g.invites.has(code!)) return refuse("restricted", "unknown invite code");
    return this.full(g, 1);
  }

  /** What the rest of the state allows: the limits of 9000 (members), 9009 (invites), 9010 (pins); a 9002's new parent. */
  private stateRefusal(g: Group, a: Action, author: string, authority: boolean): Refusal | undefined {
    const s = this.settings;
    if (a.kind === 9002) return this.parentRefusal(g, a.edit.flags?.parent, author, authority);
    if (a.kind === 9000) return this.full(g, new Set(a.targets.map((t) => t.pubkey).filter((pk) => !g.members.has(pk))).size);
    if (a.kind === 9001) return this.removedFull(g, a.targets);
    if (a.kind === 9009 && g.invites.has(a.code)) return refuse("duplicate", "invite code exists");
    if (a.kind === 9009 && g.invites.size >= s.max_invites_per_group)
      return refuse("blocked", `this group has the most invite codes allowed (${s.max_invites_per_group})`);
    if (a.kind === 9010 && a.pins.length > s.max_pins) return refuse("invalid", `too many pins (max ${s.max_pins})`);
    return undefined;
  }

  /**
   * Subgroups: a new parent must exist, must not be the group or below it (no cycle), and the
   * 9002's author must be an admin of it (so every parent relation the relay publishes is attested).
   */
  private parentRefusal(g: Group, parent: { id: string } | undefined, author: string, authority: boolean): Refusal | undefined {
    if (!parent || parent.id === g.meta.parent?.id) return undefined;
    if (parent.id === g.id) return refuse("invalid", "a group cannot be its own parent");
    const p = this.groups.get(parent.id);
    if (!p) return refuse("invalid", `no group "${parent.id}" to be the parent`);
    if (!authority && roleOf(p, author) !== "admin")
      return refuse("restricted", `only an admin of group "${p.id}" can put a group under it`);
    for (let up: Group | undefined = p, steps = 0; up && steps <= this.groups.size; steps++) {
      if (up.id === g.id) return refuse("invalid", `group "${p.id}" is inside this group: that parent would make a cycle`);
      up = up.meta.parent && this.groups.get(up.meta.parent.id);
    }
    return undefined;
  }

  // ---- judge: the write rule (Maps only, never a query) ----

  /** Step 1-2 of the judge order: whose business the event is. undefined: not a group event, or none of ours. */
  private classify(e: NostrEvent): Judged {
    if (isRelayGroupKind(e.kind))
      return e.pubkey === this.opts.relayPubkey ? undefined : refused("blocked", "only the relay signs group metadata (kinds 39000-39009)");
    const h = hTags(e);
    if (h.length === 0) return isGroupActionKind(e.kind) ? refused("invalid", "group moderation events need an h tag") : undefined;
    if (h.length > 1) return refused("invalid", "an event belongs to one group (one h tag)");
    if (!isGroupId(h[0]!)) return refused("invalid", GROUP_ID_RULE);
    // NIP-09: an author may always delete their own events in a group (the writer's rule does the rest).
    return e.kind === 5 ? undefined : { id: h[0]! };
  }

  judge(ctx: GroupJudgeContext, e: NostrEvent): Refusal | undefined {
    const c = this.classify(e);
    if (c === undefined || "refusal" in c) return c?.refusal;
    if (!this.isReady) return refuse("error", "groups are loading, try again");
    const late = ctx.config.groups.late_publication_seconds;
    if (late > 0 && e.created_at < ctx.now - late)
      return refuse("invalid", `event is older than this group accepts (late publication, ${late} s)`);
    const r = isGroupActionKind(e.kind) ? this.judgeAction(ctx, c.id, e) : this.judgePost(ctx.config, c.id, e);
    return r ?? this.judgePrevious(c.id, e);
  }

  private missing(id: string): Refusal {
    return this.tombstones.has(id) ? refuse("blocked", `group "${id}" was deleted`) : refuse("invalid", `no group "${id}" on this relay`);
  }

  private judgeAction(ctx: GroupJudgeContext, id: string, e: NostrEvent): Refusal | undefined {
    const a = parseAction(e);
    if (typeof a === "string") return refuse("invalid", a);
    if (a.kind === 9007) return this.judgeCreate(ctx, id, e);
    const g = this.groups.get(id);
    if (!g) return this.missing(id);
    if (a.kind === 9021) return this.joinRefusal(g, e.pubkey, a.code);
    if (a.kind === 9022) return leaveRefusal(g, e.pubkey);
    const authority = this.authority(e.pubkey);
    return allowed(g, e.pubkey, authority, a) ?? this.stateRefusal(g, a, e.pubkey, authority);
  }

  private judgeCreate(ctx: GroupJudgeContext, id: string, e: NostrEvent): Refusal | undefined {
    const exists = this.existsRefusal(id);
    if (exists) return exists;
    const authority = this.authority(e.pubkey);
    if (!authority && !ctx.authed.has(e.pubkey)) return refuse("auth-required", "authenticate to create a group");
    if (!authority && !mayCreate(ctx.config, e.pubkey)) return refuse("restricted", "you may not create groups on this relay");
    return this.createLimit(e.pubkey, authority);
  }

  /** An ordinary event in a group (a chat message, a note, a reaction). */
  private judgePost(config: Config, id: string, e: NostrEvent): Refusal | undefined {
    const g = this.groups.get(id);
    if (!g) return this.missing(id);
    if (g.removed.has(e.pubkey)) return refuse("blocked", "you were removed from this group");
    if (g.meta.restricted && !g.members.has(e.pubkey) && !this.authority(e.pubkey))
      return refuse("restricted", "only members can write in this group");
    const defaults = config.groups.default_kinds;
    const kinds = g.meta.supportedKinds ?? (defaults.length > 0 ? defaults : undefined);
    if (kinds && !kinds.includes(e.kind)) return refuse("blocked", `kind ${e.kind} is not accepted in this group`);
    if (g.deletedIds.has(e.id)) return refuse("blocked", "this event was deleted by the group's moderators");
    return undefined;
  }

  /** NIP-29 timeline references: each must name (by its first 8 characters) a recent event of the group. */
  private judgePrevious(id: string, e: NostrEvent): Refusal | undefined {
    const refs = previousRefs(e);
    if (refs.length === 0) return undefined;
    if (refs.length > MAX_PREVIOUS) return refuse("invalid", `too many previous references (max ${MAX_PREVIOUS})`);
    if (refs.some((r) => !PREVIOUS_REF.test(r))) return refuse("invalid", "malformed previous reference");
    const window = this.groups.get(id)?.window;
    if (!window || window.cold) return undefined; // a 9007: no group yet
    const unknown = refs.find((r) => !window.has(prefixOf(r)!));
    return unknown === undefined
      ? undefined
      : refuse("invalid", `previous reference "${unknown.slice(0, 8)}" names no recent event of this group`);
  }

  /**
   * The archive rule (import, sync, stream, mirror): no auth, no late publication, no previous.
   * `posts` (the [mirror]: anyone's events, live, from another relay): a post passes the checks
   * a direct one does (the group exists, its author not removed, a member of a restricted group,
   * a supported kind). An archive (import, sync, stream) is the operator's, and its posts may
   * precede, in one batch, the 9007 or 9000 that makes them valid (judged before that commit).
   */
  judgeArchive(e: NostrEvent, posts = false): Refusal | undefined {
    const c = this.classify(e);
    if (c === undefined || "refusal" in c) return c?.refusal;
    if (posts && !isGroupActionKind(e.kind)) {
      if (!this.isReady) return refuse("error", "groups are loading, try again");
      return this.judgePost(this.opts.config(), c.id, e);
    }
    // A mirrored 9008 of a group this relay does not have: skipped at its commit, but stored, the
    // next rebuild would take it for a deleted group's (whose purge took its 9007) and tombstone
    // the id, past max_groups, dropping the group if it is created later.
    if (posts && e.kind === 9008 && !this.tombstones.has(c.id) && !this.groups.has(c.id))
      return this.isReady ? this.missing(c.id) : refuse("error", "groups are loading, try again");
    if (this.tombstones.has(c.id) && e.kind !== 9008) return refuse("blocked", `group "${c.id}" was deleted`);
    if (isGroupActionKind(e.kind)) {
      const a = parseAction(e);
      if (typeof a === "string") return refuse("invalid", a);
    }
    if (this.groups.get(c.id)?.deletedIds.has(e.id)) return refuse("blocked", "this event was deleted by the group's moderators");
    return undefined;
  }

  // ---- reads ----

  private isMember(g: Group, authed: ReadonlySet<string>): boolean {
    for (const pk of authed) if (g.members.has(pk)) return true;
    return false;
  }

  access(id: string, authed: ReadonlySet<string>, metadata: boolean): ReadAccess {
    if (!this.isReady) return "restricted"; // only until the start finished
    // A deleted group (9008): what its purge has not deleted yet (or a crash left) is read by no one.
    if (this.tombstones.has(id)) return authed.size === 0 ? "auth-required" : "restricted";
    const g = this.groups.get(id);
    if (!g || !(metadata ? g.meta.hidden : g.meta.private) || this.isMember(g, authed)) return "ok";
    return authed.size === 0 ? "auth-required" : "restricted";
  }

  memberships(authed: ReadonlySet<string>): readonly string[] {
    return this.gatedMembers.of(authed);
  }

  /** What the read rule gates of group `id` now (the store's group_gates row: relay/groups.ts keeps it so). */
  gateOf(id: string): GroupGate {
    if (this.tombstones.has(id)) return { group: id, events: true, metadata: true };
    const g = this.groups.get(id);
    return { group: id, events: g?.meta.private ?? false, metadata: g?.meta.hidden ?? false };
  }

  /** Every group the read rule gates now: the private and hidden ones, and the deleted ones. */
  gates(): GroupGate[] {
    return [...this.gatedIds, ...this.tombstones].map((id) => this.gateOf(id));
  }

  /**
   * Why apply skipped this committed moderation event, join or leave (the last 1,024 skipped are
   * kept): one admitted on a stale view (a burst in flight, another node) is stored but changes
   * nothing, and the relay can tell its sender so (a join flood: one joins, the rest "duplicate:").
   */
  skippedBecause(id: string): Refusal | undefined {
    return this.skipReasons.get(id);
  }

  /** The relay-signed event of `kind` for group `id` as it should be now (undefined: group gone). */
  render(id: string, kind: RelayGroupKind): string[][] | undefined {
    const g = this.groups.get(id);
    return g && renderTags(kind, { id, meta: g.meta, members: g.members, pins: g.pins }, this.settings.max_members_listed);
  }

  /** Tags of the last committed relay-signed `kind` for `id` (for reconciliation). */
  published(id: string, kind: number): { tags: string[][]; created_at: number } | undefined {
    return this.publishedTags.get(`${kind}:${id}`);
  }

  // ---- operators ----

  list(): GroupSummary[] {
    return [...this.groups.values()].map((g) => ({
      id: g.id,
      name: g.meta.name,
      picture: g.meta.picture,
      private: g.meta.private,
      restricted: g.meta.restricted,
      hidden: g.meta.hidden,
      closed: g.meta.closed,
      members: g.members.size,
      admins: admins(g),
      invites: g.invites.size,
      createdBy: g.createdBy,
      createdAt: g.createdAt,
    }));
  }

  members(id: string): { pubkey: string; roles: readonly Role[] }[] | undefined {
    const g = this.groups.get(id);
    return g && [...g.members].map(([pubkey, roles]) => ({ pubkey, roles }));
  }

  invites(id: string): string[] | undefined {
    const g = this.groups.get(id);
    return g && [...g.invites];
  }

  /** bytes: an estimate of the heap the state holds (for the bench), not a measure. */
  stats(): { groups: number; members: number; bytes: number; deleted: number } {
    let members = 0;
    let bytes = 0;
    for (const g of this.groups.values()) {
      members += g.members.size;
      // Measured (heap after a forced GC, 2,000 groups of 100): ~1.2 KB a group with a window of
      // 100, ~250 B a member, ~160 B a removed pubkey or a 9005 target.
      bytes +=
        800 +
        g.window.size * 4 +
        g.members.size * 250 +
        g.removed.size * 160 +
        (g.invites.size + g.pins.length) * 100 +
        g.deletedIds.size * 160;
    }
    for (const p of this.publishedTags.values()) bytes += 100 + p.tags.length * 120;
    // A deleted group's id (kept for good) and its deleter's count: ~360 B measured, a deleter each.
    bytes += this.tombstones.size * 120 + this.deletedCount.size * 240;
    return { groups: this.groups.size, members, bytes, deleted: this.tombstones.size };
  }
}

/** The relay's 9000 or 9001 answering a user's join or leave `e`: names the user and the request. */
const answerTo = (kind: 9000 | 9001, g: Group, e: NostrEvent) => ({
  kind,
  content: "",
  tags: [
    ["h", g.id],
    ["p", e.pubkey],
    ["e", e.id],
  ],
});

/** [groups] creators: "anyone", "admins" ([admin] pubkeys), or pubkeys. */
function mayCreate(config: Config, pubkey: string): boolean {
  const creators = setOf(config.groups.creators);
  return creators.has("anyone") || creators.has(pubkey) || (creators.has("admins") && setOf(config.admin.pubkeys).has(pubkey));
}
