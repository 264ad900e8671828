// The policy stack, in order: cheap checks first; the first refusal wins.
import type { NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";
import {
  authToWrite,
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
  authToWrite,
  noAuthEvents,
  sizeLimits,
  createdAtWindow,
  notExpired,
  proofOfWork,
  vanishForUs,
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
