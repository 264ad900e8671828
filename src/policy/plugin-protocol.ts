// strfry's write-policy plugin protocol, as pure functions: one JSON line per event to the
// plugin's stdin, one JSON line per event back on its stdout, matched by event id.
// (strfry: docs/plugins.md and src/PluginEventSifter.h.)
import type { Prefix } from "../protocol/reasons.ts";

/** Where an event came from, in strfry's words (strfry sends "Stored" only from its router). */
type SourceType = "IP4" | "IP6" | "Import" | "Stream" | "Sync";

export interface Source {
  type: SourceType;
  /** The client's IP for IP4/IP6; for the others, what the event came through (a file, a relay URL). */
  info: string;
  /** The NIP-42 pubkey the connection authenticated as, if any. */
  authed?: string;
}

/** IPv6 if the address has a colon (IPv4-mapped addresses arrive already unwrapped), else IPv4. */
export const ipSourceType = (ip: string): SourceType => (ip.includes(":") ? "IP6" : "IP4");

/**
 * One request line. strfry serializes the request from a sorted map, so its keys come in
 * alphabetical order and `authed` is present only when there is one; we do the same. The event
 * is passed as bunstr serves it (the same seven fields; only their order differs from strfry's).
 */
export function requestLine(eventJson: string, receivedAt: number, source: Source): string {
  const authed = source.authed ? `"authed":${JSON.stringify(source.authed)},` : "";
  return `{${authed}"event":${eventJson},"receivedAt":${receivedAt},"sourceInfo":${JSON.stringify(source.info)},"sourceType":"${source.type}","type":"new"}\n`;
}

type Action = "accept" | "reject" | "shadowReject";

/** One output line, read: an answer; an object naming an id but not a valid answer; or junk. */
type ParsedLine =
  | { kind: "answer"; id: string; action: Action; msg: string }
  | { kind: "invalid"; id: string; why: string }
  | { kind: "junk"; why: string };

export function parseAnswerLine(line: string): ParsedLine {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { kind: "junk", why: "not JSON" };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return { kind: "junk", why: "not a JSON object" };
  const o = v as Record<string, unknown>;
  if (typeof o.id !== "string") return { kind: "junk", why: "no string id" };
  const msg = o.msg ?? "";
  if (typeof msg !== "string") return { kind: "invalid", id: o.id, why: "msg is not a string" };
  if (o.action === "accept" || o.action === "reject" || o.action === "shadowReject")
    return { kind: "answer", id: o.id, action: o.action, msg };
  return { kind: "invalid", id: o.id, why: `action is ${JSON.stringify(o.action) ?? "missing"}, not accept, reject or shadowReject` };
}

/** NIP-01's machine-readable prefixes; `satisfies` keeps this in step with reasons.ts. */
const PREFIXES = {
  duplicate: true,
  pow: true,
  blocked: true,
  "rate-limited": true,
  invalid: true,
  restricted: true,
  "auth-required": true,
  mute: true,
  error: true,
} as const satisfies Record<Prefix, true>;

/**
 * The OK message for a reject. strfry passes the plugin's msg through as it is (and "" when there
 * is none); we keep a msg that starts with a NIP-01 prefix, and put "blocked: " in front of any
 * other, so clients always get a machine-readable reason.
 */
export function rejectMessage(msg: string): string {
  const prefix = /^([a-z-]+):/.exec(msg)?.[1];
  if (prefix !== undefined && Object.hasOwn(PREFIXES, prefix)) return msg;
  return `blocked: ${msg.trim() || "rejected by the relay's write policy"}`;
}
