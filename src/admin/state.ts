// NIP-86 admin state: bans, allow lists, kinds, blocked IPs, relay info and roles, held in
// memory for the policies (policy/rules.ts reads it as an AdminView) and written through to the
// store, where it survives restarts. Every change takes effect at once.
import type { Config } from "../config/schema.ts";
import { accessMethodsOff, ADMIN_METHODS, GROUP_METHODS, type AccessCall, type AdminCall, type GroupCall } from "../nips/nip86.ts";
import type { AdminView } from "../policy/rules.ts";
import { nowSeconds } from "../protocol/event.ts";
import type { AdminEntry, AdminStore, Store } from "../store/types.ts";

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
    const entries = await this.db.entries();
    for (const l of this.lists.values()) l.clear();
    for (const e of entries) this.lists.get(e.list as List)?.set(e.key, e);
    this.syncKinds();
    this.overlayInfo();
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
        if (this.config.admin.ban_deletes_events) await this.db.deleteAuthor(call.pubkey);
        return true;
      case "unbanpubkey":
        await this.remove("banned_pubkeys", call.pubkey);
        return true;
      case "allowpubkey":
        await this.put("allowed_pubkeys", call.pubkey, call.reason);
        return true;
      case "unallowpubkey":
        await this.remove("allowed_pubkeys", call.pubkey);
        return true;
      case "listbannedpubkeys":
        return this.entries("banned_pubkeys").map((e) => ({ pubkey: e.key, reason: e.value }));
      case "listallowedpubkeys":
        return this.entries("allowed_pubkeys").map((e) => ({ pubkey: e.key, reason: e.value }));
      case "banevent":
        await this.remove("allowed_events", call.id);
        await this.put("banned_events", call.id, call.reason);
        await this.db.deleteEvent(call.id);
        return true;
      case "allowevent":
        // Takes the event off the moderation list; a banned event may be published again.
        await this.remove("banned_events", call.id);
        await this.put("allowed_events", call.id, call.reason);
        return true;
      case "listbannedevents":
        return this.entries("banned_events").map((e) => ({ id: e.key, reason: e.value }));
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
