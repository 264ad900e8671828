// Settings that load but will not do what the operator meant. One list, printed by `serve` at
// start and after each reload, and by `config check`: the three never disagree.
import { isIP } from "node:net";
import { MAX_KIND } from "../protocol/kinds.ts";
import type { Config } from "./schema.ts";

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
