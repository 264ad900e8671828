// NIP-11 relay information document, built from config.
import { admissionOn, joinPage } from "../config/admission.ts";
import type { Config } from "../config/schema.ts";
import { supportedNips } from "./index.ts";

export const SOFTWARE_URL = "https://github.com/bunstr/bunstr";

/** Paid admission: what it costs (NIP-11 fees, in msats) and where to pay (the /join page, http/join.ts). */
function payment(c: Config): Record<string, unknown> {
  const pay = c.pay_to_relay;
  const fees: Record<string, unknown> = { admission: [{ amount: pay.admission_cost * 1000, unit: "msats" }] };
  if (pay.cost_per_event > 0) fees.publication = [{ amount: pay.cost_per_event * 1000, unit: "msats" }];
  return { fees, payments_url: joinPage(c) };
}

/**
 * `selfPubkey`: the relay key's pubkey (cli/relay-key.ts), always advertised as `self`; while
 * groups are on it is also `pubkey` when [info] pubkey is empty, since nostr-tools' NIP-29 code
 * looks for the relay's signer there.
 */
export function relayInfo(config: Config, version: string, selfPubkey = ""): Record<string, unknown> {
  const i = config.info;
  const l = config.limits;
  const o = config.options;
  const a = config.authorization;
  const doc: Record<string, unknown> = {
    name: i.name,
    description: i.description,
    banner: i.banner,
    icon: i.icon,
    pubkey: i.pubkey || (config.groups.enabled ? selfPubkey : ""),
    self: selfPubkey || i.self,
    contact: i.contact,
    supported_nips: supportedNips(config),
    software: SOFTWARE_URL,
    version,
    terms_of_service: i.terms_of_service,
    privacy_policy: i.privacy_policy,
    posting_policy: i.posting_policy,
    limitation: {
      max_message_length: l.max_message_bytes,
      max_subscriptions: l.max_subscriptions,
      max_filters: l.max_filters,
      max_limit: l.max_limit,
      max_subid_length: l.max_subid_length,
      max_event_tags: l.max_event_tags,
      max_content_length: l.max_content_length,
      min_pow_difficulty: o.min_pow_difficulty,
      auth_required: o.auth === "always",
      payment_required: config.pay_to_relay.enabled,
      restricted_writes: a.pubkey_allowlist.length > 0 || a.kind_allowlist.length > 0 || admissionOn(config),
      default_limit: l.default_limit,
    } as Record<string, unknown>,
  };
  // Seconds into the past / future an event may be; a check that is off (0) is not advertised.
  const limitation = doc.limitation as Record<string, unknown>;
  if (l.created_at_lower_limit > 0) limitation.created_at_lower_limit = l.created_at_lower_limit;
  if (l.created_at_upper_limit > 0) limitation.created_at_upper_limit = l.created_at_upper_limit;
  if (config.pay_to_relay.enabled) Object.assign(doc, payment(config));
  // Omit empty optional strings rather than advertising "".
  for (const [k, v] of Object.entries(doc)) if (v === "") delete doc[k];
  return doc;
}
