// Issue 33: the admission registry and the engines of the models that are on, built at start
// (relay/wiring.ts calls startAdmission). Each engine has its own function below, filled by its
// package (paid: WP1, NIP-05: WP2, web of trust: WP3, NIP-43 members: WP4), so they merge apart:
// each sets its `registry.engines.*` (and what else the relay asks of it: ctx.ledger,
// ctx.membership) and hears the commit feed through registry.onCommitted.
import { AdmissionRegistry } from "../access/registry.ts";
import type { Config } from "../config/schema.ts";
import { admissionOn } from "../policy/admission.ts";
import type { RelayContext } from "./context.ts";
import { MembershipRelay } from "./membership.ts";

/** An admission model is on (or passive NIP-05 checks, which record), or only members read. */
export const admissionWanted = (c: Config): boolean =>
  admissionOn(c) || c.verified_users.mode !== "disabled" || c.authorization.read === "members";

/** The registry (ctx.access) and the engines of the models that are on. */
export function startAdmission(ctx: RelayContext): AdmissionRegistry {
  const registry = new AdmissionRegistry({
    store: ctx.store.admission,
    config: () => ctx.config,
    admin: ctx.admin,
    relayPubkey: ctx.relayKey.pubkey,
  });
  ctx.access = registry;
  const c = ctx.config;
  if (c.pay_to_relay.enabled) startPayments(ctx, registry);

  if (c.verified_users.mode !== "disabled") startNip05(ctx, registry);

  if (c.web_of_trust.enabled) startWebOfTrust(ctx, registry);

  if (c.membership.enabled) startMembers(ctx, registry);

  return registry;
}

/** Paid admission (WP1: access/payments.ts, access/ledger.ts): registry.engines.payments, ctx.ledger with cost_per_event. */
function startPayments(_ctx: RelayContext, _registry: AdmissionRegistry): void {}

/** NIP-05 verified writers (WP2: access/nip05.ts): registry.engines.nip05, kind 0 through registry.onCommitted. */
function startNip05(_ctx: RelayContext, _registry: AdmissionRegistry): void {}

/** The web of trust (WP3: access/wot.ts, relay/wot-refresh.ts): registry.engines.wot, kind 3 through registry.onCommitted. */
function startWebOfTrust(_ctx: RelayContext, _registry: AdmissionRegistry): void {}

/**
 * NIP-43 members (access/members.ts, relay/membership.ts): registry.engines.members (the NIP-86
 * methods; writers hear "loading" until its members are read), ctx.membership (join, leave,
 * invites). Its start reads the members and mends the member list (13534); Relay.ready waits for it.
 */
function startMembers(ctx: RelayContext, registry: AdmissionRegistry): void {
  const m = new MembershipRelay(ctx, registry);
  registry.engines.members = m;
  ctx.membership = m;
  m.started = m.start().catch((err) => console.error("membership: could not start:", err));
}
