// NIP-43 relay access metadata and requests, the pure part: the kinds, the tags of the events the
// relay signs (the member list, a member added or removed, an invite), and what a user's join or
// leave request carries. Every one of them has the NIP-70 `-` tag: the relay's own are protected
// (nobody else may republish them here), and a user's request is accepted only from its
// authenticated author. The relay's side is relay/membership.ts; the members are access/members.ts.
import { isHex64, type NostrEvent } from "../protocol/event.ts";

/** The relay's member list (replaceable), signed by NIP-11 `self`. */
export const MEMBER_LIST = 13534;
/** The relay announces a member added. */
export const ADD = 8000;
/** The relay announces a member removed. */
export const REMOVE = 8001;
/** A user asks to join, with an invite code (`claim`). Ephemeral: never stored, never fanned out. */
export const JOIN = 28934;
/** An invite code the relay hands to whoever asks for kind 28935 (ephemeral, on that subscription only). */
export const INVITE = 28935;
/** A user asks to leave. */
export const LEAVE = 28936;

/** An event for the relay to sign: created_at is set when it is signed. */
export interface Nip43Template {
  kind: number;
  content: string;
  tags: string[][];
}

const PROTECTED = ["-"];

/** 13534: the members, in the order given (the caller picks which and how many). */
export const memberListTemplate = (members: Iterable<string>): Nip43Template => ({
  kind: MEMBER_LIST,
  content: "",
  tags: [PROTECTED, ...Array.from(members, (pk) => ["member", pk])],
});

/** 8000 (added) or 8001 (removed) for one member. */
export const memberChangeTemplate = (kind: typeof ADD | typeof REMOVE, pubkey: string): Nip43Template => ({
  kind,
  content: "",
  tags: [PROTECTED, ["p", pubkey]],
});

/** 28935: one invite code. */
export const inviteTemplate = (code: string): Nip43Template => ({ kind: INVITE, content: "", tags: [PROTECTED, ["claim", code]] });

/** The invite code a join request (or an invite) carries: its first `claim` tag's value, trimmed; undefined when absent or empty. */
export function claimOf(e: Pick<NostrEvent, "tags">): string | undefined {
  const value = e.tags.find((t) => t[0] === "claim")?.[1]?.trim();
  return value ? value : undefined;
}

/** A user's join (28934) or leave (28936): answered by the relay itself, never stored or fanned out. */
export const isRelayRequest = (kind: number): boolean => kind === JOIN || kind === LEAVE;

/** The members a stored 13534 lists (64-hex `member` tags only), in its order. */
export const membersOf = (e: Pick<NostrEvent, "tags">): string[] =>
  e.tags.filter((t) => t[0] === "member" && t[1] !== undefined && isHex64(t[1])).map((t) => t[1]!);

/** Is `created_at` within `windowS` seconds of `now` (a join or leave must be made now, against replays)? */
export const isFresh = (createdAt: number, now: number, windowS: number): boolean => Math.abs(createdAt - now) <= windowS;
