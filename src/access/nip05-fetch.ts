// Fetching one NIP-05 `nostr.json` from a domain the relay does not control, so every way it
// can go wrong is bounded: no redirects (NIP-05: fetchers MUST ignore them), one deadline over
// the name lookup, the headers and the body, the body read as a stream and cut at a size cap
// (a 50 MB answer costs the relay at most the cap), https only, and no fetches to this host's
// own or private network (a kind 0 must not make the relay probe its LAN) unless the
// `http_loopback` test switch is on.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isLoopbackHost } from "../nips/nip05.ts";
import { isPrivateAddress } from "../policy/ip.ts";

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
 * 100.64/10 (carrier NAT), multicast and reserved space, `::`, and IPv4-mapped IPv6 in hex.
 */
export function isInternalAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, "").toLowerCase();
  if (isPrivateAddress(bare)) return true;
  const v4 = /^(?:::ffff:)?(\d{1,3})\.(\d{1,3})\.\d{1,3}\.\d{1,3}$/.exec(bare);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return a === 0 || a >= 224 || (a === 100 && b >= 64 && b <= 127);
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(bare);
  if (mapped) {
    const hi = Number.parseInt(mapped[1]!, 16);
    const lo = Number.parseInt(mapped[2]!, 16);
    return isInternalAddress(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`);
  }
  return /^[0:]+$/.test(bare) || bare.startsWith("ff");
}

/** Why the relay will not fetch `url`, or undefined when it may (after the host's addresses are looked up). */
async function refusal(url: URL, limits: FetchLimits, signal: AbortSignal): Promise<string | undefined> {
  const host = url.hostname;
  if (url.protocol === "http:") {
    if (!limits.loopback || !isLoopbackHost(url.host)) return "only https addresses are fetched";
    return undefined;
  }
  if (url.protocol !== "https:") return "only https addresses are fetched";
  if (limits.loopback) return undefined;
  const literal = host.replace(/^\[|\]$/g, "");
  if (isIP(literal)) return isInternalAddress(literal) ? `${host} is a private or loopback address: not fetched` : undefined;
  const looked = (limits.resolve ?? systemResolve)(host);
  const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
  // Every address, not just the first: the connection may use any of them.
  const internal = (await Promise.race([looked, aborted])).find(isInternalAddress);
  return internal === undefined ? undefined : `${host} resolves to a private or loopback address (${internal}): not fetched`;
}

/** The body as text, cut at `max` bytes: undefined when it is longer (the rest is never read). */
async function readCapped(res: Response, max: number): Promise<string | undefined> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > max) {
    await res.body?.cancel().catch(() => {});
    return undefined;
  }
  if (!res.body) return "";
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    parts.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(parts));
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
    const why = await refusal(parsed, limits, signal);
    if (why !== undefined) return { kind: "refused", error: why };
    const res = await fetch(parsed, { redirect: "manual", signal, headers: { accept: "application/json" } });
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
