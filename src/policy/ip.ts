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
