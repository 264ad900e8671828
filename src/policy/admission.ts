// Who may write (issue 33): the admission models (paid, NIP-05 verified, web of trust, NIP-43
// members) and the manual basis (the allow lists, [admin] pubkeys, the relay key) in one policy,
// `admission`, which asks the registry (access/registry.ts) through AdmissionView: types only
// here, as policy/groups.ts is for the group state. A pubkey admitted by any enabled model may
// write; with none on, nothing here refuses (and policy/rules.ts pubkeyLists is as before).
// rules.ts imports this file, never the other way (a circle, even type-only, is refused by
// test/architecture.test.ts): the policies here take AdmissionContext, which PolicyContext satisfies.
import { admissionOn, joinPage } from "../config/admission.ts";
import { setOf, type Config } from "../config/schema.ts";
import { addressOfProfile, formatAddress, hostOf, type Nip05Address, parseAddress } from "../nips/nip05.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";

export type Basis = "paid" | "verified" | "trusted" | "member" | "manual";
export const BASES: readonly Basis[] = ["paid", "verified", "trusted", "member", "manual"];
export const BASIS_BIT: Record<Basis, number> = { paid: 1, verified: 2, trusted: 4, member: 8, manual: 16 };

export interface Nip05State {
  address: string;
  state: "pending" | "verified" | "failed" | "refused";
  error?: string;
}

export interface AdmissionView {
  /** False until every enabled engine but the web of trust has loaded (registry rows read). */
  readonly ready: boolean;
  /** The web of trust is on and its first graph is not built yet ("error: the web of trust is loading"). */
  readonly trustLoading: boolean;
  /** Bit set of the bases admitting `pubkey` now (BASIS_BIT), disabled models masked out; 0 = none. Maps only, sync. */
  bits(pubkey: string): number;
  /** Sats left, for a pubkey admitted only by payment while cost_per_event > 0; else undefined. */
  balance(pubkey: string): number | undefined;
  /** The NIP-05 engine's view, for the refusal text; undefined when it knows nothing. */
  nip05(pubkey: string): Nip05State | undefined;
  /** Counts a refusal by the model whose text was sent (bunstr_admission_refusals_total). */
  refused?(basis: Basis): void;
}

/** What the admission policies read (PolicyContext satisfies it). */
export interface AdmissionContext {
  config: Config;
  /** The registry; absent outside a running relay (import, sync) or while no model is on. */
  access?: AdmissionView;
  /** This relay's own pubkey (its key signs 13534, 8000, 8001, 28935); absent: unknown, and nobody signs them. */
  relayPubkey?: string;
}

export { admissionOn };

/** The bases that admit under this config: the enabled models' and manual; 0 while no model is on. */
export function enabledMask(c: Config): number {
  if (!admissionOn(c)) return 0;
  let m = BASIS_BIT.manual;
  if (c.pay_to_relay.enabled) m |= BASIS_BIT.paid;
  if (c.verified_users.mode === "enabled") m |= BASIS_BIT.verified;
  if (c.web_of_trust.enabled) m |= BASIS_BIT.trusted;
  if (c.membership.enabled) m |= BASIS_BIT.member;
  return m;
}

/** Is `pubkey` admitted now by an enabled basis? */
export const isAdmitted = (c: Config, access: AdmissionView, pubkey: string): boolean => (access.bits(pubkey) & enabledMask(c)) !== 0;

/** Where a pubkey pays to join (http/join.ts): `<http base>/join?pubkey=<hex>`, relative without info.relay_url. */
export const joinUrl = (c: Config, pubkey: string): string => `${joinPage(c)}?pubkey=${pubkey}`;

/** NIP-43 kinds only the relay signs: member list, add, remove, invite. */
export const RELAY_SIGNED_KINDS: ReadonlySet<number> = new Set([13534, 8000, 8001, 28935]);
/** NIP-43 requests the relay answers itself (admit's relayRequest): join, leave. */
const MEMBER_REQUESTS: ReadonlySet<number> = new Set([28934, 28936]);

/** Exact texts (docs: the design's table; tests assert them). */
export const ADMISSION_TEXTS = {
  loading: "admission lists are loading, try again",
  paid: (join: string) => `this relay requires payment to publish: join at ${join}`,
  noSignUps: "this relay is not taking new sign-ups",
  balance: (b: number, c: number, join: string) => `your balance (${b} sats) does not cover this event (${c} sats): top up at ${join}`,
  member: "this relay is for its members: ask a member for an invite code (NIP-43)",
  nip05Unknown: "publish a kind 0 with a NIP-05 address this relay can verify first",
  nip05Pending: (addr: string) => `your NIP-05 address ${addr} is being checked, try again in a minute`,
  nip05Failed: (addr: string, error: string) => `your NIP-05 address ${addr} could not be verified (${error})`,
  nip05Blacklisted: (domain: string) => `NIP-05 addresses of ${domain} may not publish here`,
  nip05Whitelist: (domains: readonly string[]) =>
    `only NIP-05 addresses of ${domains.slice(0, 3).join(", ")}${domains.length > 3 ? ", …" : ""} may publish here`,
  trusted: (depth: number) => `only the owner's web of trust (follows, depth ${depth}) may publish here`,
  trustLoading: "the web of trust is loading, try again",
  /** Reads with [authorization] read = "members" (CLOSED, NEG-ERR). */
  readAuth: "this relay is for its members: authenticate first",
  readMembers: "this relay is for its members",
} as const;

/** NIP-43: kinds 13534, 8000, 8001 and 28935 are the relay's own; from any other key they are refused (every policy list, imports too). */
export const relayKinds = ({ config, relayPubkey }: AdmissionContext, e: NostrEvent): Refusal | undefined =>
  config.membership.enabled && RELAY_SIGNED_KINDS.has(e.kind) && e.pubkey !== relayPubkey
    ? refuse("blocked", `only this relay signs kind ${e.kind}`)
    : undefined;

/**
 * The profile that asks to be verified (#211): a kind 0 naming a NIP-05 address this relay would
 * check (it parses, the domain lists allow it), while checks admit (mode "enabled": passive ones
 * never admit, so such a profile is no way in). Any other kind 0 is judged as any event, so a
 * stranger cannot store a profile of any size with `"nip05": "x"` (issue 33 review, M1).
 */
function asksVerification(c: Config, address: Nip05Address | undefined): boolean {
  return address !== undefined && domainRefusal(c, hostOf(address.domain)) === undefined;
}

/** The NIP-05 address a kind 0 names while checks admit (mode "enabled"); parsed once per event, its content may be large. */
function namedAddress(c: Config, e: NostrEvent): Nip05Address | undefined {
  if (e.kind !== 0 || c.verified_users.mode !== "enabled") return undefined;
  const raw = addressOfProfile(e.content);
  return raw === undefined ? undefined : parseAddress(raw);
}

/** Most p tags a DM or gift wrap passing as inbox mail may carry (NIP-17/59 wraps name one recipient, NIP-04 DMs one). */
const INBOX_MAX_P_TAGS = 2;

/**
 * A DM or gift wrap (restricted_read_kinds) to an admitted pubkey from anyone: the relay is its
 * members' inbox. Not when it p-tags its own author (mail to oneself is storage), nor with more
 * than INBOX_MAX_P_TAGS p tags; the relay's key and [admin] pubkeys are no inbox (they are public,
 * NIP-11 `self` and `pubkey`, so anyone could address them). issue 33 review, H2.
 */
function toMember(ctx: AdmissionContext, access: AdmissionView, e: NostrEvent): boolean {
  const c = ctx.config;
  if (!c.authorization.accept_dms_to_members || !setOf(c.authorization.restricted_read_kinds).has(e.kind)) return false;
  const recipients: string[] = [];
  for (const t of e.tags) if (t[0] === "p" && t[1] !== undefined) recipients.push(t[1]);
  if (recipients.length > INBOX_MAX_P_TAGS || recipients.includes(e.pubkey)) return false;
  const admins = setOf(c.admin.pubkeys);
  return recipients.some((pk) => pk !== ctx.relayPubkey && !admins.has(pk) && isAdmitted(c, access, pk));
}

/**
 * Issue 33: only admitted pubkeys write while a model is on (docs/architecture.md, Admission).
 * After the lists (a banned pubkey hears "banned"), before the groups.
 */
export function admission(ctx: AdmissionContext, e: NostrEvent): Refusal | undefined {
  const { config: c, access } = ctx;
  const mask = enabledMask(c);
  if (mask === 0 || !access) return undefined;
  if (c.membership.enabled && MEMBER_REQUESTS.has(e.kind)) return undefined; // judged by the relay (relay/membership.ts)
  const named = namedAddress(c, e);
  if (asksVerification(c, named)) return undefined; // checked in the background
  if (toMember(ctx, access, e)) return undefined;
  if (!access.ready) return refuse("error", ADMISSION_TEXTS.loading);
  const bits = access.bits(e.pubkey) & mask;
  if (bits !== 0) {
    const cost = c.pay_to_relay.cost_per_event;
    if (bits !== BASIS_BIT.paid || cost <= 0) return undefined;
    const balance = access.balance(e.pubkey);
    if (balance === undefined || balance >= cost) return undefined;
    access.refused?.("paid");
    return refuse("blocked", ADMISSION_TEXTS.balance(balance, cost, joinUrl(c, e.pubkey)));
  }
  return modelRefusal(ctx, access, e, named);
}

/** The first enabled model's refusal (paid, member, verified, trusted); with pay on the join URL is added to the others. */
function modelRefusal({ config: c }: AdmissionContext, access: AdmissionView, e: NostrEvent, named: Nip05Address | undefined): Refusal {
  const pubkey = e.pubkey;
  const pay = c.pay_to_relay;
  const others = c.membership.enabled || c.verified_users.mode === "enabled" || c.web_of_trust.enabled;
  if (pay.enabled && (pay.sign_ups || !others)) {
    access.refused?.("paid");
    return pay.sign_ups ? refuse("restricted", ADMISSION_TEXTS.paid(joinUrl(c, pubkey))) : refuse("restricted", ADMISSION_TEXTS.noSignUps);
  }
  const r = otherModel(c, access, e, named);
  return pay.enabled && pay.sign_ups ? { ...r, message: `${r.message}: join at ${joinUrl(c, pubkey)}` } : r;
}

function otherModel(c: Config, access: AdmissionView, e: NostrEvent, named: Nip05Address | undefined): Refusal {
  const pubkey = e.pubkey;
  if (c.membership.enabled) {
    access.refused?.("member");
    return refuse("restricted", ADMISSION_TEXTS.member);
  }
  if (c.verified_users.mode === "enabled") {
    access.refused?.("verified");
    // A kind 0 naming an address the domain lists refuse hears the list's text (else it had passed).
    return nip05Refusal(c, named ? { address: formatAddress(named), state: "pending" } : access.nip05(pubkey));
  }
  access.refused?.("trusted");
  if (access.trustLoading) return refuse("error", ADMISSION_TEXTS.trustLoading);
  return refuse("restricted", ADMISSION_TEXTS.trusted(c.web_of_trust.depth));
}

function nip05Refusal(c: Config, s: Nip05State | undefined): Refusal {
  if (!s) return refuse("restricted", ADMISSION_TEXTS.nip05Unknown);
  // The host without a port: the lists hold hosts (config HOST), an address may name a port.
  const listed = domainRefusal(c, hostOf(s.address.slice(s.address.lastIndexOf("@") + 1).toLowerCase()));
  if (listed) return listed;
  if (s.state === "failed" || s.state === "refused")
    return refuse("restricted", ADMISSION_TEXTS.nip05Failed(s.address, s.error ?? "failed"));
  return refuse("restricted", ADMISSION_TEXTS.nip05Pending(s.address));
}

/** The [verified_users] domain lists' refusal of a host (lowercase, without a port), or undefined when they allow it. */
function domainRefusal(c: Config, domain: string): Refusal | undefined {
  const { domain_blacklist: black, domain_whitelist: white } = c.verified_users;
  if (black.some((d) => d.toLowerCase() === domain)) return refuse("blocked", ADMISSION_TEXTS.nip05Blacklisted(domain));
  if (white.length > 0 && !white.some((d) => d.toLowerCase() === domain))
    return refuse("restricted", ADMISSION_TEXTS.nip05Whitelist(white));
  return undefined;
}
