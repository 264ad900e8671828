// NIP-98 HTTP auth (pure): the kind 27235 event carried in `Authorization: Nostr <base64>`.
// The signature is verified by the caller, after these cheap checks; replays are refused by the
// caller too (it remembers the ids of tokens already used).
import { validateEventShape, type NostrEvent } from "../protocol/event.ts";
import { ProtocolError } from "../protocol/reasons.ts";

const HTTP_AUTH_KIND = 27235;
/** The base64 of an Authorization header is bounded before it is decoded. */
const MAX_HEADER = 16 * 1024;

interface HttpAuthExpectation {
  method: string;
  /** The absolute URLs the `u` tag may name (the request URL as clients may spell it). */
  urls: readonly string[];
  now: number;
  windowSeconds: number;
  /** sha256 hex of the request body; when given, a matching `payload` tag is required. */
  payload?: string;
}

/** The event in an `Authorization: Nostr <base64>` header, or why there is none. */
export function parseAuthorization(header: string | null): NostrEvent | string {
  if (!header) return "missing Authorization header (NIP-98)";
  const m = /^Nostr\s+([A-Za-z0-9+/=_-]+)\s*$/.exec(header);
  if (!m || m[1]!.length > MAX_HEADER) return "Authorization must be: Nostr <base64 of a kind 27235 event>";
  let raw: unknown;
  try {
    const b64 = m[1]!.replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return "Authorization is not base64 of a JSON event";
  }
  try {
    return validateEventShape(raw);
  } catch (err) {
    if (err instanceof ProtocolError) return `Authorization event: ${err.message}`;
    throw err;
  }
}

const tag = (e: NostrEvent, name: string): string | undefined => e.tags.find((t) => t[0] === name)?.[1];

/** NIP-98's checks, in its order, then the payload hash; undefined when the token fits the request. */
export function checkHttpAuth(e: NostrEvent, x: HttpAuthExpectation): string | undefined {
  if (e.kind !== HTTP_AUTH_KIND) return `auth event must be kind ${HTTP_AUTH_KIND}`;
  if (Math.abs(e.created_at - x.now) > x.windowSeconds) return `auth event created_at is more than ${x.windowSeconds} seconds from now`;
  const u = tag(e, "u");
  if (u === undefined || !x.urls.includes(u)) return `auth event u tag must be ${x.urls[0] ?? "this URL"}`;
  if (tag(e, "method")?.toUpperCase() !== x.method.toUpperCase()) return `auth event method tag must be ${x.method}`;
  if (x.payload !== undefined && tag(e, "payload")?.toLowerCase() !== x.payload)
    return "auth event payload tag must be the sha256 of the body";
  return undefined;
}

/**
 * The spellings of a relay's URL a client may sign for: the http(s) URL it POSTs to, and the
 * ws(s) URL it knows the relay by (NIP-86: "the u tag is the relay URL").
 */
export function relayUrlForms(url: string): string[] {
  const forms = new Set<string>([url]);
  const swap: Record<string, string> = { "ws:": "http:", "wss:": "https:", "http:": "ws:", "https:": "wss:" };
  const m = /^([a-z]+:)(.*)$/.exec(url);
  const other = m ? swap[m[1]!] : undefined;
  if (other) forms.add(other + m![2]);
  return [...forms];
}
