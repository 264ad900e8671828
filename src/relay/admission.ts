// Issue 33: the admission registry and the engines of the models that are on, built at start
// (relay/wiring.ts calls startAdmission). Each engine has its own function below (paid, NIP-05,
// web of trust, NIP-43 members): each sets its `registry.engines.*` (and what else the relay asks of it: ctx.ledger,
// ctx.membership) and hears the commit feed through registry.onCommitted.
import { log } from "../log.ts";
import { ClnRest, readRune } from "../access/clnrest.ts";
import { Ledger } from "../access/ledger.ts";
import { Lnbits } from "../access/lnbits.ts";
import { Payments } from "../access/payments.ts";
import { startNip05Checks } from "../access/nip05.ts";
import { AdmissionRegistry } from "../access/registry.ts";
import { httpBase } from "../config/admission.ts";
import { FOLLOW_LIST_KIND, WebOfTrust, wotSettings } from "../access/wot.ts";
import { setOf, type Config } from "../config/schema.ts";
import { ADMISSION_TEXTS, admissionOn, BASIS_BIT, joinUrl } from "../policy/admission.ts";
import { refuse } from "../protocol/reasons.ts";
import type { RelayContext } from "./context.ts";
import { startWotRefresh } from "./wot-refresh.ts";
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

/**
 * Paid admission (access/payments.ts, access/ledger.ts): registry.engines.payments, and
 * ctx.ledger (a no-op while cost_per_event is 0: it is reloadable). The node client is chosen
 * once (processor, node_url, api_secret and rune_path are not reloadable; the timeout is).
 */
function startPayments(ctx: RelayContext, registry: AdmissionRegistry): void {
  const pay = () => ctx.config.pay_to_relay;
  const timeoutMs = () => pay().node_timeout_ms;
  const nodeUrl = pay().node_url;
  const node =
    pay().processor === "ClnRest"
      ? new ClnRest({ nodeUrl, rune: readRune(pay().rune_path), timeoutMs })
      : new Lnbits({ nodeUrl, apiKey: pay().api_secret, timeoutMs });
  const ledger = new Ledger(ctx.store.admission, {
    cost: () => pay().cost_per_event,
    // Paid per event: admitted by payment and nothing else (bits are masked to the enabled models).
    payer: (pubkey) => registry.bits(pubkey) === BASIS_BIT.paid,
    short: (pubkey, balance, cost) => refuse("blocked", ADMISSION_TEXTS.balance(balance, cost, joinUrl(ctx.config, pubkey))),
  });
  // On a store several nodes share, one node at a time polls the node for unpaid invoices.
  const poller = ctx.store.leader?.("payments");
  const payments = new Payments({
    leader: () => poller?.leading ?? true,
    node,
    store: ctx.store.admission,
    ledger,
    keys: pay,
    metrics: registry.metrics,
    admitter: {
      // Paid, or free by the config allow list: the join endpoints answer anyone, so they never
      // tell whether a pubkey is a member, trusted, verified or on the admin's lists.
      admitted: (pubkey) => (registry.bits(pubkey) & BASIS_BIT.paid) !== 0 || setOf(ctx.config.authorization.pubkey_allowlist).has(pubkey),
      admitPaid: (pubkey, evidence) => registry.admit(pubkey, "paid", evidence),
    },
    // LNbits posts to /lnbits under info.relay_url unless webhook_url says otherwise; CLN has no webhook.
    webhookUrl: () =>
      node instanceof Lnbits ? pay().webhook_url || (httpBase(ctx.config) && `${httpBase(ctx.config)}/lnbits`) || undefined : undefined,
  });
  registry.engines.payments = payments;
  ctx.ledger = ledger;
  payments
    .load()
    .then(() => {
      if (!ctx.closing) payments.start();
    })
    .catch((err) => log.error("payments: could not load the balances or mend the paid invoices:", err));
}

/**
 * NIP-05 verified writers (access/nip05.ts): registry.engines.nip05, kind 0 through
 * registry.onCommitted. On a store several nodes share, one node at a time checks (Store.leader).
 */
function startNip05(ctx: RelayContext, registry: AdmissionRegistry): void {
  const leader = ctx.store.leader?.("nip05");
  startNip05Checks(registry, {
    config: () => ctx.config,
    store: ctx.store.admission,
    closing: () => ctx.closing,
    ...(leader ? { leader } : {}),
  });
}

/**
 * The web of trust (access/wot.ts, relay/wot-refresh.ts): registry.engines.wot (the
 * `trusted` bit asks its graph), rebuilt ~1 s after a committed kind 3 that shapes it and on the
 * refresh schedule. Its timers end when the relay closes (ctx.closing).
 */
function startWebOfTrust(ctx: RelayContext, registry: AdmissionRegistry): void {
  const wot = new WebOfTrust(ctx.store, {
    settings: () => wotSettings(ctx.config),
    closed: () => ctx.closing,
    onBuilt: (graph, seconds) => Object.assign(registry.metrics.wot, { pubkeys: graph.size, bytes: graph.bytes, buildSeconds: seconds }),
  });
  registry.engines.wot = wot;
  registry.onCommitted([FOLLOW_LIST_KIND], (e) => wot.committed(e));
  startWotRefresh(ctx, wot);
}

/**
 * NIP-43 members (access/members.ts, relay/membership.ts): registry.engines.members (the NIP-86
 * methods; writers hear "loading" until its members are read), ctx.membership (join, leave,
 * invites). Its start reads the members and mends the member list (13534); Relay.ready waits for it.
 */
function startMembers(ctx: RelayContext, registry: AdmissionRegistry): void {
  const m = new MembershipRelay(ctx, registry);
  registry.engines.members = m;
  ctx.membership = m;
  m.started = m.start().catch((err) => log.error("membership: could not start:", err));
}
