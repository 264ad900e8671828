// NIP-43 members: who is a member (the registry's `member` basis: joined with an invite code, or
// added by an admin), the order they came in (the 13534 lists the oldest first), and the invite
// codes members and admins hand out. Rows are the registry's (store `admissions`) and the store's
// `invites`; this file decides, relay/membership.ts signs and answers. A code is taken once,
// atomically in the store (`takeInvite`), so two joins racing for one code admit one pubkey, on
// one node or several.
import type { Config } from "../config/schema.ts";
import { BASIS_BIT } from "../policy/admission.ts";
import type { AdmissionStore, IssuedInvite } from "../store/types.ts";

/** What a member row's evidence says (console, listmembers). */
export interface MemberEvidence {
  invited_by: string;
  /** The first 4 characters of the code used: enough to tell codes apart, not to reuse one. */
  code_prefix: string;
  via: "invite" | "admin";
  /** An admin's reason (addmember). */
  reason?: string;
}

export interface Member {
  pubkey: string;
  since: number;
  evidence: Partial<MemberEvidence>;
}

/** The registry as members use it (access/registry.ts AdmissionRegistry). */
export interface MemberRegistry {
  bits(pubkey: string): number;
  admit(pubkey: string, basis: "member", evidence: object, until?: number): Promise<void>;
  revoke(pubkey: string, basis: "member", reason: string): Promise<void>;
}

export type MemberStore = Pick<AdmissionStore, "rows" | "takeInvite" | "issueInvite">;

/** A join's result: admitted (by whom's code), or why not ("void": its issuer is no longer a member or an admin). */
export type JoinResult =
  | { joined: true; issuer: string }
  | { joined: false; why: "member" | "unknown" | "used" | "expired" | "void" | "busy" };

/** An invite for `issuer`: a code (reused while unused and unexpired), or none left under the quota. */
export type InviteResult = IssuedInvite;

export class Members {
  /** Each member's since and evidence, for the list's order and listmembers (membership itself is the registry's bit). */
  private readonly byPubkey = new Map<string, Member>();
  /** Pubkeys with a join in flight: one at a time each. */
  private readonly joining = new Set<string>();
  /** Issuers with an invite being made: one store call at a time each (the store enforces the quota, across nodes too). */
  private readonly inviting = new Map<string, Promise<InviteResult>>();

  constructor(
    private readonly registry: MemberRegistry,
    private readonly store: MemberStore,
    private readonly config: () => Config,
  ) {}

  /** The member rows: at start, and on Postgres before each member list (other nodes change them too). */
  async load(): Promise<void> {
    const rows = (await this.store.rows()).filter((r) => r.basis === "member");
    this.byPubkey.clear();
    for (const r of rows) this.byPubkey.set(r.pubkey, { pubkey: r.pubkey, since: r.since, evidence: parseEvidence(r.evidence) });
  }

  /** The registry's answer, which on Postgres follows other nodes' joins and removals too (it reloads). */
  has(pubkey: string): boolean {
    return (this.registry.bits(pubkey) & BASIS_BIT.member) !== 0;
  }

  /** Oldest first, then by pubkey (a restart reads them in the same order). */
  list(): Member[] {
    return [...this.byPubkey.values()].sort((a, b) => a.since - b.since || (a.pubkey < b.pubkey ? -1 : 1));
  }

  /** The first `max` members, oldest first: what the 13534 lists. */
  listed(max: number): string[] {
    return this.list()
      .slice(0, max)
      .map((m) => m.pubkey);
  }

  /** A join with `code` (checked fresh and well-formed by the caller): the code taken, then the member admitted. */
  async join(pubkey: string, code: string, now: number): Promise<JoinResult> {
    if (this.has(pubkey)) return { joined: false, why: "member" };
    if (this.joining.has(pubkey)) return { joined: false, why: "busy" };
    this.joining.add(pubkey);
    try {
      const taken = await this.store.takeInvite(code, pubkey, now);
      if (typeof taken === "string") return { joined: false, why: taken };
      // A code is worth its issuer's standing now: one removed, departed or banned since (issue 33 review
      // M6) admits nobody (the code is spent: it was void anyway).
      if (!this.standing(taken.issuer)) return { joined: false, why: "void" };
      await this.admitted(pubkey, now, { invited_by: taken.issuer, code_prefix: code.slice(0, 4), via: "invite" });
      return { joined: true, issuer: taken.issuer };
    } finally {
      this.joining.delete(pubkey);
    }
  }

  /** A member, or one of [admin] pubkeys: whose codes admit. */
  private standing(issuer: string): boolean {
    return this.has(issuer) || this.config().admin.pubkeys.includes(issuer);
  }

  /** An admin adds `pubkey`; false when it was a member already. */
  async add(pubkey: string, by: string, now: number, reason = ""): Promise<boolean> {
    if (this.has(pubkey)) return false;
    await this.admitted(pubkey, now, { invited_by: by, code_prefix: "", via: "admin", ...(reason ? { reason } : {}) });
    return true;
  }

  /** `pubkey` leaves or is removed; false when it was not a member. */
  async remove(pubkey: string, reason: string): Promise<boolean> {
    if (!this.has(pubkey)) return false;
    await this.registry.revoke(pubkey, "member", reason);
    this.byPubkey.delete(pubkey);
    return true;
  }

  /**
   * An invite code for `issuer` (a member, or an admin when `admin`): an unused, unexpired code it
   * issued before, else a new one while its quota (`invites_per_member`: the codes it issued that
   * were used, and the open one) allows; admins have no quota. `newCode` makes a code nobody guesses.
   */
  invite(issuer: string, admin: boolean, now: number, newCode: () => string): Promise<InviteResult> {
    const running = this.inviting.get(issuer);
    if (running) return running;
    const p = this.makeInvite(issuer, admin, now, newCode).finally(() => this.inviting.delete(issuer));
    this.inviting.set(issuer, p);
    return p;
  }

  private makeInvite(issuer: string, admin: boolean, now: number, newCode: () => string): Promise<InviteResult> {
    const { invites_per_member: quota, invite_expiry_seconds: expiry } = this.config().membership;
    // Counted and written in one store transaction (issue 33 review, M6: two nodes asked at once must not
    // each mint one past the quota). A code that expired unused admitted nobody: it does not count.
    const row = { code: newCode(), issuer, created_at: now, expires_at: now + expiry, used_by: null, used_at: null };
    return this.store.issueInvite(row, admin ? null : quota, now);
  }

  private async admitted(pubkey: string, now: number, evidence: MemberEvidence): Promise<void> {
    await this.registry.admit(pubkey, "member", evidence);
    this.byPubkey.set(pubkey, { pubkey, since: now, evidence });
  }
}

function parseEvidence(json: string): Partial<MemberEvidence> {
  try {
    const v = JSON.parse(json) as unknown;
    return typeof v === "object" && v !== null ? (v as Partial<MemberEvidence>) : {};
  } catch {
    return {};
  }
}
