// Nostr events (NIP-01): shape validation, canonical serialization and the id hash.
// Pure: no Bun imports, so it runs in workers, tests and any other runtime.
import { createHash } from "node:crypto";
import { MAX_KIND } from "./kinds.ts";
import { ProtocolError } from "./reasons.ts";

export interface NostrEvent {
  id: string;
  pubkey: string;
  created_at: number;
  kind: number;
  tags: string[][];
  content: string;
  sig: string;
}

const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;
export const isHex64 = (s: unknown): s is string => typeof s === "string" && s.length === 64 && HEX64.test(s);

/**
 * Checks the wire shape of an event and returns it with exactly the seven NIP-01 fields
 * (extra fields are dropped). Throws ProtocolError("invalid") naming the first bad field.
 */
export function validateEventShape(raw: unknown): NostrEvent {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new ProtocolError("invalid", "event must be a JSON object");
  const e = raw as Record<string, unknown>;
  if (!isHex64(e.id)) throw new ProtocolError("invalid", "id must be 64 lowercase hex characters");
  if (!isHex64(e.pubkey)) throw new ProtocolError("invalid", "pubkey must be 64 lowercase hex characters");
  if (typeof e.sig !== "string" || e.sig.length !== 128 || !HEX128.test(e.sig))
    throw new ProtocolError("invalid", "sig must be 128 lowercase hex characters");
  const createdAt = e.created_at;
  if (typeof createdAt !== "number" || !Number.isSafeInteger(createdAt) || createdAt < 0)
    throw new ProtocolError("invalid", "created_at must be a non-negative integer");
  const kind = e.kind;
  if (typeof kind !== "number" || !Number.isInteger(kind) || kind < 0 || kind > MAX_KIND)
    throw new ProtocolError("invalid", "kind must be an integer between 0 and 65535");
  if (typeof e.content !== "string") throw new ProtocolError("invalid", "content must be a string");
  const tags = e.tags;
  if (!Array.isArray(tags)) throw new ProtocolError("invalid", "tags must be an array");
  for (const tag of tags) {
    if (!Array.isArray(tag)) throw new ProtocolError("invalid", "each tag must be an array of strings");
    for (const v of tag) if (typeof v !== "string") throw new ProtocolError("invalid", "each tag must be an array of strings");
  }
  return { id: e.id, pubkey: e.pubkey, created_at: createdAt, kind, tags: tags as string[][], content: e.content, sig: e.sig };
}

// Control characters NIP-01 keeps verbatim, though JSON.stringify writes them as \u00XX.
const VERBATIM_CONTROL = /[\u0000-\u0007\u000b\u000e-\u001f]/;
const ESCAPED_CONTROL = /\\u00(0[0-7]|0b|0e|0f|1[0-9a-f])/g;

function hasVerbatimControl(e: NostrEvent): boolean {
  if (VERBATIM_CONTROL.test(e.content)) return true;
  for (const tag of e.tags) for (const v of tag) if (VERBATIM_CONTROL.test(v)) return true;
  return false;
}

/**
 * The JSON of an event's tags and content: both its id and its stored form are made of them, so
 * the pipeline encodes them once (admit/admit.ts) and hands them to hasValidId and serializeEvent.
 */
interface EventJson {
  tags: string;
  content: string;
}

export const eventJson = (e: NostrEvent): EventJson => ({ tags: JSON.stringify(e.tags), content: JSON.stringify(e.content) });

/** The JSON.stringify form of [0, pubkey, created_at, kind, tags, content]: what nostr-tools and most libraries hash. */
const stringifiedForm = (e: NostrEvent, j: EventJson = eventJson(e)): string =>
  `[0,${JSON.stringify(e.pubkey)},${JSON.stringify(e.created_at)},${JSON.stringify(e.kind)},${j.tags},${j.content}]`;

/**
 * The NIP-01 serialization: only \n \" \\ \r \t \b \f are escaped, every other character
 * (other control characters, U+007F, non-ASCII) is written verbatim. Exported for tests:
 * test/nip01.test.ts checks the escaping itself and signs events with it.
 */
export function canonicalForm(e: NostrEvent, j?: EventJson): string {
  const s = stringifiedForm(e, j);
  if (!hasVerbatimControl(e)) return s;
  // JSON.stringify wrote the other control characters as \u00XX; put them back verbatim. A
  // literal backslash is always doubled by JSON.stringify, so a match preceded by an odd run of
  // backslashes is an escape, not text.
  return s.replace(ESCAPED_CONTROL, (m, hex: string, offset: number) => {
    let n = 0;
    for (let i = offset - 1; i >= 0 && s.charCodeAt(i) === 92; i--) n++;
    return n % 2 === 0 ? String.fromCharCode(parseInt(hex, 16)) : m;
  });
}

const sha256hex = (s: string): string => createHash("sha256").update(s, "utf8").digest("hex");

/**
 * True when the claimed id is the sha256 of the event. The NIP-01 form is the reference; for
 * events that contain control characters we also accept the JSON.stringify form, which is what
 * nostr-tools, NDK and most signers produce (interop over purity: both are unambiguous).
 */
export function hasValidId(e: NostrEvent, j: EventJson = eventJson(e)): boolean {
  const canonical = canonicalForm(e, j);
  if (sha256hex(canonical) === e.id) return true;
  return hasVerbatimControl(e) && sha256hex(stringifiedForm(e, j)) === e.id;
}

/**
 * serializeEvent's text before the tags: the store keeps these four fields in columns and puts
 * this back when it serves the event (store/sqlite/db.ts).
 */
export const serializedHead = (id: string, pubkey: string, createdAt: number, kind: number): string =>
  `{"id":"${id}","pubkey":"${pubkey}","created_at":${createdAt},"kind":${kind},`;

/** serializeEvent's text after the content: the store keeps the sig as 64 bytes. */
export const serializedTail = (sig: string): string => `,"sig":"${sig}"}`;

// Where serializedHead puts the id and the pubkey: {"id":"<64 hex>","pubkey":"<64 hex>",...
export const ID_AT = 7;
export const PUBKEY_AT = 83;
/** Is this JSON in serializeEvent's layout, its id and pubkey at ID_AT and PUBKEY_AT? */
export const fixedLayout = (json: string): boolean =>
  json.startsWith('{"id":"') && json.startsWith('","pubkey":"', ID_AT + 64) && json.charCodeAt(PUBKEY_AT + 64) === 34;

const CREATED_AT_AT = PUBKEY_AT + 64 + '","created_at":'.length;

/** serializedHead's fields read back off a JSON in serializeEvent's layout; undefined for another. */
export function headOf(json: string): Pick<NostrEvent, "id" | "pubkey" | "created_at" | "kind"> | undefined {
  if (!fixedLayout(json)) return undefined;
  const kindAt = json.indexOf(',"kind":', CREATED_AT_AT);
  if (kindAt < 0) return undefined;
  const created_at = Number(json.slice(CREATED_AT_AT, kindAt));
  const kind = Number(json.slice(kindAt + 8, json.indexOf(",", kindAt + 8)));
  if (!Number.isInteger(created_at) || !Number.isInteger(kind)) return undefined;
  return { id: json.slice(ID_AT, ID_AT + 64), pubkey: json.slice(PUBKEY_AT, PUBKEY_AT + 64), created_at, kind };
}

/** The stored and served form: the seven fields in a fixed order, built once per event. */
export const serializeEvent = (e: NostrEvent, j: EventJson = eventJson(e)): string =>
  `${serializedHead(e.id, e.pubkey, e.created_at, e.kind)}"tags":${j.tags},"content":${j.content}${serializedTail(e.sig)}`;

/** The value of the first `d` tag, as NIP-01 addressable events use it ("" when absent). */
export function dTag(e: NostrEvent): string {
  for (const t of e.tags) if (t[0] === "d") return t[1] ?? "";
  return "";
}

/** Now in Nostr's clock: seconds since the epoch, as created_at counts. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);
