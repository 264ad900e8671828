// Write policies as plain functions: (context, event) => a refusal, or undefined to pass.
// They need no signature and no database, so they run before both: refusing costs little.
import { setOf, type Config } from "../config/schema.ts";
import { committedTarget, difficulty } from "../nips/nip13.ts";
import { isExpired } from "../nips/nip40.ts";
import { AUTH_KIND } from "../nips/nip42.ts";
import { namesRelay, VANISH_KIND } from "../nips/nip62.ts";
import { embedsProtected, isProtected } from "../nips/nip70.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";
import { admissionOn, type AdmissionView } from "./admission.ts";
import type { GroupView } from "./groups.ts";
import { chargedGroup, chargeRate, rateLimitMessage, type RateLimiter } from "./rate-limit.ts";
import { writeCost } from "./write-cost.ts";

export interface PolicyContext {
  config: Config;
  now: number;
  /** Pubkeys this connection has authenticated as (NIP-42). */
  authed: ReadonlySet<string>;
  /** This relay's URL as clients reach it (info.relay_url, else from the request). */
  relayUrl: string;
  /** The client's IP; absent for events that come by import, sync or stream (never rate-limited). */
  ip?: string;
  /** The address group of `ip` (policy/ip.ts), found once per connection. */
  group?: string;
  /** Whether `ip` is loopback or private (policy/ip.ts isPrivateAddress), found once per connection. */
  local?: boolean;
  /** The relay's rate limits ([rate_limits]); absent outside a running relay. */
  rates?: RateLimiter;
  /** NIP-86 admin state (bans, allow lists, kinds, blocked IPs); absent when there is none. */
  admin?: AdminView;
  /** The EVENT's write cost (policy/write-cost.ts), found once by admit/admit.ts; absent: found by eventRate. */
  cost?: number;
  /** NIP-29 group state (groups/state.ts); absent when groups are off or outside a running relay. */
  groups?: GroupView;
  /** Who is admitted and why (access/registry.ts); absent while no admission model is on or outside a running relay. */
  access?: AdmissionView;
  /** This relay's own pubkey (NIP-43: the only signer of 13534, 8000, 8001, 28935). */
  relayPubkey?: string;
}

/** What the policies read of the NIP-86 admin state (admin/state.ts): keys are hex or IPs. */
export interface AdminView {
  readonly bannedPubkeys: ReadonlyMap<string, unknown>;
  readonly allowedPubkeys: ReadonlyMap<string, unknown>;
  readonly bannedEvents: ReadonlyMap<string, unknown>;
  readonly blockedIps: ReadonlyMap<string, unknown>;
  readonly allowedKinds: ReadonlySet<number>;
  readonly disallowedKinds: ReadonlySet<number>;
}

export type Policy = (ctx: PolicyContext, e: NostrEvent) => Refusal | undefined;

/**
 * EVENT: the first policy, so a flood is charged before any other work is done for it. An event
 * is charged what it costs the writer (policy/write-cost.ts): an ordinary note one token, one of
 * 1,800 tags a hundred, so heavy events use up a burst that much faster.
 */
export const eventRate: Policy = (ctx, e) => {
  if (!ctx.rates) return undefined;
  const wait = chargeRate(ctx.config, ctx.rates, "events", ctx, ctx.cost ?? writeCost(e));
  return wait > 0 ? refuse("rate-limited", rateLimitMessage("events", wait)) : undefined;
};

// authToWrite, adminBans, kindLists and pubkeyLists judge the sender's standing: they apply to a
// request to vanish (kind 62) as to any event, so what is stored and served obeys them; but NIP-62
// has the deletion itself carried out "regardless of the user's status" (policy/defaults.ts,
// judgeEvent: the request is then honoured and not stored).
export const authToWrite: Policy = ({ config, authed }) =>
  config.options.auth !== "when-needed" && authed.size === 0
    ? refuse("auth-required", "this relay requires authentication to publish")
    : undefined;

/** NIP-42: kind 22242 proves identity to one relay; it travels in AUTH and is never published. */
export const noAuthEvents: Policy = (_ctx, e) =>
  e.kind === AUTH_KIND ? refuse("invalid", "kind 22242 is sent with AUTH, not EVENT") : undefined;

export const sizeLimits: Policy = ({ config: { limits } }, e) => {
  if (e.tags.length > limits.max_event_tags) return refuse("invalid", `too many tags (max ${limits.max_event_tags})`);
  if (e.content.length > limits.max_content_length) return refuse("invalid", `content longer than ${limits.max_content_length} characters`);
  return undefined;
};

export const createdAtWindow: Policy = ({ config: { limits }, now }, e) => {
  if (limits.created_at_upper_limit > 0 && e.created_at > now + limits.created_at_upper_limit)
    return refuse("invalid", `event creation date is more than ${limits.created_at_upper_limit} seconds in the future`);
  if (limits.created_at_lower_limit > 0 && e.created_at < now - limits.created_at_lower_limit)
    return refuse("invalid", `event creation date is more than ${limits.created_at_lower_limit} seconds in the past`);
  return undefined;
};

/** NIP-40: an event that has already expired is dropped. */
export const notExpired: Policy = ({ config, now }, e) =>
  config.nips.nip40 && isExpired(e, now) ? refuse("invalid", "this event has already expired") : undefined;

/** NIP-13: enough leading zero bits, and a committed target (if any) that is not lower. */
export const proofOfWork: Policy = ({ config }, e) => {
  const min = config.options.min_pow_difficulty;
  if (min <= 0) return undefined;
  const target = committedTarget(e);
  if (target !== undefined && target < min) return refuse("pow", `committed target ${target}<${min}`);
  const bits = difficulty(e.id);
  return bits < min ? refuse("pow", `difficulty ${bits}<${min}`) : undefined;
};

/** NIP-70: only the authenticated author may publish a protected event; reposts may not embed one. */
export const protectedEvents: Policy = ({ config, authed }, e) => {
  if (isProtected(e)) {
    if (!config.nips.nip70) return refuse("blocked", "protected events are not accepted here");
    if (authed.size === 0) return refuse("auth-required", "this event may only be published by its author");
    if (!authed.has(e.pubkey)) return refuse("restricted", "this event may only be published by its author");
  }
  if (embedsProtected(e)) return refuse("blocked", "reposts must not embed a protected event");
  return undefined;
};

/** NIP-62: a request to vanish must name this relay (or ALL_RELAYS). */
export const vanishForUs: Policy = ({ config, relayUrl }, e) =>
  e.kind === VANISH_KIND && config.nips.nip62 && !namesRelay(e, relayUrl)
    ? refuse("invalid", "this request to vanish does not name this relay")
    : undefined;

/** An address an admin blocked (NIP-86 blockip): its open connections were closed, this is for what was in flight. */
export const blockedIps: Policy = ({ admin, ip }, _e) =>
  ip !== undefined && admin?.blockedIps.has(ip) ? refuse("blocked", "your IP address is blocked on this relay") : undefined;

/** NIP-86 banpubkey and banevent. */
export const adminBans: Policy = ({ admin }, e) => {
  if (!admin) return undefined;
  if (admin.bannedPubkeys.has(e.pubkey)) return refuse("blocked", "this pubkey is banned from this relay");
  if (admin.bannedEvents.has(e.id)) return refuse("blocked", "this event is banned from this relay");
  return undefined;
};

/** Config kind lists and the admin's (NIP-86 allowkind/disallowkind): a denial wins; any allow list makes the relay allow-only. */
export const kindLists: Policy = ({ config, admin }, e) => {
  const a = config.authorization;
  if (setOf(a.kind_denylist).has(e.kind) || admin?.disallowedKinds.has(e.kind))
    return refuse("blocked", `kind ${e.kind} is not accepted here`);
  const allowOnly = a.kind_allowlist.length > 0 || (admin?.allowedKinds.size ?? 0) > 0;
  if (allowOnly && !setOf(a.kind_allowlist).has(e.kind) && !admin?.allowedKinds.has(e.kind))
    return refuse("blocked", `kind ${e.kind} is not accepted here`);
  return undefined;
};

/**
 * Config pubkey lists and the admin's allow list (NIP-86 allowpubkey): any allow list makes the
 * relay allow-only. While an admission model is on, the allow lists are the manual basis of the
 * registry instead (listed pubkeys write free; policy/admission.ts judges the others).
 */
export const pubkeyLists: Policy = ({ config, admin }, e) => {
  const a = config.authorization;
  if (setOf(a.pubkey_denylist).has(e.pubkey)) return refuse("blocked", "this pubkey may not publish here");
  if (admissionOn(config)) return undefined;
  const allowOnly = a.pubkey_allowlist.length > 0 || (admin?.allowedPubkeys.size ?? 0) > 0;
  if (allowOnly && !setOf(a.pubkey_allowlist).has(e.pubkey) && !admin?.allowedPubkeys.has(e.pubkey))
    return refuse("restricted", "this pubkey is not allowed to publish here");
  return undefined;
};

/** NIP-29: who may write what in a group (groups/state.ts judge: the judge order of docs/architecture.md, Groups). */
export const groupWrites: Policy = (ctx, e) => (ctx.groups && ctx.config.groups.enabled ? ctx.groups.judge(ctx, e) : undefined);

/**
 * NIP-29: group creations (9007) per client address ([groups] creates_per_address_per_hour).
 * Fresh keys are free: with max_groups_per_pubkey alone, one address filled max_groups with
 * private groups (no one else could create one, every reader's read had them to skip). After
 * groupWrites: only a create the group rule accepts is charged.
 */
export const groupCreateRate: Policy = (ctx, e) => {
  const perHour = ctx.config.groups.creates_per_address_per_hour;
  if (e.kind !== 9007 || !ctx.rates || !ctx.groups || !ctx.config.groups.enabled || perHour <= 0) return undefined;
  for (const pk of ctx.authed) if (ctx.config.admin.pubkeys.includes(pk)) return undefined;
  const group = chargedGroup(ctx.config, ctx);
  if (group === undefined) return undefined;
  const wait = ctx.rates.take([{ key: `group creates ip ${group}`, rate: { perMinute: perHour / 60, burst: perHour } }]);
  return wait > 0
    ? refuse("rate-limited", `too many groups created from this address, try again in ${Math.ceil(wait / 1000)} s`)
    : undefined;
};

/** NIP-29 for archives (import, sync, stream, mirror): shape, 39000-39009 only from this relay's key, nothing of deleted groups or events. */
export const groupImports: Policy = (ctx, e) => (ctx.groups && ctx.config.groups.enabled ? ctx.groups.judgeArchive(e) : undefined);
/** NIP-29 for the [mirror]: the archive rule, and a post's checks as if published here (anyone publishes to the mirrored relay). */
export const groupMirror: Policy = (ctx, e) => (ctx.groups && ctx.config.groups.enabled ? ctx.groups.judgeArchive(e, true) : undefined);
