// NIP-43, the relay's side ([membership] enabled; access/members.ts decides who is a member and
// keeps the codes). A join (28934) or leave (28936) is answered here, through admit's
// relayRequest hook at the ephemeral step: it is never fanned out or stored, and its OK carries
// the NIP's texts. An invite (28935) is made for whoever asks for that kind in a REQ (an
// authenticated member or admin, within the member's quota) and sent as one relay-signed event
// of that subscription only: the code is a bearer secret, so it is never stored or broadcast.
// Each change of membership is announced with a relay-signed 8000/8001 and the member list (13534,
// replaceable) written again; both carry the NIP-70 `-` tag and are signed with the relay key,
// NIP-11 `self`. They go straight to the writer queue, as relay/groups.ts does: no policy may
// refuse the relay's own event, and other keys' 13534/8000/8001/28935 are refused by the
// `relayKinds` policy. The 13534 is coalesced (one in flight, at most one waiting, rendered
// when its turn comes) and written again at start when the stored one differs (reconcile).
import { log } from "../log.ts";
import type { AccessMetrics } from "../access/metrics.ts";
import { Members, type Member } from "../access/members.ts";
import {
  ADD,
  claimOf,
  inviteTemplate,
  isFresh,
  JOIN,
  LEAVE,
  MEMBER_LIST,
  memberChangeTemplate,
  memberListTemplate,
  membersOf,
  REMOVE,
  type Nip43Template,
} from "../nips/nip43.ts";
import { isProtected } from "../nips/nip70.ts";
import { writeCost } from "../policy/write-cost.ts";
import { nowSeconds, serializeEvent, type NostrEvent } from "../protocol/event.ts";
import type { Reader } from "../policy/visibility.ts";
import { signEvent } from "../protocol/schnorr.ts";
import { randomCode } from "../http/admin-groups.ts";
import type { AdmissionRegistry, MembersEngine } from "../access/registry.ts";
import type { MembershipHooks, RelayContext } from "./context.ts";

/** The OK a join or leave is answered with (admit's fate `answered`). */
export interface RequestAnswer {
  accepted: boolean;
  message: string;
}

// The OK texts (NIP-43's examples, lower-cased as the relay's other messages are).
export const NOT_NOW = { join: "invalid: join requests must be created now", leave: "invalid: leave requests must be created now" };
export const NOT_PROTECTED = {
  join: 'invalid: join requests must carry the NIP-70 "-" tag',
  leave: 'invalid: leave requests must carry the NIP-70 "-" tag',
};
export const INVALID_CODE = "restricted: that is an invalid invite code.";
export const EXPIRED_CODE = "restricted: that invite code is expired.";
export const ALREADY_MEMBER = "duplicate: you are already a member of this relay.";
export const JOIN_BUSY = "rate-limited: your join request is being handled, try again";
export const LEFT = "info: you are no longer a member of this relay";
export const NOT_MEMBER = "duplicate: you are not a member of this relay";
export const welcome = (relayUrl: string): string => `info: welcome to ${relayUrl}`;
// CLOSED texts of a REQ for 28935.
export const INVITE_AUTH = "auth-required: invite codes are for members: authenticate first";
export const INVITE_MEMBERS = "restricted: invite codes are for members of this relay";
export const NO_INVITES_LEFT = "restricted: you have no invites left";

type Publication = { tail: Promise<void>; pending?: Promise<void> };

export class MembershipRelay implements MembersEngine, MembershipHooks {
  readonly members: Members;
  private readonly listPublication: Publication = { tail: Promise.resolve() };
  /** created_at of the last 13534 this process signed (the store may not have it yet). */
  private lastListAt = 0;
  private loaded = false;
  /** start(), begun by relay/admission.ts: Relay.ready waits for it. */
  started: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: RelayContext,
    private readonly registry: AdmissionRegistry,
  ) {
    // Membership is the stored row, bans aside (registry.held), so an admin still removes a banned
    // member and the 13534 drops it; a ban stops its codes here (inviteFor, join).
    const rows = { bits: (pk: string) => registry.held(pk), admit: registry.admit.bind(registry), revoke: registry.revoke.bind(registry) };
    this.members = new Members(rows, ctx.store.admission, () => ctx.config);
  }

  private get on(): boolean {
    return this.ctx.config.membership.enabled;
  }

  /** At start: the members read, then the 13534 written again if the stored one differs. */
  async start(): Promise<void> {
    await this.members.load();
    this.loaded = true;
    await this.reconcile();
  }

  /**
   * admit's relayRequest hook (write/ingest.ts): a join or leave, answered here, never fanned out
   * or stored; undefined for every other event, or while membership is off. The NIP-70 policy has
   * already made the sender authenticate as the author of a request that carries `-`.
   */
  relayRequest(e: NostrEvent, _authed: ReadonlySet<string>): Promise<RequestAnswer> | undefined {
    if (!this.on || (e.kind !== JOIN && e.kind !== LEAVE)) return undefined;
    return e.kind === JOIN ? this.join(e) : this.leave(e);
  }

  private async join(e: NostrEvent): Promise<RequestAnswer> {
    const now = nowSeconds();
    if (!isProtected(e)) return no(NOT_PROTECTED.join);
    if (!isFresh(e.created_at, now, this.ctx.config.membership.request_window_seconds)) return no(NOT_NOW.join);
    if (this.members.has(e.pubkey)) return yes(ALREADY_MEMBER);
    const code = claimOf(e);
    if (code === undefined) return this.invalid();
    const r = await this.members.join(e.pubkey, code, now);
    if (r.joined && this.registry.banned(r.issuer)) {
      // A banned pubkey's codes admit nobody (issue 33 review, H1): the code is spent, the join undone unannounced.
      await this.members.remove(e.pubkey, "");
      return this.invalid();
    }
    if (!r.joined) {
      if (r.why === "member") return yes(ALREADY_MEMBER);
      if (r.why === "busy") return no(JOIN_BUSY);
      if (r.why === "expired") {
        this.count("expired");
        return no(EXPIRED_CODE);
      }
      return this.invalid();
    }
    this.count("claimed");
    await this.changed(ADD, e.pubkey);
    return yes(welcome(this.ctx.config.info.relay_url || "this relay"));
  }

  private invalid(): RequestAnswer {
    this.count("invalid");
    return no(INVALID_CODE);
  }

  private async leave(e: NostrEvent): Promise<RequestAnswer> {
    if (!isProtected(e)) return no(NOT_PROTECTED.leave);
    if (!isFresh(e.created_at, nowSeconds(), this.ctx.config.membership.request_window_seconds)) return no(NOT_NOW.leave);
    if (!(await this.members.remove(e.pubkey, "left (NIP-43 28936)"))) return yes(NOT_MEMBER);
    await this.changed(REMOVE, e.pubkey);
    return yes(LEFT);
  }

  /**
   * A REQ asking for kind 28935 (relay/read/req.ts): the relay-signed invite to send on that
   * subscription, or the CLOSED text. The issuer is the reader's first authenticated admin, else
   * its first authenticated member; a banned pubkey is neither.
   */
  async inviteFor(reader: Reader): Promise<NostrEvent | string> {
    const { authed } = reader;
    if (authed.size === 0) return INVITE_AUTH;
    const admins = this.ctx.config.admin.pubkeys;
    const keys = [...authed].filter((pk) => !this.registry.banned(pk));
    const admin = keys.find((pk) => admins.includes(pk));
    const issuer = admin ?? keys.find((pk) => this.members.has(pk));
    if (issuer === undefined) return INVITE_MEMBERS;
    const now = nowSeconds();
    const r = await this.members.invite(issuer, admin !== undefined, now, randomCode);
    if (r === "none-left") return NO_INVITES_LEFT;
    if (r.fresh) this.count("issued");
    return signEvent({ ...inviteTemplate(r.row.code), created_at: now }, this.ctx.relayKey);
  }

  // ---- NIP-86 (http/admin-access.ts, through registry.engines.members) ----

  /** Members are read (start() done): until then writers hear "loading" (registry.ready). */
  get ready(): boolean {
    return this.loaded;
  }

  /** addmember: admitted and announced (8000, 13534); nothing when it was a member already. */
  async add(pubkey: string, reason: string): Promise<void> {
    if (!(await this.members.add(pubkey, this.ctx.relayKey.pubkey, nowSeconds(), reason))) return;
    await this.changed(ADD, pubkey);
  }

  /** removemember: revoked and announced (8001, 13534); nothing when it was not a member. */
  async remove(pubkey: string, reason: string): Promise<void> {
    if (!(await this.members.remove(pubkey, reason || "removed by an admin"))) return;
    await this.changed(REMOVE, pubkey);
  }

  /** listmembers: oldest first, with their evidence. */
  list(): Member[] {
    return this.members.list();
  }

  /** createinvitecode: the caller's open code, or a new one, issued as an admin (no quota). */
  async createInvite(issuer: string): Promise<{ code: string; expires_at: number }> {
    const r = await this.members.invite(issuer, true, nowSeconds(), randomCode);
    if (r === "none-left") throw new Error("unreachable: admins have no quota");
    if (r.fresh) this.count("issued");
    return { code: r.row.code, expires_at: r.row.expires_at };
  }

  // ---- the relay's events ----

  /** The 8000 or 8001 for `pubkey`, then the member list; resolves after both commit. */
  private async changed(kind: typeof ADD | typeof REMOVE, pubkey: string): Promise<void> {
    try {
      await this.write(memberChangeTemplate(kind, pubkey));
      await this.publishList();
    } catch (err) {
      // The membership changed; the list is mended at the next change or start.
      log.error(`membership: announcing kind ${kind} for ${pubkey} failed:`, err);
    }
  }

  /** Writes the 13534 again if the stored one does not list what the members render (start). */
  async reconcile(): Promise<boolean> {
    const stored = await this.storedList();
    const want = this.members.listed(this.ctx.config.membership.max_members_listed);
    if (stored && JSON.stringify(membersOf(stored)) === JSON.stringify(want)) return false;
    if (!stored && want.length === 0) return false;
    this.lastListAt = Math.max(this.lastListAt, stored?.created_at ?? 0);
    await this.publishList();
    return true;
  }

  /** The 13534 rendered when its turn comes: one in flight, at most one waiting, shared by the callers meanwhile. */
  publishList(): Promise<void> {
    const pub = this.listPublication;
    if (pub.pending) return pub.pending;
    const run: Promise<void> = pub.tail.then(async () => {
      if (pub.pending === run) pub.pending = undefined;
      // Postgres: other nodes admit, revoke and sign lists too; their rows are read before the list
      // is rendered, and their newest list, so this one comes after it (else it would be "older").
      if (!this.ctx.store.changes) {
        await this.members.load();
        this.lastListAt = Math.max(this.lastListAt, (await this.storedList())?.created_at ?? 0);
      }
      const created_at = Math.max(nowSeconds(), this.lastListAt + 1);
      this.lastListAt = created_at;
      await this.write(memberListTemplate(this.members.listed(this.ctx.config.membership.max_members_listed)), created_at);
    });
    pub.pending = run;
    pub.tail = run.catch((err) => log.error("membership: could not write the member list:", err));
    return run;
  }

  /** Signs and writes a relay event; resolves after its commit. */
  private async write(t: Nip43Template, created_at = nowSeconds()): Promise<void> {
    const e = signEvent({ ...t, created_at }, this.ctx.relayKey);
    const outcome = await this.ctx.writer.enqueue({ event: e, json: serializeEvent(e), cost: writeCost(e) });
    if (!outcome.stored && !outcome.duplicate)
      log.error(`membership: the relay's kind ${e.kind} was not stored: ${outcome.refusal.message}`);
  }

  /** The relay key's newest stored 13534. */
  private async storedList(): Promise<NostrEvent | undefined> {
    const job = {
      filters: [{ kinds: [MEMBER_LIST], authors: [this.ctx.relayKey.pubkey] }],
      limits: [1],
      maxSeq: this.ctx.store.lastSeq(),
      now: 0,
    };
    for await (const rows of this.ctx.store.query(job)) for (const json of rows) return JSON.parse(json) as NostrEvent;
    return undefined;
  }

  /** bunstr_member_invites_total{result}. */
  private count(result: keyof AccessMetrics["memberInvites"]): void {
    this.registry.metrics.memberInvites[result]++;
  }
}

const no = (message: string): RequestAnswer => ({ accepted: false, message });
const yes = (message: string): RequestAnswer => ({ accepted: true, message });
