// NIP-29 relay-based groups, the pure part: which events belong to a group, what a moderation
// event asks for (parseAction), how an edit changes the metadata, and the tags of the events
// the relay signs about a group (39000-39005). The state itself is groups/state.ts.
import { isHex64, type NostrEvent } from "../protocol/event.ts";
import { MAX_KIND } from "../protocol/kinds.ts";

/** put-user, remove-user, edit-metadata, delete-event, create-group, delete-group, create-invite, update-pin-list. */
export const GROUP_MODERATION_KINDS: readonly number[] = [9000, 9001, 9002, 9005, 9007, 9008, 9009, 9010];
export const JOIN = 9021;
export const LEAVE = 9022;
/** The relay-signed kinds this relay publishes (39004, livekit participants, is not built). */
export const RELAY_GROUP_KINDS: readonly number[] = [39000, 39001, 39002, 39003, 39005];
export type RelayGroupKind = 39000 | 39001 | 39002 | 39003 | 39005;
/** What the group state is rebuilt from: every moderation event, joins and leaves, and the relay's own 39xxx. */
export const REBUILD_KINDS: readonly number[] = [...GROUP_MODERATION_KINDS, JOIN, LEAVE, 39000, 39001, 39002, 39003, 39004, 39005];

/** 39000-39009: addressable events only the relay key signs. */
export const isRelayGroupKind = (kind: number): boolean => kind >= 39000 && kind <= 39009;
/** 9000-9022: the range NIP-29 keeps for moderation, joins and leaves; each needs an h tag. */
export const isGroupActionKind = (kind: number): boolean => kind >= 9000 && kind <= 9022;

export const ROLES = {
  admin: "may do every moderation action, and give and take roles",
  moderator: "may add and remove members, delete events, create invites and pin; not on admins, not roles",
} as const;
export type Role = keyof typeof ROLES;
/** Strongest first: 39001 carries one role per member (nostr-tools reads a second one as a permission). */
const ROLE_ORDER: readonly Role[] = ["admin", "moderator"];
const isRole = (s: string): s is Role => Object.hasOwn(ROLES, s);

const GROUP_ID = /^[a-zA-Z0-9_-]{1,64}$/;
export const isGroupId = (s: string): boolean => GROUP_ID.test(s);
export const GROUP_ID_RULE = "group id must be 1-64 characters of a-z, A-Z, 0-9, - and _";

const tagValue = (e: NostrEvent, name: string): string | undefined => e.tags.find((t) => t[0] === name)?.[1];

/** Every h value (an event must have at most one). */
export const hTags = (e: NostrEvent): string[] => e.tags.filter((t) => t[0] === "h" && t[1] !== undefined).map((t) => t[1]!);

/**
 * The group an event is about: its h tag, or the d tag of a 39000-39009 the relay signed
 * (metadata). `relay`: the relay's pubkey, or all its keys (the current one and former ones).
 */
export function groupOf(e: NostrEvent, relay: string | ReadonlySet<string>): { id: string; metadata: boolean } | undefined {
  if (isRelayGroupKind(e.kind) && (typeof relay === "string" ? e.pubkey === relay : relay.has(e.pubkey))) {
    const d = tagValue(e, "d");
    return d === undefined ? undefined : { id: d, metadata: true };
  }
  const h = tagValue(e, "h");
  return h === undefined ? undefined : { id: h, metadata: false };
}

/** Timeline references: every value of every previous tag, in order (nostr-tools puts them all in one tag). */
export const previousRefs = (e: NostrEvent): string[] => e.tags.filter((t) => t[0] === "previous").flatMap((t) => t.slice(1));

export interface GroupMetadata {
  name: string;
  picture: string;
  banner: string;
  about: string;
  private: boolean;
  restricted: boolean;
  hidden: boolean;
  closed: boolean;
  livekit: boolean;
  /** Absent: every kind (or [groups] default_kinds); empty: none. */
  supportedKinds?: number[];
  /** Subgroups: the parent group, and the admin whose 9002 set it (NIP-29 "admin attestation"). Absent: a root. */
  parent?: { id: string; by: string };
  /** The children this group declares (each a child tag without its name: id, then order and flags if given). */
  children?: string[][];
  /** Only the declared children are legitimate ("closed-children"). */
  closedChildren?: boolean;
}

export const emptyMetadata = (): GroupMetadata => ({
  name: "",
  picture: "",
  banner: "",
  about: "",
  private: false,
  restricted: false,
  hidden: false,
  closed: false,
  livekit: false,
});

type Field = "name" | "picture" | "banner" | "about";
type Flags = Omit<GroupMetadata, Field>;
export interface MetadataEdit {
  fields: Partial<Pick<GroupMetadata, Field>>;
  /** A key present (supportedKinds, parent, children: even as undefined) is set; an absent one kept. */
  flags?: Partial<Flags>;
}

const FIELDS: readonly Field[] = ["name", "picture", "banner", "about"];
const FLAG_TAGS = ["private", "restricted", "hidden", "closed", "livekit"] as const;
/** relay29's and NDK's spellings of a flag turned off. */
const OFF_TAGS: Record<string, (typeof FLAG_TAGS)[number]> = {
  public: "private",
  unrestricted: "restricted",
  visible: "hidden",
  open: "closed",
};

/**
 * A 9002's edit. Fields present replace, absent keep. A 9002 that carries any flag tag (or
 * supported_kinds) states the whole flag set, as nostr-tools sends it: absent flags turn off. One
 * that carries none keeps the flags (NDK's partial edit of name and about cannot open a private
 * group). public, open, unrestricted and visible turn their flag off. Tags are read by name only
 * (NDK writes ["private", ""]).
 */
function parseEdit(e: NostrEvent): MetadataEdit | string {
  const fields: MetadataEdit["fields"] = {};
  const names = new Set(e.tags.map((t) => t[0]));
  for (const f of FIELDS) {
    const v = tagValue(e, f);
    if (v !== undefined) fields[f] = v;
  }
  const whole = FLAG_TAGS.some((f) => names.has(f)) || names.has("supported_kinds");
  const flags: Partial<Flags> = {};
  if (whole) {
    for (const f of FLAG_TAGS) flags[f] = names.has(f);
    flags.supportedKinds = undefined;
  }
  const kinds = e.tags.find((t) => t[0] === "supported_kinds");
  if (kinds) {
    const values = kinds.slice(1).filter((v) => v !== "");
    if (values.some((v) => !/^\d{1,5}$/.test(v) || Number(v) > MAX_KIND)) return "supported_kinds values must be kind numbers";
    flags.supportedKinds = [...new Set(values.map(Number))];
  }
  for (const [off, flag] of Object.entries(OFF_TAGS)) if (names.has(off)) flags[flag] = false;
  const tree = parseTree(e, names, whole, flags);
  if (tree) return tree;
  return Object.keys(flags).length > 0 ? { fields, flags } : { fields };
}

/**
 * Subgroups: `["parent", id]` (empty: a root), `["child", id, order?, flags?]`, `["closed-children"]`.
 * Present, they replace; absent, a whole flag set (nostr-tools) detaches and clears them, a
 * partial edit keeps them. Writes into `flags`; returns why the tags are malformed.
 */
function parseTree(e: NostrEvent, names: ReadonlySet<string | undefined>, whole: boolean, flags: Partial<Flags>): string | undefined {
  const parents = e.tags.filter((t) => t[0] === "parent");
  if (parents.length > 1) return "a group has at most one parent tag";
  const parent = parents[0]?.[1] ?? "";
  if (parent !== "" && !isGroupId(parent)) return `parent: ${GROUP_ID_RULE}`;
  if (parents.length === 1 || whole) flags.parent = parent === "" ? undefined : { id: parent, by: e.pubkey };
  const children = e.tags.filter((t) => t[0] === "child");
  if (children.length > MAX_TARGETS) return `too many child tags (max ${MAX_TARGETS})`;
  if (children.some((t) => !isGroupId(t[1] ?? ""))) return `child: ${GROUP_ID_RULE}`;
  if (children.length > 0 || names.has("closed-children") || whole) {
    flags.children = children.length > 0 ? children.map((t) => t.slice(1)) : undefined;
    flags.closedChildren = names.has("closed-children");
  }
  return undefined;
}

export function applyEdit(m: GroupMetadata, edit: MetadataEdit): GroupMetadata {
  const out: GroupMetadata = { ...m, ...edit.fields };
  const flags = edit.flags ?? {};
  for (const f of FLAG_TAGS) if (flags[f] !== undefined) out[f] = flags[f];
  if ("supportedKinds" in flags) {
    if (flags.supportedKinds === undefined) delete out.supportedKinds;
    else out.supportedKinds = [...flags.supportedKinds];
  }
  // The same parent named again keeps its attestation (the admin who set it first).
  if ("parent" in flags && flags.parent?.id !== m.parent?.id) {
    if (flags.parent === undefined) delete out.parent;
    else out.parent = { ...flags.parent };
  }
  if ("children" in flags) {
    if (flags.children === undefined) delete out.children;
    else out.children = flags.children.map((c) => [...c]);
  }
  if (flags.closedChildren !== undefined) out.closedChildren = flags.closedChildren;
  return out;
}

export type Action =
  | { kind: 9000; targets: { pubkey: string; roles: Role[] }[]; afterJoin?: string } // afterJoin: the relay's answer to a 9021 (its e tag)
  | { kind: 9001; targets: string[]; afterLeave?: string } // afterLeave: the relay's answer to a 9022 (its e tag)
  | { kind: 9002; edit: MetadataEdit }
  | { kind: 9005; ids: string[] }
  | { kind: 9007 }
  | { kind: 9008 }
  | { kind: 9009; code: string }
  | { kind: 9010; pins: ["e" | "a", string][] }
  | { kind: 9021; code?: string }
  | { kind: 9022 };

/** p, e tags per moderation event: bounds what one event can make the relay do. */
export const MAX_TARGETS = 100;
const ADDRESS = /^\d{1,5}:[0-9a-f]{64}:.*$/;
const CODE = /^.{1,128}$/s;

function parseTargets(e: NostrEvent): { pubkey: string; roles: Role[] }[] | string {
  const ps = e.tags.filter((t) => t[0] === "p");
  if (ps.length === 0 || ps.some((t) => !isHex64(t[1]))) return `${e.kind} needs a p tag with a 64-hex pubkey`;
  if (ps.length > MAX_TARGETS) return `too many p tags (max ${MAX_TARGETS})`;
  const targets: { pubkey: string; roles: Role[] }[] = [];
  for (const t of ps) {
    const named = t.slice(2).filter((r) => r !== "");
    const unknown = named.find((r) => !isRole(r));
    if (unknown !== undefined) return `unknown role "${unknown}" (roles: ${ROLE_ORDER.join(", ")})`;
    const strongest = ROLE_ORDER.find((r) => named.includes(r));
    targets.push({ pubkey: t[1]!, roles: strongest ? [strongest] : [] });
  }
  return targets;
}

function parsePins(e: NostrEvent): ["e" | "a", string][] | string {
  const pins: ["e" | "a", string][] = [];
  for (const t of e.tags) {
    if (t[0] !== "e" && t[0] !== "a") continue;
    const ok = t[0] === "e" ? isHex64(t[1]) : ADDRESS.test(t[1] ?? "");
    if (!ok) return "9010 pins must be e tags of 64-hex ids or a tags of kind:pubkey:d";
    pins.push([t[0], t[1]!]);
  }
  return pins;
}

/** A moderation event, join or leave as an action, or why it is malformed (the refusal's message; prefix "invalid"). */
export function parseAction(e: NostrEvent): Action | string {
  switch (e.kind) {
    case 9000: {
      const targets = parseTargets(e);
      if (typeof targets === "string") return targets;
      const afterJoin = tagValue(e, "e");
      return afterJoin !== undefined && isHex64(afterJoin) ? { kind: 9000, targets, afterJoin } : { kind: 9000, targets };
    }
    case 9001: {
      const targets = parseTargets(e);
      if (typeof targets === "string") return targets;
      const afterLeave = tagValue(e, "e");
      const action: Action = { kind: 9001, targets: targets.map((t) => t.pubkey) };
      return afterLeave !== undefined && isHex64(afterLeave) ? { ...action, afterLeave } : action;
    }
    case 9002: {
      const edit = parseEdit(e);
      return typeof edit === "string" ? edit : { kind: 9002, edit };
    }
    case 9005: {
      const ids = e.tags.filter((t) => t[0] === "e").map((t) => t[1]);
      if (ids.length === 0 || ids.length > MAX_TARGETS || !ids.every(isHex64)) return `9005 needs 1-${MAX_TARGETS} e tags of 64-hex ids`;
      return { kind: 9005, ids };
    }
    case 9007:
    case 9008:
    case 9022:
      return { kind: e.kind };
    case 9009: {
      const code = tagValue(e, "code");
      return code !== undefined && CODE.test(code) ? { kind: 9009, code } : "9009 needs a code tag (1-128 characters)";
    }
    case 9010: {
      const pins = parsePins(e);
      return typeof pins === "string" ? pins : { kind: 9010, pins };
    }
    case 9021: {
      const code = tagValue(e, "code");
      return code ? { kind: 9021, code } : { kind: 9021 };
    }
    default:
      return `kind ${e.kind} is not a group action this relay knows`;
  }
}

/**
 * A group the read rule gates: its events (h) read by its members only (private, or deleted: it
 * has none), its relay-signed 39000-39009 (d) likewise (hidden, or deleted). What the store's
 * group_gates table holds, and what a read's residual asks of it.
 */
export interface GroupGate {
  group: string;
  events: boolean;
  metadata: boolean;
}

/**
 * What committing `e` may gate, raised by the writer in the transaction that stores it, before
 * the group state (which re-validates it at its commit) has seen it: a 9002 naming `private`
 * gates the group's events, one naming `hidden` its metadata, a 9008 both. Only ever raised
 * there: the state lowers a gate that an event it skipped, or one that opened the group, left
 * (relay/groups.ts), so no event of a group gated by its commit is read by a non-member meanwhile.
 */
export function raisedGate(e: NostrEvent): GroupGate | undefined {
  if (e.kind !== 9002 && e.kind !== 9008) return undefined;
  const h = hTags(e);
  if (h.length !== 1 || !isGroupId(h[0]!)) return undefined;
  if (e.kind === 9008) return { group: h[0]!, events: true, metadata: true };
  const edit = parseEdit(e);
  if (typeof edit === "string") return undefined;
  const events = edit.flags?.private === true;
  const metadata = edit.flags?.hidden === true;
  return events || metadata ? { group: h[0]!, events, metadata } : undefined;
}

export interface GroupSnapshot {
  id: string;
  meta: GroupMetadata;
  /** In the order members came (a Map keeps it): the newest last. */
  members: ReadonlyMap<string, readonly Role[]>;
  pins: readonly ["e" | "a", string][];
}

const rank = (roles: readonly Role[]): number => (roles.length === 0 ? ROLE_ORDER.length : ROLE_ORDER.indexOf(roles[0]!));

/** Role holders, strongest first, each group in the order they came. */
function roleHolders(g: GroupSnapshot): [string, Role][] {
  const held = [...g.members].filter(([, roles]) => roles.length > 0);
  return held.sort((a, b) => rank(a[1]) - rank(b[1])).map(([pk, roles]) => [pk, roles[0]!]);
}

/** 39002 lists at most `maxListed`: role holders first, then the newest members (the NIP allows a subset). */
function listedMembers(g: GroupSnapshot, maxListed: number): string[] {
  const listed = roleHolders(g).map(([pk]) => pk);
  const plain = [...g.members].filter(([, roles]) => roles.length === 0).map(([pk]) => pk);
  for (let i = plain.length - 1; i >= 0 && listed.length < maxListed; i--) listed.push(plain[i]!);
  return listed.slice(0, maxListed);
}

function metadataTags(m: GroupMetadata): string[][] {
  const tags: string[][] = [];
  for (const f of FIELDS) if (m[f] !== "") tags.push([f, m[f]]);
  for (const f of FLAG_TAGS) if (m[f]) tags.push([f]);
  if (m.supportedKinds) tags.push(["supported_kinds", ...m.supportedKinds.map(String)]);
  if (m.parent) tags.push(["parent", m.parent.id, m.parent.by]);
  for (const c of m.children ?? []) tags.push(["child", ...c]);
  if (m.closedChildren) tags.push(["closed-children"]);
  return tags;
}

/** The tags of the relay-signed event of `kind` for a group, ["d", id] first. */
export function renderTags(kind: RelayGroupKind, g: GroupSnapshot, maxListed = Infinity): string[][] {
  const d = ["d", g.id];
  switch (kind) {
    case 39000:
      return [d, ...metadataTags(g.meta)];
    case 39001:
      return [d, ...roleHolders(g).map(([pk, role]) => ["p", pk, role])];
    case 39002:
      return [d, ...listedMembers(g, maxListed).map((pk) => ["p", pk])];
    case 39003:
      return [d, ...ROLE_ORDER.map((r) => ["role", r, ROLES[r]])];
    case 39005:
      return [d, ...g.pins.map(([t, v]) => [t, v])];
  }
}
