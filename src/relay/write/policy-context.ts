// What the policies see of an EVENT: from a client connection, or (without one) from a mirror.
import type { Config } from "../../config/schema.ts";
import type { PolicyContext } from "../../policy/rules.ts";
import { nowSeconds } from "../../protocol/event.ts";
import type { RelayContext } from "../context.ts";
import type { Session } from "../connection/session.ts";

/** This relay's URL as a client on this connection sees it (for NIP-42 and NIP-62). */
const relayUrlFor = (config: Config, s: Session): string => config.info.relay_url || `ws://${s.host}${config.network.path}`;

export const policyContext = (ctx: RelayContext, s?: Session): PolicyContext => ({
  config: ctx.config,
  now: nowSeconds(),
  authed: s?.authed ?? new Set<string>(),
  relayUrl: s ? relayUrlFor(ctx.config, s) : ctx.config.info.relay_url,
  ip: s?.ip,
  group: s?.group,
  local: s?.local,
  rates: s ? ctx.rates : undefined,
  admin: ctx.admin,
  groups: ctx.groups,
  access: ctx.access,
  relayPubkey: ctx.relayKey.pubkey,
});
