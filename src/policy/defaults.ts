// The policy stack, in order: cheap checks first; the first refusal wins.
import { hasValidId, validateEventShape, type NostrEvent } from "../protocol/event.ts";
import { ProtocolError, refusalText, type Refusal } from "../protocol/reasons.ts";
import { eventRate } from "./rate-limit.ts";
import {
  adminBans,
  authToWrite,
  blockedIps,
  createdAtWindow,
  kindLists,
  noAuthEvents,
  notExpired,
  proofOfWork,
  protectedEvents,
  pubkeyLists,
  sizeLimits,
  vanishForUs,
  type Policy,
  type PolicyContext,
} from "./rules.ts";

export const defaultPolicies: Policy[] = [
  blockedIps,
  eventRate, // a flood is charged before anything else is done for it
  authToWrite,
  noAuthEvents,
  sizeLimits,
  createdAtWindow,
  notExpired,
  proofOfWork,
  vanishForUs,
  adminBans,
  kindLists,
  pubkeyLists,
  protectedEvents,
];

export function runPolicies(policies: readonly Policy[], ctx: PolicyContext, e: NostrEvent): Refusal | undefined {
  for (const p of policies) {
    const r = p(ctx, e);
    if (r) return r;
  }
  return undefined;
}

/** Why admitEvent turned an event away: the counters of import, sync and stream. */
export type Unfit = { fate: "badEvent" | "refused" | "badId"; reason: string };

/**
 * The first steps of the EVENT pipeline for events that arrive other than by a client's EVENT
 * (import, sync, stream, mirror): shape, then the given policies, then the id hash. The event,
 * or what is wrong with it as a NIP-01 reason.
 */
export function admitEvent(raw: unknown, policies: readonly Policy[], ctx: PolicyContext): NostrEvent | Unfit {
  let e: NostrEvent;
  try {
    e = validateEventShape(raw);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return { fate: "badEvent", reason: err.text };
  }
  const refusal = runPolicies(policies, ctx, e);
  if (refusal) return { fate: "refused", reason: refusalText(refusal) };
  if (!hasValidId(e)) return { fate: "badId", reason: "invalid: event id does not match the event" };
  return e;
}
