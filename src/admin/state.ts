// NIP-86 admin state: bans, allow lists, kinds, blocked IPs, relay info and roles, held in
// memory for the policies (policy/rules.ts reads it as an AdminView) and written through to the
// store, where it survives restarts. Every change takes effect at once. What a ban takes away
// (issue 34) is hidden first (the store's `hidden` rows, left out of every read through
// Visibility.hidden) and deleted only after [admin] ban_retention (purgeDue), so an unban within
// it brings everything back.
import type { Config } from "../config/schema.ts";
import { durationSeconds } from "../config/duration.ts";
import { accessMethodsOff, ADMIN_METHODS, GROUP_METHODS, type AccessCall, type AdminCall, type GroupCall } from "../nips/nip86.ts";
import type { AdminView } from "../policy/rules.ts";
import { nowSeconds } from "../protocol/event.ts";
import type { AdminEntry, AdminStore, HiddenEntry, HiddenReads, HiddenWhat, Store } from "../store/types.ts";

/** The lists of admin_entries. */
const LISTS = [
  "banned_pubkeys",
  "allowed_pubkeys",
  "banned_events",
  "allowed_events",
  "allowed_kinds",
  "disallowed_kinds",
  "blocked_ips",
  "info",
  "roles",
  "role_members",
] as const;
type List = (typeof LISTS)[number];

/** Most reports looked at for listeventsneedingmoderation. */
const REPORTS_SCANNED = 2000;
const REPORT_KIND = 1984; // NIP-56

/** Hidden rows one purge pass works on at most (each an author's purge in steps, or one event). */
const PURGES_PER_PASS = 16;

/** What a ban would take away (previewbanpubkey, previewbanevent). */
export interface BanPreview {
  /** Stored events it takes away (not expired, whoever may read them). */
  events: number;
  /** hide: hidden now, deleted after the retention; delete: deleted now; keep: left served (ban_deletes_events off). */
  action: "hide" | "delete" | "keep";
  /** [admin] ban_retention as written ("30 days"), and in seconds. */
  retention: string;
  retention_seconds: number;
}

/** What an admin call does beyond the lists: close an address's connections. */
interface AdminEffects {
  /** Closes every connection from this IP; how many. */
  disconnectIp(ip: string): number;
}

export class AdminError extends Error {}

/** The policies' view of stored admin state, for a process that only reads it (bunstr import). */
export function adminViewOf(entries: readonly AdminEntry[]): AdminView {
  const keys = (list: List) => new Map(entries.filter((e) => e.list === list).map((e) => [e.key, e.value]));
  const kinds = (list: List) => new Set(entries.filter((e) => e.list === list).map((e) => Number(e.key)));
  return {
    bannedPubkeys: keys("banned_pubkeys"),
    allowedPubkeys: keys("allowed_pubkeys"),
    bannedEvents: keys("banned_events"),
    blockedIps: keys("blocked_ips"),
    allowedKinds: kinds("allowed_kinds"),
    disallowedKinds: kinds("disallowed_kinds"),
  };
}

export class AdminState implements AdminView {
  private readonly lists = new Map<List, Map<string, AdminEntry>>(LISTS.map((l) => [l, new Map()]));
  readonly bannedPubkeys = this.list("banned_pubkeys");
  readonly allowedPubkeys = this.list("allowed_pubkeys");
  readonly bannedEvents = this.list("banned_events");
  readonly blockedIps = this.list("blocked_ips");
  readonly allowedKinds = new Set<number>();
  readonly disallowedKinds = new Set<number>();
  /** What bans hide now (the store's `hidden` rows), by `what:key`. */
  private readonly hiddenRows = new Map<string, HiddenEntry>();
  /** Which probes the reads make (policy/visibility.ts visibilityFor); undefined: nothing is hidden, no probe. */
  hiding: HiddenReads | undefined;
  /** Told when the hidden rows were read again (a ban, an unban, a purge, another node's change): the purge timer looks again. */
  onHiddenChange?: () => void;

  constructor(
    private readonly store: Store,
    private readonly config: Config,
    private readonly effects: AdminEffects,
  ) {}

  private get db(): AdminStore {
    return this.store.admin;
  }

  private list(name: List): Map<string, AdminEntry> {
    return this.lists.get(name)!;
  }

  /** (Re)reads every list from the store, and shows the stored relay info in config.info. */
  async load(): Promise<void> {
    // Read first, then swap in one go: the policies never see the lists half-empty.
    const [entries, hidden] = await Promise.all([this.db.entries(), this.db.hidden()]);
    for (const l of this.lists.values()) l.clear();
    for (const e of entries) this.lists.get(e.list as List)?.set(e.key, e);
    this.syncKinds();
    this.overlayInfo();
    this.syncHidden(hidden);
  }

  private syncHidden(rows: readonly HiddenEntry[]): void {
    this.hiddenRows.clear();
    for (const r of rows) this.hiddenRows.set(`${r.what}:${r.key}`, r);
    const authors = rows.some((r) => r.what === "pubkey");
    const events = rows.some((r) => r.what === "event");
    // A new object only when it changes: reads compare nothing, but it stays small and shared.
    if (!authors && !events) this.hiding = undefined;
    else if (this.hiding?.authors !== authors || this.hiding?.events !== events) this.hiding = { authors, events };
    this.onHiddenChange?.();
  }

  /** [admin] ban_retention in seconds (reloadable: read at each use). */
  get retentionSeconds(): number {
    return durationSeconds(this.config.admin.ban_retention);
  }

  /** When what a ban hid is deleted (seconds), or undefined when nothing of it is hidden. */
  purgeAt(what: HiddenWhat, key: string): number | undefined {
    const row = this.hiddenRows.get(`${what}:${key}`);
    return row && row.since + this.retentionSeconds;
  }

  /**
   * A ban takes away what is stored: hidden until the retention ends (then purgeDue deletes it),
   * or with a retention of 0 deleted at once, as before issue 34.
   */
  private async takeAway(what: HiddenWhat, key: string): Promise<void> {
    if (this.retentionSeconds === 0) {
      if (what === "pubkey") await this.db.deleteAuthor(key);
      else await this.db.deleteEvent(key);
      return;
    }
    await this.db.hide(what, key, nowSeconds());
    this.syncHidden(await this.db.hidden());
  }

  /** An unban brings back what its ban hid, unless its purge has begun. */
  private async giveBack(what: HiddenWhat, key: string): Promise<void> {
    const row = this.hiddenRows.get(`${what}:${key}`);
    if (!row || row.purging) return;
    await this.db.unhide(what, key);
    this.syncHidden(await this.db.hidden());
  }

  /**
   * One pass of the purges of what bans hid longer than the retention: at most PURGES_PER_PASS
   * rows, each one call of the store (an author's events go in the store's purge steps, and a
   * later pass sees them done). Returns the seconds until the next pass is useful: 1 while a
   * purge is under way, else until the next row is due (at most `idle`).
   */
  async purgeDue(now: number, idle: number): Promise<number> {
    const retention = this.retentionSeconds;
    const due = [...this.hiddenRows.values()].filter((r) => r.since + retention <= now).slice(0, PURGES_PER_PASS);
    let busy = false;
    for (const r of due) if (!(await this.db.purgeHidden(r.what, r.key))) busy = true;
    if (due.length > 0) this.syncHidden(await this.db.hidden());
    if (busy || due.length === PURGES_PER_PASS) return 1;
    let next = idle;
    for (const r of this.hiddenRows.values()) next = Math.min(next, Math.max(1, r.since + retention - now));
    return next;
  }

  /** What banpubkey or banevent would take away now. */
  private async preview(what: HiddenWhat, key: string): Promise<BanPreview> {
    const retention = this.config.admin.ban_retention;
    const retention_seconds = this.retentionSeconds;
    const action = what === "pubkey" && !this.config.admin.ban_deletes_events ? "keep" : retention_seconds === 0 ? "delete" : "hide";
    const now = nowSeconds();
    const events =
      what === "event"
        ? (await this.store.has(key))
          ? 1
          : 0
        : (await this.store.count({ filters: [{ authors: [key] }], maxSeq: this.store.lastSeq(), now })).count;
    return { events, action, retention, retention_seconds };
  }

  /**
   * Name, description and icon changed by an admin win over the config file; called again after
   * a config reload (which writes the file's values back).
   */
  overlayInfo(): void {
    for (const [key, e] of this.list("info"))
      if (key === "name" || key === "description" || key === "icon") this.config.info[key] = e.value;
  }

  private syncKinds(): void {
    this.allowedKinds.clear();
    this.disallowedKinds.clear();
    for (const k of this.list("allowed_kinds").keys()) this.allowedKinds.add(Number(k));
    for (const k of this.list("disallowed_kinds").keys()) this.disallowedKinds.add(Number(k));
  }

  private async put(list: List, key: string, value: string): Promise<void> {
    const e = { list, key, value, at: nowSeconds() };
    await this.db.put(e);
    this.list(list).set(key, e);
  }

  private async remove(list: List, key: string): Promise<void> {
    await this.db.remove(list, key);
    this.list(list).delete(key);
  }

  /**
   * Runs one call; the NIP-86 result. Throws AdminError for a call that cannot be done. The group
   * methods act on the group state (http/admin-groups.ts), listed only while [groups] enabled.
   */
  async apply(call: Exclude<AdminCall, GroupCall | AccessCall>): Promise<unknown> {
    switch (call.method) {
      case "supportedmethods": {
        const off: readonly string[] = [...(this.config.groups.enabled ? [] : GROUP_METHODS), ...accessMethodsOff(this.config)];
        return ADMIN_METHODS.filter((m) => m !== "supportedmethods" && !off.includes(m));
      }
      case "banpubkey":
        await this.put("banned_pubkeys", call.pubkey, call.reason);
        if (this.config.admin.ban_deletes_events) await this.takeAway("pubkey", call.pubkey);
        return true;
      case "unbanpubkey":
        await this.remove("banned_pubkeys", call.pubkey);
        await this.giveBack("pubkey", call.pubkey);
        return true;
      case "allowpubkey":
        await this.put("allowed_pubkeys", call.pubkey, call.reason);
        return true;
      case "unallowpubkey":
        await this.remove("allowed_pubkeys", call.pubkey);
        return true;
      case "listbannedpubkeys":
        // purge_at (bunstr's): when its hidden events are deleted, while they are hidden.
        return this.entries("banned_pubkeys").map((e) => withPurgeAt({ pubkey: e.key, reason: e.value }, this.purgeAt("pubkey", e.key)));
      case "listallowedpubkeys":
        return this.entries("allowed_pubkeys").map((e) => ({ pubkey: e.key, reason: e.value }));
      case "banevent":
        await this.remove("allowed_events", call.id);
        await this.put("banned_events", call.id, call.reason);
        await this.takeAway("event", call.id);
        return true;
      case "allowevent":
        // Takes the event off the moderation list; a banned event may be published again, and
        // one still hidden is served again.
        await this.remove("banned_events", call.id);
        await this.put("allowed_events", call.id, call.reason);
        await this.giveBack("event", call.id);
        return true;
      case "listbannedevents":
        return this.entries("banned_events").map((e) => withPurgeAt({ id: e.key, reason: e.value }, this.purgeAt("event", e.key)));
      case "previewbanpubkey":
        return this.preview("pubkey", call.pubkey);
      case "previewbanevent":
        return this.preview("event", call.id);
      case "listeventsneedingmoderation":
        return this.needingModeration();
      case "changerelayname":
        return this.changeInfo("name", call.value);
      case "changerelaydescription":
        return this.changeInfo("description", call.value);
      case "changerelayicon":
        return this.changeInfo("icon", call.value);
      case "allowkind":
        await this.remove("disallowed_kinds", String(call.kind));
        await this.put("allowed_kinds", String(call.kind), "");
        this.syncKinds();
        return true;
      case "disallowkind":
        await this.remove("allowed_kinds", String(call.kind));
        await this.put("disallowed_kinds", String(call.kind), "");
        this.syncKinds();
        return true;
      case "resetkind":
        // Neither allowed nor disallowed by an admin: once no kind is allowed, the relay is no
        // longer allow-only for kinds ([authorization] lists of the config still apply).
        await this.remove("allowed_kinds", String(call.kind));
        await this.remove("disallowed_kinds", String(call.kind));
        this.syncKinds();
        return true;
      case "listallowedkinds":
        return [...new Set([...this.config.authorization.kind_allowlist, ...this.allowedKinds])]
          .filter((k) => !this.disallowedKinds.has(k))
          .sort((a, b) => a - b);
      case "listdisallowedkinds":
        return [...new Set([...this.config.authorization.kind_denylist, ...this.disallowedKinds])].sort((a, b) => a - b);
      case "blockip":
        await this.put("blocked_ips", call.ip, call.reason);
        this.effects.disconnectIp(call.ip);
        return true;
      case "unblockip":
        await this.remove("blocked_ips", call.ip);
        return true;
      case "listblockedips":
        return this.entries("blocked_ips").map((e) => ({ ip: e.key, reason: e.value }));
      case "createrole":
      case "editrole": {
        const exists = this.list("roles").has(call.role.id);
        if (call.method === "createrole" && exists) throw new AdminError(`role ${call.role.id} exists`);
        if (call.method === "editrole" && !exists) throw new AdminError(`no role ${call.role.id}`);
        await this.put("roles", call.role.id, JSON.stringify(call.role));
        return true;
      }
      case "deleterole":
        if (!this.list("roles").has(call.id)) throw new AdminError(`no role ${call.id}`);
        for (const key of [...this.list("role_members").keys()]) if (key.startsWith(`${call.id}\n`)) await this.remove("role_members", key);
        await this.remove("roles", call.id);
        return true;
      case "assignrole":
        if (!this.list("roles").has(call.role)) throw new AdminError(`no role ${call.role}`);
        await this.put("role_members", `${call.role}\n${call.pubkey}`, "");
        return true;
      case "unassignrole":
        await this.remove("role_members", `${call.role}\n${call.pubkey}`);
        return true;
    }
  }

  private entries(list: List): AdminEntry[] {
    return [...this.list(list).values()];
  }

  private async changeInfo(key: "name" | "description" | "icon", value: string): Promise<true> {
    await this.put("info", key, value);
    this.config.info[key] = value;
    return true;
  }

  /**
   * Events reported by users (NIP-56 kind 1984 "e" tags), still stored, that no admin has
   * allowed or banned yet; the reason gathers the report types and how many reported it.
   */
  private async needingModeration(): Promise<{ id: string; reason: string }[]> {
    const reports = this.store.query({
      filters: [{ kinds: [REPORT_KIND] }],
      limits: [REPORTS_SCANNED],
      maxSeq: this.store.lastSeq(),
      now: nowSeconds(),
    });
    const found = new Map<string, Map<string, number>>();
    for await (const batch of reports)
      for (const json of batch) {
        const report = JSON.parse(json) as { tags: string[][] };
        for (const t of report.tags) {
          const id = t[1];
          if (t[0] !== "e" || id === undefined || !/^[0-9a-f]{64}$/.test(id)) continue;
          if (this.bannedEvents.has(id) || this.list("allowed_events").has(id)) continue;
          const types = found.get(id) ?? new Map<string, number>();
          const type = t[2] || "other";
          types.set(type, (types.get(type) ?? 0) + 1);
          found.set(id, types);
        }
      }
    const out: { id: string; reason: string }[] = [];
    for (const [id, types] of found) {
      if (!(await this.store.has(id))) continue;
      out.push({ id, reason: `reported: ${[...types].map(([t, n]) => (n > 1 ? `${t} x${n}` : t)).join(", ")}` });
    }
    return out;
  }
}

/** A list entry with `purge_at` while what its ban took away is hidden. */
const withPurgeAt = <T extends object>(entry: T, at: number | undefined): T & { purge_at?: number } =>
  at === undefined ? entry : { ...entry, purge_at: at };
