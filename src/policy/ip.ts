// The unit per-address limits count in: an IPv4 address, or an IPv6 /64 (one customer's
// subnet: a single host may use any of its 2^64 addresses).

/** "2001:db8:1:2::/64" for any address in that /64; IPv4 (and anything unparsable) as it is. */
export function ipGroup(ip: string): string {
  if (!ip.includes(":")) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  const bare = ip
    .replace(/^\[|\]$/g, "")
    .replace(/%.*$/, "")
    .toLowerCase();
  const halves = bare.split("::");
  if (halves.length > 2) return ip;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  // An embedded IPv4 tail takes two groups.
  const groups = halves.length === 2 ? [...head, ...Array(Math.max(0, 8 - head.length - tail.length)).fill("0"), ...tail] : head;
  const prefix = groups.slice(0, 4).map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? g.replace(/^0+(?=.)/, "") : g));
  if (prefix.length < 4) return ip;
  return `${prefix.join(":")}::/64`;
}

/** Adds `delta` to an address's tally (connections, filter bytes, negentropy items); drops it at zero. */
export function tally(counts: Map<string, number>, group: string, delta: number): void {
  const n = (counts.get(group) ?? 0) + delta;
  if (n > 0) counts.set(group, n);
  else counts.delete(group);
}

/**
 * Loopback (127.0.0.0/8, ::1), private (RFC 1918: 10/8, 172.16/12, 192.168/16; fc00::/7) or
 * link-local (169.254/16, fe80::/10): an address no client on the internet has, so one a reverse
 * proxy on the same host or network connects from. IPv4-mapped IPv6 (::ffff:a.b.c.d) counts as
 * its IPv4 address; anything unparsable is not private.
 */
export function isPrivateAddress(ip: string): boolean {
  const v4 = /^(?:::ffff:)?(\d{1,3})\.(\d{1,3})\.\d{1,3}\.\d{1,3}$/i.exec(ip);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254);
  }
  if (!ip.includes(":")) return false;
  const bare = ip
    .replace(/^\[|\]$/g, "")
    .replace(/%.*$/, "")
    .toLowerCase();
  // ::1 however written (::1, 0:0:0:0:0:0:0:1, 0000:…:0001).
  if (/^[0:]+1$/.test(bare)) return true;
  // The first group's four hex digits: fc00–fdff (unique local), fe80–febf (link-local).
  return /^(f[cd][0-9a-f]{2}|fe[89ab][0-9a-f]):/.test(bare);
}

/** Headers a reverse proxy adds with the client's address. */
const FORWARDING_HEADERS = ["x-forwarded-for", "x-real-ip", "forwarded"];

/** What serve needs of [network] to tell a proxy apart. */
interface ProxySettings {
  remote_ip_header: string;
  trusted_proxies: readonly string[];
}

/**
 * The client's address: the socket's peer (an IPv4 peer on a dual-stack socket, ::ffff:a.b.c.d,
 * read as a.b.c.d), or what remote_ip_header says when the peer is a trusted proxy (its last
 * entry: the one our proxy appended). Every per-address limit counts by this address.
 */
export function clientAddress(socketPeer: string, headers: Headers, network: ProxySettings): string {
  const peer = socketPeer.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "");
  const header = network.remote_ip_header;
  if (!header || !network.trusted_proxies.includes(peer)) return peer;
  return headers.get(header)?.split(",").at(-1)?.trim() || peer;
}

/**
 * A warning when a websocket upgrade looks proxied but the relay is not set up to read the
 * client's address from it: a loopback or private peer sending X-Forwarded-For, X-Real-IP,
 * Forwarded (or the configured remote_ip_header) while remote_ip_header is unset or the peer is
 * not in trusted_proxies. Every client behind that proxy then counts as the proxy's address.
 * Undefined when the request does not look proxied or the setup is right.
 */
export function proxyWarning(peer: string, headers: Headers, network: ProxySettings, exempt: boolean): string | undefined {
  if (!isPrivateAddress(peer)) return undefined;
  const own = network.remote_ip_header.toLowerCase();
  if (own && network.trusted_proxies.includes(peer)) return undefined;
  const seen = [own, ...FORWARDING_HEADERS].find((h) => h !== "" && headers.has(h));
  if (seen === undefined) return undefined;
  const shared =
    `every client behind it counts as ${peer}: they share one address's [limits] max_connections_per_ip, ` +
    `query time and the other per-address bounds, and ${exempt ? "none of them is rate-limited per IP" : "one bucket of each [rate_limits] rate"}`;
  if (!own) {
    const header = seen === "forwarded" ? "x-forwarded-for" : seen;
    return (
      `warning: websocket connections from ${peer} carry ${seen} (a reverse proxy?) but [network] remote_ip_header is not set, so ${shared}. ` +
      `Set [network] remote_ip_header = "${header}" and trusted_proxies = ["${peer}"]` +
      (seen === "forwarded" ? " and have the proxy send X-Forwarded-For (Forwarded is not read)" : "") +
      " (a reload applies them: kill -HUP)"
    );
  }
  return (
    `warning: websocket connections from ${peer} carry ${seen} but ${peer} is not in [network] trusted_proxies, so the header is ignored and ${shared}. ` +
    `Add "${peer}" to [network] trusted_proxies (a reload applies it: kill -HUP)`
  );
}
