// Fetching one NIP-05 `nostr.json` from a domain the relay does not control, so every way it
// can go wrong is bounded: no redirects (NIP-05: fetchers MUST ignore them), one deadline over
// the name lookup, the headers and the body, the body read as a stream and cut at a size cap
// (a 50 MB answer costs the relay at most the cap), https only, and no fetches to this host's
// own or private network (a kind 0 must not make the relay probe its LAN) unless the
// `http_loopback` test switch is on: the name is resolved and checked once, and the connection
// pinned to the checked address (DNS rebinding), on the default https port only.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isLoopbackHost } from "../nips/nip05.ts";
import { isPrivateAddress } from "../policy/ip.ts";
import { readCapped } from "./capped.ts";

export interface FetchLimits {
  /** One deadline over the lookup, the headers and the body ([verified_users] fetch_timeout_ms). */
  timeoutMs: number;
  /** The body is cut past this many bytes ([verified_users] max_response_bytes). */
  maxBytes: number;
  /** [verified_users] http_loopback: http to 127.0.0.1/localhost/[::1], and private addresses, allowed (tests). */
  loopback: boolean;
  /** The addresses a host name resolves to; the system resolver by default (tests pass their own). */
  resolve?: (host: string) => Promise<string[]>;
}

/**
 * What a fetch came to: the parsed JSON; a `fault` (the domain did not answer as it should: a
 * timeout, a redirect, an error status, too large, not JSON — worth trying again later); or
 * `refused` (the relay will not fetch this URL at all: plain http, a private address).
 */
export type FetchOutcome = { kind: "json"; json: unknown } | { kind: "fault"; error: string } | { kind: "refused"; error: string };

const systemResolve = async (host: string): Promise<string[]> => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** 65536 -> "64 KiB", 1000 -> "1000 bytes". */
export function sizeText(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

/**
 * An address no domain on the internet should send the relay to: isPrivateAddress's loopback,
 * RFC 1918, unique-local and link-local ones, plus 0.0.0.0/8 (Linux connects it to this host),
 * 100.64/10 (carrier NAT), multicast and reserved space, `::`, and every IPv6 form that carries
 * an IPv4 address the network may route to it: IPv4-mapped (`::ffff:a.b.c.d`, in hex too, and
 * SIIT's `::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (64:ff9b::/96; its local-use
 * 64:ff9b:1::/48 always), 6to4 (2002::/16) and Teredo (2001::/32: its server, and its client
 * stored inverted) when that IPv4 address is internal.
 */
export function isInternalAddress(ip: string): boolean {
  const bare = ip
    .replace(/^\[|\]$/g, "")
    .replace(/%.*$/, "")
    .toLowerCase();
  if (isPrivateAddress(bare)) return true;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.\d{1,3}\.\d{1,3}$/.exec(bare);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return a === 0 || a >= 224 || (a === 100 && b >= 64 && b <= 127);
  }
  const h = ipv6Groups(bare);
  if (!h) return !isIP(bare); // not an address at all: never fetched
  const v4of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zeros = (from: number, to: number) => h.slice(from, to).every((g) => g === 0);
  if (zeros(0, 8) || h[0]! >= 0xff00) return true; // ::, multicast
  if (zeros(0, 5) && (h[5] === 0xffff || h[5] === 0)) return isInternalAddress(v4of(h[6]!, h[7]!)); // mapped, compatible (::1 was caught above)
  if (zeros(0, 4) && h[4] === 0xffff && h[5] === 0) return isInternalAddress(v4of(h[6]!, h[7]!)); // SIIT
  if (h[0] === 0x64 && h[1] === 0xff9b) return h[2] === 1 || !zeros(2, 6) || isInternalAddress(v4of(h[6]!, h[7]!)); // NAT64
  if (h[0] === 0x2002) return isInternalAddress(v4of(h[1]!, h[2]!)); // 6to4
  if (h[0] === 0x2001 && h[1] === 0)
    return isInternalAddress(v4of(h[2]!, h[3]!)) || isInternalAddress(v4of(~h[6]! & 0xffff, ~h[7]! & 0xffff)); // Teredo
  return false;
}

/** An IPv6 address's eight 16-bit groups (a trailing dotted IPv4 is two), or undefined when it is not one. */
function ipv6Groups(ip: string): number[] | undefined {
  if (isIP(ip) !== 6) return undefined;
  let text = ip;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const part = (s: string | undefined) => (s ? s.split(":").map((g) => Number.parseInt(g, 16)) : []);
  const front = part(head);
  const back = part(tail);
  const groups = tail === undefined ? front : [...front, ...Array(8 - front.length - back.length).fill(0), ...back];
  return groups.length === 8 ? groups : undefined;
}

/**
 * Where the relay will connect for `url` (undefined: as the URL says), or why it will not fetch
 * it. A resolved name is pinned: the fetch goes to the address checked here, with the name as
 * its Host header and TLS server name (so the certificate is still checked against the name),
 * so a DNS answer that changes between the check and the connection (DNS rebinding) cannot send
 * it to a private address. Only the default https port: a named port would let a kind 0 make
 * the relay probe any host's ports.
 */
async function destination(url: URL, limits: FetchLimits, signal: AbortSignal): Promise<{ refused: string } | { address?: string }> {
  const host = url.hostname;
  if (url.protocol === "http:") {
    if (!limits.loopback || !isLoopbackHost(url.host)) return { refused: "only https addresses are fetched" };
    return {};
  }
  if (url.protocol !== "https:") return { refused: "only https addresses are fetched" };
  if (limits.loopback) return {};
  const literal = host.replace(/^\[|\]$/g, "");
  if (isIP(literal) && isInternalAddress(literal)) return { refused: `${host} is a private or loopback address: not fetched` };
  if (url.port !== "") return { refused: "only the default https port (443) is fetched" };
  if (isIP(literal)) return {};
  const looked = (limits.resolve ?? systemResolve)(host);
  const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
  // Every address, not just the first: any of them could be the one connected to.
  const addresses = await Promise.race([looked, aborted]);
  const internal = addresses.find(isInternalAddress);
  if (internal !== undefined) return { refused: `${host} resolves to a private or loopback address (${internal}): not fetched` };
  const address = addresses[0];
  if (address === undefined) throw Object.assign(new Error("no address"), { code: "ENOTFOUND" });
  return { address };
}

/** `url` with its host replaced by `address` (an IP), for a pinned connection. */
function pinned(url: URL, address: string): URL {
  const to = new URL(url);
  to.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return to;
}

/**
 * GET a `nostr.json` URL (nips/nip05.ts `wellKnownUrl`) within `limits`. Never throws: every
 * failure is an outcome with a short reason, which the refusal text shows the author.
 */
export async function fetchNostrJson(url: string, limits: FetchLimits): Promise<FetchOutcome> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { kind: "refused", error: "not a URL" };
  }
  const signal = AbortSignal.timeout(limits.timeoutMs);
  const timedOut = () => ({ kind: "fault" as const, error: `no answer within ${limits.timeoutMs} ms` });
  try {
    const to = await destination(parsed, limits, signal);
    if ("refused" in to) return { kind: "refused", error: to.refused };
    const res = to.address
      ? await fetch(pinned(parsed, to.address), {
          redirect: "manual",
          signal,
          headers: { accept: "application/json", host: parsed.host },
          tls: { serverName: parsed.hostname },
        })
      : await fetch(parsed, { redirect: "manual", signal, headers: { accept: "application/json" } });
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => {});
      return { kind: "fault", error: "redirects are not followed" };
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      return { kind: "fault", error: `HTTP ${res.status}` };
    }
    const text = await readCapped(res, limits.maxBytes);
    if (text === undefined) return { kind: "fault", error: `response larger than ${sizeText(limits.maxBytes)}` };
    try {
      return { kind: "json", json: JSON.parse(text) };
    } catch {
      return { kind: "fault", error: "the answer is not JSON" };
    }
  } catch (err) {
    if (signal.aborted) return timedOut();
    const code = (err as { code?: string }).code;
    if (code === "ENOTFOUND" || code === "EAI_AGAIN") return { kind: "fault", error: `${parsed.hostname} does not resolve` };
    return { kind: "fault", error: "the connection failed" };
  }
}
