// Write policies as plain functions: (context, event) => a refusal, or undefined to pass.
// They run before the duplicate check and the signature check, so refusing costs little.
import type { Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";

export interface PolicyContext {
  config: Config;
  now: number;
  /** Pubkeys this connection has authenticated as (NIP-42). */
  authed: ReadonlySet<string>;
}

/** Config lists as sets, built once per list (a reload replaces the array, and so the set). */
const sets = new WeakMap<readonly unknown[], Set<unknown>>();
function setOf<T>(list: readonly T[]): Set<T> {
  let s = sets.get(list);
  if (!s) sets.set(list, (s = new Set(list)));
  return s as Set<T>;
}

export type Policy = (ctx: PolicyContext, e: NostrEvent) => Refusal | undefined;

export const requireAuth: Policy = (ctx) =>
  ctx.config.options.require_auth && ctx.authed.size === 0 ? refuse("auth-required", "this relay requires authentication to publish") : undefined;

/** NIP-42: kind 22242 proves identity to one relay; it travels in AUTH and is never published. */
export const noAuthEvents: Policy = (_ctx, e) => (e.kind === 22242 ? refuse("invalid", "kind 22242 is sent with AUTH, not EVENT") : undefined);

export const sizeLimits: Policy = ({ config: { limits } }, e) => {
  if (e.tags.length > limits.max_event_tags) return refuse("invalid", `too many tags (max ${limits.max_event_tags})`);
  if (e.content.length > limits.max_content_length) return refuse("invalid", `content longer than ${limits.max_content_length} characters`);
  return undefined;
};

export const createdAtWindow: Policy = ({ config: { options }, now }, e) => {
  if (options.reject_future_seconds > 0 && e.created_at > now + options.reject_future_seconds)
    return refuse("invalid", `event creation date is more than ${options.reject_future_seconds} seconds in the future`);
  if (options.reject_past_seconds > 0 && e.created_at < now - options.reject_past_seconds)
    return refuse("invalid", `event creation date is more than ${options.reject_past_seconds} seconds in the past`);
  return undefined;
};

export const kindLists: Policy = ({ config: { authorization: a } }, e) => {
  if (setOf(a.kind_denylist).has(e.kind)) return refuse("blocked", `kind ${e.kind} is not accepted here`);
  if (a.kind_allowlist.length > 0 && !setOf(a.kind_allowlist).has(e.kind)) return refuse("blocked", `kind ${e.kind} is not accepted here`);
  return undefined;
};

export const pubkeyLists: Policy = ({ config: { authorization: a } }, e) => {
  if (setOf(a.pubkey_denylist).has(e.pubkey)) return refuse("blocked", "this pubkey may not publish here");
  if (a.pubkey_allowlist.length > 0 && !setOf(a.pubkey_allowlist).has(e.pubkey)) return refuse("restricted", "this pubkey is not allowed to publish here");
  return undefined;
};
