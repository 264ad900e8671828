// Issue 33: what the config says about admission, derived in one place for the policy
// (policy/admission.ts), NIP-11 (nips/nip11.ts) and the warnings (config/warnings.ts).
import type { Config } from "./schema.ts";

/** A model that refuses writers is on. Passive NIP-05 checks refuse nobody. */
export const admissionOn = (c: Config): boolean =>
  c.pay_to_relay.enabled || c.verified_users.mode === "enabled" || c.web_of_trust.enabled || c.membership.enabled;

/** The relay's address for people: info.relay_url with ws -> http, wss -> https, no trailing slash; "" without one. */
export const httpBase = (c: Config): string =>
  c.info.relay_url ? c.info.relay_url.replace(/^ws(s?):\/\//i, "http$1://").replace(/\/+$/, "") : "";

/** The /join page (http/join.ts): under info.relay_url, or relative to the relay path without one. */
export const joinPage = (c: Config): string => `${httpBase(c) || c.network.path.replace(/\/+$/, "")}/join`;
