// Issue 33: who is admitted to write (and, with [authorization] read = "members", to read), and on
// which bases, answered synchronously from memory for the admission policy and the read rule
// (policy/admission.ts AdmissionView). Stored bases (paid, verified, member) are rows of
// Store.admission, mirrored here as one bit set per pubkey; trusted is a lookup in the web of
// trust's graph; manual is the allow lists, [admin] pubkeys and the relay's key. The engines
// (payments, NIP-05 checks, web of trust, NIP-43 members) write through admit/revoke and hear
// the commit feed through onCommitted; none exists yet while its model is off.
import { setOf, type Config } from "../config/schema.ts";
import { BASES, BASIS_BIT, enabledMask, type AdmissionView, type Basis, type Nip05State } from "../policy/admission.ts";
import type { AdminView } from "../policy/rules.ts";
import { log, LogLimiter } from "../log.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { AdmissionRow, AdmissionStore } from "../store/types.ts";
import { AccessMetrics } from "./metrics.ts";
import type { Payments } from "./payments.ts";

/**
 * Paid admission (access/payments.ts), as the registry, the admin API and http/join.ts see
 * it: ready, balance (sats left, less what is reserved; undefined when it has no balance kept),
 * the join endpoints' calls, and stop (at shutdown: the poller, then the balances written).
 */
export type PaymentsEngine = Pick<Payments, "ready" | "balance" | "invoiceFor" | "status" | "statusWait" | "webhook" | "stop">;

/** NIP-05 checks (access/nip05.ts). */
export interface Nip05Engine {
  readonly ready: boolean;
  /** What is known of the pubkey's address, for the refusal text and the console. */
  state(pubkey: string): Nip05State | undefined;
}

/** The web of trust (access/wot.ts): its graph, rebuilt, never stored. */
export interface TrustEngine {
  /** The first graph is built. */
  readonly ready: boolean;
  /** Pubkeys in the graph. */
  readonly size: number;
  has(pubkey: string): boolean;
  /** Seeds -> … -> pubkey, and its depth; undefined when not in the graph. */
  path(pubkey: string): { path: string[]; depth: number } | undefined;
  /** Pubkeys of the graph in its order, a page (listadmissions basis trusted). */
  pubkeys(offset: number, limit: number): string[];
}

/** NIP-43 members (access/members.ts and relay/membership.ts): the NIP-86 member methods. */
export interface MembersEngine {
  readonly ready: boolean;
  /** NIP-86 addmember: admitted as a member by an admin; the relay publishes 8000 and 13534. */
  add(pubkey: string, reason: string): Promise<void>;
  /** NIP-86 removemember: 8001 and 13534. */
  remove(pubkey: string, reason: string): Promise<void>;
  /** NIP-86 createinvitecode: a code issued by the relay's admin. */
  createInvite(issuer: string): Promise<{ code: string; expires_at: number }>;
}

/** The engines, set at start for the models that are on (relay/wiring.ts); each absent until built. */
export interface Engines {
  payments?: PaymentsEngine;
  nip05?: Nip05Engine;
  wot?: TrustEngine;
  members?: MembersEngine;
}

/** A change of a pubkey's stored admission (the console, the member list, gauges). */
export type ChangeListener = (pubkey: string, basis: Basis, admitted: boolean) => void;

/** Stored bases: the only ones admit and revoke take. */
const STORED: ReadonlySet<Basis> = new Set(["paid", "verified", "member"]);

interface RegistryOptions {
  store: AdmissionStore;
  /** The live config (a reload changes it in place). */
  config: () => Config;
  /** The NIP-86 admin state (its allow list is manual). */
  admin?: AdminView;
  /** The relay's own pubkey (manual). */
  relayPubkey?: string;
  now?: () => number;
}

export class AdmissionRegistry implements AdmissionView {
  /** Bits of the stored bases per pubkey (BASIS_BIT). */
  private rows = new Map<string, number>();
  /** The stored rows that end (until), per pubkey: [bit, until]. */
  private timed = new Map<string, [number, number][]>();
  private loaded = false;
  /** Writes since start: a load that raced one reads again. */
  private writes = 0;
  private readonly changeListeners: ChangeListener[] = [];
  private readonly byKind = new Map<number, ((e: NostrEvent) => void)[]>();
  readonly engines: Engines = {};
  /** The admission counters for /metrics; the engines increment theirs. */
  readonly metrics = new AccessMetrics();
  /** Revoke lines, which the public can trigger (a NIP-05 domain's answers, joins and leaves). */
  private readonly lines = new LogLimiter();

  constructor(private readonly opts: RegistryOptions) {}

  private get config(): Config {
    return this.opts.config();
  }

  private now(): number {
    return this.opts.now?.() ?? Math.floor(Date.now() / 1000);
  }

  get ready(): boolean {
    const e = this.engines;
    return this.loaded && (e.payments?.ready ?? true) && (e.nip05?.ready ?? true) && (e.members?.ready ?? true);
  }

  get trustLoading(): boolean {
    return this.config.web_of_trust.enabled && !this.engines.wot?.ready;
  }

  /** Config allow list, admin allow list, [admin] pubkeys, the relay's key. */
  isManual(pubkey: string): boolean {
    const c = this.config;
    return (
      setOf(c.authorization.pubkey_allowlist).has(pubkey) ||
      (this.opts.admin?.allowedPubkeys.has(pubkey) ?? false) ||
      setOf(c.admin.pubkeys).has(pubkey) ||
      pubkey === this.opts.relayPubkey
    );
  }

  /** A ban (NIP-86 banpubkey, [authorization] pubkey_denylist): it wins over every basis. */
  banned(pubkey: string): boolean {
    return (this.opts.admin?.bannedPubkeys.has(pubkey) ?? false) || setOf(this.config.authorization.pubkey_denylist).has(pubkey);
  }

  /**
   * Every basis admitting `pubkey` now, disabled models masked out (manual never is: read =
   * "members" asks it with no model on); 0 for a banned pubkey, so it neither reads with read =
   * "members", nor issues invite codes, nor is an inbox (issue 33 review, H1).
   */
  bits(pubkey: string): number {
    return this.banned(pubkey) ? 0 : this.held(pubkey);
  }

  /** The bases `pubkey` holds, bans aside: NIP-43 membership (an admin still removes a banned member). */
  held(pubkey: string): number {
    let b = this.rows.get(pubkey) ?? 0;
    const timed = this.timed.get(pubkey);
    if (timed) {
      const now = this.now();
      for (const [bit, until] of timed) if (until <= now) b &= ~bit;
    }
    if (this.engines.wot?.has(pubkey)) b |= BASIS_BIT.trusted;
    if (this.isManual(pubkey)) b |= BASIS_BIT.manual;
    return b & (enabledMask(this.config) | BASIS_BIT.manual);
  }

  balance(pubkey: string): number | undefined {
    return this.engines.payments?.balance(pubkey);
  }

  nip05(pubkey: string): Nip05State | undefined {
    return this.engines.nip05?.state(pubkey);
  }

  refused(basis: Basis): void {
    if (basis !== "manual") this.metrics.refusals[basis]++;
  }

  /** Stores the admission, then shows it: the Map changes only after the store's write. */
  async admit(pubkey: string, basis: Basis, evidence: object, until?: number): Promise<void> {
    if (!STORED.has(basis)) throw new Error(`${basis} is not a stored basis`);
    this.writes++;
    await this.opts.store.put({ pubkey, basis, since: this.now(), until: until ?? null, evidence: JSON.stringify(evidence) });
    this.set(pubkey, BASIS_BIT[basis], until ?? null);
    for (const fn of this.changeListeners) fn(pubkey, basis, true);
  }

  /** Deletes the stored admission, then stops admitting by it. `reason` is for the log. */
  async revoke(pubkey: string, basis: Basis, reason: string): Promise<void> {
    if (!STORED.has(basis)) throw new Error(`${basis} is not a stored basis`);
    this.writes++;
    await this.opts.store.remove(pubkey, basis);
    this.unset(pubkey, BASIS_BIT[basis]);
    if (reason) this.logRevoke(pubkey, basis, reason);
    for (const fn of this.changeListeners) fn(pubkey, basis, false);
  }

  /** One line a minute per basis: a domain that verifies throwaway keys, then denies them, must not flood the log (issue 33 review, L10). */
  private logRevoke(pubkey: string, basis: Basis, reason: string): void {
    const held = this.lines.take(basis);
    if (!held) return;
    const more = held.count > 0 ? ` (${held.count} more ${basis} revokes not logged in the last minute)` : "";
    log.info(`admission: ${pubkey} no longer ${basis} (${reason})${more}`);
  }

  /** Told after each admit and revoke (not after a reload). */
  onChange(fn: ChangeListener): void {
    this.changeListeners.push(fn);
  }

  /** An engine's hook on the commit feed, for events of these kinds (NIP-05: kind 0; web of trust: kind 3). */
  onCommitted(kinds: readonly number[], fn: (e: NostrEvent) => void): void {
    for (const k of kinds) {
      let list = this.byKind.get(k);
      if (!list) this.byKind.set(k, (list = []));
      list.push(fn);
    }
  }

  /** The commit feed (relay/wiring.ts): each committed event, to the engines that asked for its kind. */
  committed(e: NostrEvent): void {
    const fns = this.byKind.get(e.kind);
    if (!fns) return;
    for (const fn of fns)
      try {
        fn(e);
      } catch (err) {
        log.error("admission engine failed on a committed event:", err);
      }
  }

  /** (Re)reads the stored rows and swaps them in at once (at start; Postgres: after another node's change). */
  async load(): Promise<void> {
    for (;;) {
      const writes = this.writes;
      const rows = await this.opts.store.rows();
      if (writes !== this.writes) continue; // an admit or revoke went on meanwhile: read again
      const next = new Map<string, number>();
      const timed = new Map<string, [number, number][]>();
      for (const r of rows) {
        const bit = BASIS_BIT[r.basis as Basis];
        if (bit === undefined) continue;
        next.set(r.pubkey, (next.get(r.pubkey) ?? 0) | bit);
        if (r.until !== null) timed.set(r.pubkey, [...(timed.get(r.pubkey) ?? []), [bit, r.until]]);
      }
      this.rows = next;
      this.timed = timed;
      this.loaded = true;
      return;
    }
  }

  /**
   * Reads again the stored rows of `pubkeys` only (Postgres: what the admission change log names,
   * issue 33 review, M7), or all of them when undefined; swapped in at once, per pubkey.
   */
  async reload(pubkeys: readonly string[] | undefined): Promise<void> {
    if (pubkeys === undefined) return this.load();
    if (pubkeys.length === 0 || !this.loaded) return;
    for (;;) {
      const writes = this.writes;
      const rows = await this.opts.store.rowsOf(pubkeys);
      if (writes !== this.writes) continue; // an admit or revoke went on meanwhile: read again
      for (const pk of pubkeys) {
        this.rows.delete(pk);
        this.timed.delete(pk);
      }
      for (const r of rows) {
        const bit = BASIS_BIT[r.basis as Basis];
        if (bit !== undefined) this.set(r.pubkey, bit, r.until);
      }
      return;
    }
  }

  /** The stored rows (evidence included), read from the store: for the console and listadmissions. */
  stored(): Promise<AdmissionRow[]> {
    return this.opts.store.rows();
  }

  /** Admitted pubkeys per basis, enabled or not (gauges); trusted: the graph's size; manual: the lists'. */
  counts(): Record<Basis, number> {
    const out: Record<Basis, number> = { paid: 0, verified: 0, trusted: 0, member: 0, manual: 0 };
    for (const bits of this.rows.values()) for (const b of BASES) if (bits & BASIS_BIT[b]) out[b]++;
    out.trusted = this.engines.wot?.size ?? 0;
    const c = this.config;
    const manual = new Set([...c.authorization.pubkey_allowlist, ...c.admin.pubkeys, ...(this.opts.admin?.allowedPubkeys.keys() ?? [])]);
    if (this.opts.relayPubkey) manual.add(this.opts.relayPubkey);
    out.manual = manual.size;
    return out;
  }

  private set(pubkey: string, bit: number, until: number | null): void {
    this.rows.set(pubkey, (this.rows.get(pubkey) ?? 0) | bit);
    const rest = (this.timed.get(pubkey) ?? []).filter(([b]) => b !== bit);
    if (until !== null) rest.push([bit, until]);
    if (rest.length > 0) this.timed.set(pubkey, rest);
    else this.timed.delete(pubkey);
  }

  private unset(pubkey: string, bit: number): void {
    const left = (this.rows.get(pubkey) ?? 0) & ~bit;
    if (left === 0) this.rows.delete(pubkey);
    else this.rows.set(pubkey, left);
    const rest = (this.timed.get(pubkey) ?? []).filter(([b]) => b !== bit);
    if (rest.length > 0) this.timed.set(pubkey, rest);
    else this.timed.delete(pubkey);
  }
}
