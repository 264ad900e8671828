// The policy stack, in order: cheap checks first; the first refusal wins.
import type { NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";
import { VANISH_KIND } from "../nips/nip62.ts";
import { admission, relayKinds } from "./admission.ts";
import {
  adminBans,
  authToWrite,
  blockedIps,
  createdAtWindow,
  eventRate,
  groupImports,
  groupMirror,
  groupCreateRate,
  groupWrites,
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
  admission, // after the lists (a banned pubkey hears "banned"), before the groups
  relayKinds,
  groupWrites, // after the relay's own lists: a banned pubkey hears "banned", not a group's reason
  groupCreateRate, // after the group rule: only a create it accepts is charged
  protectedEvents,
];

/**
 * The policies for events that come from elsewhere (import, sync, stream, [mirror]): what may be
 * stored, whoever sends it. An import keeps to the lists (config and admin bans), not to the
 * rules of live publishing. Left out: those about the sender's connection (AUTH to write, NIP-70
 * protected events: their author published them to the relay they came from), the created_at
 * window and proof of work (an archive is old by nature) and whether a request to vanish names
 * this relay (it named the relay it came from).
 */
export const importPolicies: readonly Policy[] = [...archivePolicies(), groupImports];

/** The [mirror]'s: an import's, but a post into a group is judged as if published here (its group, membership, removal, kinds). */
export const mirrorPolicies: readonly Policy[] = [...archivePolicies(), groupMirror];

/** What an import and the [mirror] share: the lists (config and admin bans) and the relay's own NIP-43 kinds. */
function archivePolicies(): Policy[] {
  return [noAuthEvents, sizeLimits, notExpired, adminBans, kindLists, pubkeyLists, relayKinds];
}

function runPolicies(policies: readonly Policy[], ctx: PolicyContext, e: NostrEvent): Refusal | undefined {
  for (const p of policies) {
    const r = p(ctx, e);
    if (r) return r;
  }
  return undefined;
}

/**
 * The policies that judge the sender's standing (AUTH, bans, allow and deny lists, kind lists)
 * rather than the event, and admission (issue 33: paid, verified, trusted, member). NIP-62:
 * "relays that have restrictions on who can post MUST also follow the request regardless of the
 * user's status".
 */
const standingPolicies: ReadonlySet<Policy> = new Set([authToWrite, adminBans, kindLists, pubkeyLists, admission]);

interface Verdict {
  /** The first refusal, in policy order (the OK answer); undefined: the event may be stored. */
  refusal?: Refusal;
  /**
   * A request to vanish (kind 62, NIP-62 on) refused only by standing policies: its deletion is
   * still carried out (once its id and signature check out), but the event is not stored,
   * served or fanned out. What is stored and served obeys the policies like any event; the
   * deletion only ever removes the signer's own events, so honouring it adds nothing.
   */
  vanishOnly?: true;
}

/** runPolicies, and for a request to vanish whether its deletion applies despite a refusal. */
export function judgeEvent(policies: readonly Policy[], ctx: PolicyContext, e: NostrEvent): Verdict {
  if (e.kind !== VANISH_KIND || !ctx.config.nips.nip62) {
    const refusal = runPolicies(policies, ctx, e);
    return refusal ? { refusal } : {};
  }
  let first: Refusal | undefined;
  for (const p of policies) {
    const r = p(ctx, e);
    if (!r) continue;
    if (!standingPolicies.has(p)) return { refusal: first ?? r }; // about the event itself: no effect at all
    first ??= r;
  }
  return first ? { refusal: first, vanishOnly: true } : {};
}
