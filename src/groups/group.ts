// One group's state and who may act on it: `allowed` is shared by judge (at admission) and apply
// (at commit), so a moderation event is held to the same rights both times.
import type { Action, GroupMetadata, Role } from "../nips/nip29.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";
import { PreviousWindow } from "./window.ts";

export interface Group {
  readonly id: string;
  meta: GroupMetadata;
  /** Member -> roles (none, or the strongest one). A Map keeps the order members came. */
  readonly members: Map<string, Role[]>;
  /** Removed by a moderator (9001): may not post nor rejoin until a 9000 puts them back. */
  readonly removed: Set<string>;
  readonly invites: Set<string>;
  pins: ["e" | "a", string][];
  /** 9005 targets: refused if published again into this group. */
  readonly deletedIds: Set<string>;
  readonly window: PreviousWindow;
  readonly createdBy: string;
  readonly createdAt: number;
}

export const newGroup = (
  id: string,
  meta: GroupMetadata,
  createdBy: string,
  createdAt: number,
  windowSize: number,
  cold: boolean,
): Group => ({
  id,
  meta,
  members: new Map(),
  removed: new Set(),
  invites: new Set(),
  pins: [],
  deletedIds: new Set(),
  window: new PreviousWindow(windowSize, cold),
  createdBy,
  createdAt,
});

export const roleOf = (g: Group, pubkey: string): Role | undefined => g.members.get(pubkey)?.[0];
export const admins = (g: Group): number => [...g.members.values()].filter((r) => r[0] === "admin").length;

const noRole = (pubkey: string) => ({ pubkey, roles: [] });
const denied = (kind: number): Refusal => refuse("restricted", `your role in this group cannot do this (kind ${kind})`);
const LAST_ADMIN = refuse("restricted", "the group's last admin cannot be removed");
const NOT_A_MEMBER = refuse("invalid", "not a member of this group");
const LAST_ADMIN_LEAVES = refuse("restricted", "the group's last admin cannot leave: make another member admin (kind 9000) first");

/** Would these targets leave the group without an admin? (The relay key can still act on it.) */
function leavesNoAdmin(g: Group, targets: readonly { pubkey: string; roles: readonly Role[] }[]): boolean {
  let left = admins(g);
  if (left === 0) return false;
  for (const t of targets) if (roleOf(g, t.pubkey) === "admin" && t.roles[0] !== "admin") left--;
  return left <= 0;
}

/**
 * Rights of a moderation action by `author` on `g` (not 9007, 9021, 9022: those are anyone's,
 * under their own rules). `authority`: the relay key or a former one, which may do anything.
 */
export function allowed(g: Group, author: string, authority: boolean, a: Action): Refusal | undefined {
  if (authority) return undefined;
  const role = roleOf(g, author);
  if (!role) return refuse("restricted", "only the group's admins and moderators can do this");
  switch (a.kind) {
    case 9000:
      if (role === "moderator" && a.targets.some((t) => t.roles.length > 0 || roleOf(g, t.pubkey)))
        return refuse("restricted", "a moderator cannot change roles");
      return leavesNoAdmin(g, a.targets) ? LAST_ADMIN : undefined;
    case 9001:
      if (role === "moderator" && a.targets.some((t) => roleOf(g, t))) return refuse("restricted", "a moderator cannot act on an admin");
      return leavesNoAdmin(g, a.targets.map(noRole)) ? LAST_ADMIN : undefined;
    case 9002:
    case 9008:
      return role === "admin" ? undefined : denied(a.kind);
    default:
      return undefined; // 9005, 9009, 9010: admins and moderators
  }
}

/** A leave (9022) by `pubkey`: a member's, and not the last admin's (a group with no admin is left to the relay key alone, as a 9001 of the last admin is refused). */
export function leaveRefusal(g: Group, pubkey: string): Refusal | undefined {
  if (!g.members.has(pubkey)) return NOT_A_MEMBER;
  return leavesNoAdmin(g, [noRole(pubkey)]) ? LAST_ADMIN_LEAVES : undefined;
}
