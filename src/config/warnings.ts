// Settings that load but will not do what the operator meant. One list, printed by `serve` at
// start and after each reload, and by `config check`: the three never disagree.
import { isIP } from "node:net";
import { MAX_KIND } from "../protocol/kinds.ts";
import { admissionOn } from "./admission.ts";
import { defaults, type Config } from "./schema.ts";

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "::1", "localhost"]);

/** Each problem as one line starting `warning: `, saying what to set; none when all is well. */
export function configWarnings(config: Config): string[] {
  const { network, rate_limits } = config;
  const out: string[] = [];
  if (network.remote_ip_header && network.trusted_proxies.length === 0)
    out.push(
      `warning: [network] remote_ip_header is ignored until trusted_proxies lists your proxy's address ` +
        `(a proxy on this host: trusted_proxies = ["127.0.0.1", "::1"])`,
    );
  if (!network.remote_ip_header && network.trusted_proxies.length > 0)
    out.push(
      `warning: [network] trusted_proxies is set but remote_ip_header is not: every client behind the proxy counts as the proxy's address; ` +
        `set remote_ip_header = "x-forwarded-for" (the header your proxy sets)`,
    );
  for (const entry of network.trusted_proxies)
    if (isIP(entry) === 0 || /^::ffff:/i.test(entry))
      out.push(
        `warning: [network] trusted_proxies: ${JSON.stringify(entry)} is not an IP address and matches no peer; ` +
          `list each proxy's address as the relay sees it (e.g. "127.0.0.1", "::1"; names and ranges are not matched)`,
      );
  if (!rate_limits.exempt_private_addresses && !network.remote_ip_header && LOOPBACK_HOSTS.has(network.host))
    out.push(
      `warning: [rate_limits] exempt_private_addresses is off and [network] remote_ip_header is not set while listening on ${network.host}: ` +
        `behind a proxy every client shares the proxy's rate limits; set remote_ip_header and trusted_proxies`,
    );
  out.push(...kindWarnings(config));
  out.push(...admissionWarnings(config));
  return out;
}

/** Admission settings that leave a feature half-working (docs/architecture.md, Admission). */
function admissionWarnings(config: Config): string[] {
  const { authorization, pay_to_relay, verified_users, info } = config;
  const out: string[] = [];
  if (authorization.read === "members" && !admissionOn(config) && authorization.pubkey_allowlist.length === 0)
    out.push(
      `warning: [authorization] read = "members" with no admission model on and an empty pubkey_allowlist: only admins and allow-listed pubkeys can read`,
    );
  if (pay_to_relay.enabled && !info.relay_url)
    out.push(
      `warning: [pay_to_relay] is enabled but [info] relay_url is not set: the node gets no webhook (payments are found by polling) and refusals say "join at /join" without the relay's address`,
    );
  if (verified_users.http_loopback)
    out.push(`warning: [verified_users] http_loopback is for tests only: NIP-05 addresses on this machine are fetched over http`);
  return out;
}

/** Settings that cannot work: `serve` stops at start with these (config check prints them as errors too). */
export function configErrors(config: Config): string[] {
  const { pay_to_relay: pay, web_of_trust: wot } = config;
  const out: string[] = [];
  if (pay.enabled && !pay.node_url) out.push("[pay_to_relay] enabled needs node_url (the Lightning node's API)");
  if (pay.enabled && pay.processor === "LNBits" && !pay.api_secret)
    out.push('[pay_to_relay] processor = "LNBits" needs api_secret (the wallet\'s invoice key)');
  if (pay.enabled && pay.processor === "ClnRest" && !pay.rune_path)
    out.push('[pay_to_relay] processor = "ClnRest" needs rune_path (a file holding the rune)');
  if (wot.enabled && wot.seeds.length === 0 && !config.info.pubkey)
    out.push("[web_of_trust] enabled needs seeds or [info] pubkey (whose follows the web starts from)");
  // The schema lets a patterned string be empty; a NIP-05 engine needs both durations.
  if (config.verified_users.mode !== "disabled")
    for (const k of ["verify_expiration", "verify_update_frequency"] as const)
      if (!config.verified_users[k])
        out.push(
          `[verified_users] ${k} is empty: give a duration of at least 60 s (the default: ${JSON.stringify(defaults().verified_users[k])})`,
        );
  return out;
}

/** NIP-01 kinds are 0..65535: an entry above that matches no event (nostr-rs-relay's sample lists 70202). */
function kindWarnings(config: Config): string[] {
  const { authorization } = config;
  const lists = {
    kind_allowlist: authorization.kind_allowlist,
    kind_denylist: authorization.kind_denylist,
    restricted_read_kinds: authorization.restricted_read_kinds,
  };
  const out: string[] = [];
  for (const [name, kinds] of Object.entries(lists)) {
    const over = kinds.filter((k) => k > MAX_KIND);
    if (over.length === 0) continue;
    const what = name === "kind_allowlist" && over.length === kinds.length ? "; with none other listed, every event is refused" : "";
    out.push(
      `warning: [authorization] ${name}: ${over.join(", ")} ${over.length === 1 ? "is" : "are"} above ${MAX_KIND}, the highest kind an event can have: ` +
        `no event matches ${over.length === 1 ? "it" : "them"}${what}`,
    );
  }
  return out;
}
