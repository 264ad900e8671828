// The policy stack, in order: cheap checks first; the first refusal wins.
import { createdAtWindow, kindLists, noAuthEvents, pubkeyLists, requireAuth, sizeLimits, type Policy, type PolicyContext } from "./rules.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";

export const defaultPolicies: Policy[] = [requireAuth, noAuthEvents, sizeLimits, createdAtWindow, kindLists, pubkeyLists];

export function runPolicies(policies: readonly Policy[], ctx: PolicyContext, e: NostrEvent): Refusal | undefined {
  for (const p of policies) {
    const r = p(ctx, e);
    if (r) return r;
  }
  return undefined;
}
