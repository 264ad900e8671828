// NIP-05 internet identifiers (pure): a kind 0's `nip05` address read and split, the
// `/.well-known/nostr.json` URL it is checked at, and whether that document's `names` map the
// name to the author. The fetch itself (timeouts, size cap, no redirects) is access/nip05-fetch.ts.

export interface Nip05Address {
  /** The local part, lowercase, `[a-z0-9-_.]+`; `_` for the bare domain (NIP-05's root identifier). */
  name: string;
  /** The host as written after the `@`, lowercase, with its `:port` if any (`[::1]:8080` too). */
  domain: string;
}

/** Longest address read: a name and a DNS name of 253 characters, with room to spare. */
const MAX_ADDRESS_LENGTH = 320;
const NAME = /^[a-z0-9\-_.]+$/;
/** A DNS name (labels of letters, digits and inner hyphens) or an IPv6 literal in brackets, and an optional port. */
const HOST = /^(?:(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/;

/**
 * `bob@Example.com` -> `{ name: "bob", domain: "example.com" }`; a bare `example.com` is
 * `_@example.com`. NIP-05: the local part may only use `a-z0-9-_.` (compared case-insensitively,
 * so lowercased here). undefined for anything else (spaces, a second `@`, a URL, an empty part).
 */
export function parseAddress(address: string): Nip05Address | undefined {
  if (address.length > MAX_ADDRESS_LENGTH) return undefined;
  const lower = address.trim().toLowerCase();
  const at = lower.lastIndexOf("@");
  const name = at === -1 ? "_" : lower.slice(0, at);
  const domain = at === -1 ? lower : lower.slice(at + 1);
  if (!NAME.test(name) || !HOST.test(domain)) return undefined;
  // A single label (`bob@intranet`) names no public host; localhost is the one kept, for tests.
  const host = hostOf(domain);
  if (Number(domain.slice(host.length + 1) || "0") > 65535) return undefined;
  if (!host.includes(".") && !host.startsWith("[") && host !== "localhost") return undefined;
  return { name, domain };
}

/** The address as shown: `bob@example.com`, or the bare domain for the root name `_`. */
export function formatAddress(a: Nip05Address): string {
  return a.name === "_" ? a.domain : `${a.name}@${a.domain}`;
}

/** The host without its port (`[::1]:80` -> `[::1]`, `example.com:443` -> `example.com`). */
export function hostOf(domain: string): string {
  return domain.replace(/:\d+$/, "");
}

/**
 * The site a host belongs to, for sharing the fetch budget: its last two labels
 * (`h7.attacker.example` -> `attacker.example`), three under a two-letter country code whose
 * second label is short (`a.b.co.uk` -> `b.co.uk`), an IP literal or single label as it is. A
 * rough registrable domain without the public suffix list: a wildcard domain's endless
 * subdomains share one site, and a hosting suffix's users (`*.github.io`) share one too, which
 * only slows them (they wait their turn), never refuses them.
 */
export function siteOf(domain: string): string {
  const host = hostOf(domain);
  if (host.startsWith("[") || /^\d+\.\d+\.\d+\.\d+$/.test(host)) return host;
  const labels = host.split(".");
  const keep = labels.length >= 3 && labels.at(-1)!.length === 2 && labels.at(-2)!.length <= 3 ? 3 : 2;
  return labels.slice(-keep).join(".");
}

/** 127.0.0.1, localhost or [::1] (with or without a port): the hosts `http_loopback` lets be fetched over plain http. */
export function isLoopbackHost(domain: string): boolean {
  const host = hostOf(domain);
  return host === "127.0.0.1" || host === "localhost" || host === "[::1]";
}

/**
 * Where the address is checked: `https://<domain>/.well-known/nostr.json?name=<name>`, or
 * `http://` for a loopback host when `loopback` (the `http_loopback` test switch) is on.
 */
export function wellKnownUrl(a: Nip05Address, loopback: boolean): string {
  const scheme = loopback && isLoopbackHost(a.domain) ? "http" : "https";
  return `${scheme}://${a.domain}/.well-known/nostr.json?name=${encodeURIComponent(a.name)}`;
}

/**
 * The `nip05` of a kind 0's content, trimmed; undefined when the content is not a JSON object or
 * has no non-empty string `nip05` (a profile without an address).
 */
export function addressOfProfile(content: string): string | undefined {
  let profile: unknown;
  try {
    profile = JSON.parse(content);
  } catch {
    return undefined;
  }
  if (typeof profile !== "object" || profile === null || Array.isArray(profile)) return undefined;
  const nip05 = (profile as Record<string, unknown>).nip05;
  return typeof nip05 === "string" && nip05.trim() !== "" ? nip05.trim() : undefined;
}

/**
 * What a parsed nostr.json says of `name` and `pubkey`: `match` when `names` maps the name to the
 * pubkey (hex, compared lowercase; the name compared case-insensitively, as NIP-05 says the local
 * part is: a domain listing `"Bob"` verifies `bob@`); `mismatch` when `names` is an object that
 * maps the name to another key or does not list it (the domain says no: the verification is
 * withdrawn); `garbage` when the document is not an object or has no `names` object (a broken
 * server, a maintenance page's `{"error": …}`: counted as a fault, which never withdraws a
 * verification by itself).
 */
export function namesMatch(json: unknown, name: string, pubkey: string): "match" | "mismatch" | "garbage" {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return "garbage";
  const names = (json as Record<string, unknown>).names;
  if (typeof names !== "object" || names === null || Array.isArray(names)) return "garbage";
  const wanted = name.toLowerCase();
  const key = pubkey.toLowerCase();
  // Own keys only (an inherited `constructor` is no listed name); any spelling of the name that maps to the key matches.
  for (const [listed, value] of Object.entries(names))
    if (listed.toLowerCase() === wanted && typeof value === "string" && value.toLowerCase() === key) return "match";
  return "mismatch";
}
