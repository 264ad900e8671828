// NIP-86 relay management API (pure): the method table and the parsing of a call's params.
// What each method does to the relay is in admin/state.ts; the NIP-29 group methods (bunstr's
// own) in http/admin-groups.ts, which reaches the group state; the admission methods (bunstr's,
// issue 33) in http/admin-access.ts, which reaches the registry.
import type { Config } from "../config/schema.ts";
import { GROUP_ID_RULE, isGroupId } from "./nip29.ts";

export const RPC_CONTENT_TYPE = "application/nostr+json+rpc";

/** Role fields of createrole / editrole: [id, label, description, color, order]. */
interface Role {
  id: string;
  label: string;
  description: string;
  color: string;
  order: number;
}

export type AdminCall =
  | { method: "supportedmethods" }
  | { method: "banpubkey" | "unbanpubkey" | "allowpubkey" | "unallowpubkey"; pubkey: string; reason: string }
  | {
      method:
        | "listbannedpubkeys"
        | "listallowedpubkeys"
        | "listeventsneedingmoderation"
        | "listbannedevents"
        | "listallowedkinds"
        | "listdisallowedkinds"
        | "listblockedips";
    }
  | { method: "allowevent" | "banevent"; id: string; reason: string }
  /** bunstr's (issue 34): what banpubkey / banevent would take away, asked before (the console's confirmation). */
  | { method: "previewbanpubkey"; pubkey: string }
  | { method: "previewbanevent"; id: string }
  | { method: "changerelayname" | "changerelaydescription" | "changerelayicon"; value: string }
  | { method: "allowkind" | "disallowkind" | "resetkind"; kind: number }
  | { method: "blockip"; ip: string; reason: string }
  | { method: "unblockip"; ip: string }
  | { method: "createrole" | "editrole"; role: Role }
  | { method: "deleterole"; id: string }
  | { method: "assignrole" | "unassignrole"; pubkey: string; role: string }
  | GroupCall
  | AccessCall;

/** bunstr's NIP-29 methods: the groups of this relay, read and moderated by its operator. */
export type GroupCall =
  | { method: "listgroups" }
  | { method: "listgroupmembers" | "listgroupinvites"; group: string }
  | { method: "removegroupmember"; group: string; pubkey: string; reason: string }
  | { method: "deletegroup"; group: string; reason: string }
  /** code: "" asks the relay to make one up. */
  | { method: "creategroupinvite"; group: string; code: string };

/**
 * bunstr's admission methods (issue 33; http/admin-access.ts): who is admitted and why, and the
 * NIP-43 members. Listed by supportedmethods only while their model is on (accessMethodsOff).
 */
export type AccessCall =
  /** basis "": the stored admissions (paid, verified, member); "trusted": the web of trust; "manual": the allow lists. */
  | { method: "listadmissions"; basis: string; offset: number }
  | { method: "revokeadmission"; pubkey: string; basis: string; reason: string }
  | { method: "listinvoices" | "listmembers" | "createinvitecode" }
  | { method: "addmember" | "removemember"; pubkey: string; reason: string };

export const ACCESS_METHODS: readonly AccessCall["method"][] = [
  "listadmissions",
  "revokeadmission",
  "listinvoices",
  "addmember",
  "removemember",
  "listmembers",
  "createinvitecode",
];

export const isAccessCall = (c: AdminCall): c is AccessCall => (ACCESS_METHODS as readonly string[]).includes(c.method);

/** The admission methods whose model is off (supportedmethods leaves them out; a call answers why). */
export function accessMethodsOff(config: Config): readonly string[] {
  const pay = config.pay_to_relay.enabled;
  const members = config.membership.enabled;
  const any = pay || members || config.verified_users.mode !== "disabled" || config.web_of_trust.enabled;
  return ACCESS_METHODS.filter((m) => (m === "listinvoices" ? !pay : m === "listadmissions" || m === "revokeadmission" ? !any : !members));
}

/** The admission bases a call may name (policy/admission.ts BASES; nips/ sits above policy/). */
const BASES = ["paid", "verified", "trusted", "member", "manual"];

type AdminMethod = AdminCall["method"];

/** The group methods, answered only while [groups] enabled (listed by supportedmethods then). */
export const GROUP_METHODS: readonly GroupCall["method"][] = [
  "listgroups",
  "listgroupmembers",
  "removegroupmember",
  "deletegroup",
  "creategroupinvite",
  "listgroupinvites",
];

export const isGroupCall = (c: AdminCall): c is GroupCall => (GROUP_METHODS as readonly string[]).includes(c.method);

/**
 * Every method, in the NIP's order (supportedmethods answers with this list). Some are bunstr's
 * own: NIP-86 has no way back from its kind lists (resetkind takes a kind off both the allowed
 * and the disallowed list, listdisallowedkinds shows the latter), and no way to learn what a ban
 * will take away before it is made (previewbanpubkey, previewbanevent: how many stored events,
 * hidden or deleted, and for how long they can still come back).
 */
export const ADMIN_METHODS: readonly AdminMethod[] = [
  "supportedmethods",
  "banpubkey",
  "unbanpubkey",
  "listbannedpubkeys",
  "allowpubkey",
  "unallowpubkey",
  "listallowedpubkeys",
  "createrole",
  "editrole",
  "deleterole",
  "assignrole",
  "unassignrole",
  "listeventsneedingmoderation",
  "allowevent",
  "banevent",
  "listbannedevents",
  "previewbanpubkey",
  "previewbanevent",
  "changerelayname",
  "changerelaydescription",
  "changerelayicon",
  "allowkind",
  "disallowkind",
  "listallowedkinds",
  "resetkind",
  "listdisallowedkinds",
  "blockip",
  "unblockip",
  "listblockedips",
  ...GROUP_METHODS,
  ...ACCESS_METHODS,
];

const HEX64 = /^[0-9a-f]{64}$/;
const MAX_TEXT = 2000;

class ParamError extends Error {}

function text(v: unknown, what: string, optional = false): string {
  if (v === undefined && optional) return "";
  if (typeof v !== "string") throw new ParamError(`${what} must be a string`);
  if (v.length > MAX_TEXT) throw new ParamError(`${what} is longer than ${MAX_TEXT} characters`);
  return v;
}

function hex64(v: unknown, what: string): string {
  if (typeof v !== "string" || !HEX64.test(v.toLowerCase())) throw new ParamError(`${what} must be 64 hex characters`);
  return v.toLowerCase();
}

/** An icon: an absolute http(s) URL, or "" for none. */
function iconUrl(v: unknown): string {
  const s = text(v, "icon").trim();
  if (s === "") return s;
  let u: URL | undefined;
  try {
    u = new URL(s);
  } catch {
    u = undefined;
  }
  if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || !/^https?:\/\//i.test(s))
    throw new ParamError('icon must be an http:// or https:// URL (or "" for none)');
  return s;
}

function groupId(v: unknown): string {
  if (typeof v !== "string" || !isGroupId(v)) throw new ParamError(GROUP_ID_RULE);
  return v;
}

/** An invite code as a 9009's code tag carries it: printable, no spaces, at most 64 characters. */
function inviteCode(v: unknown): string {
  if (v === undefined || v === "") return "";
  if (typeof v !== "string" || !/^[\x21-\x7e]{1,64}$/.test(v))
    throw new ParamError("invite code must be 1-64 printable characters without spaces");
  return v;
}

function basis(v: unknown, optional: boolean): string {
  if ((v === undefined || v === "") && optional) return "";
  if (typeof v !== "string" || !BASES.includes(v)) throw new ParamError(`basis must be one of ${BASES.join(", ")}`);
  return v;
}

function offset(v: unknown): number {
  if (v === undefined) return 0;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw new ParamError("offset must be a whole number");
  return v;
}

function ip(v: unknown): string {
  const s = text(v, "ip address").trim();
  // IPv4 dotted quad or an IPv6 literal; the relay compares addresses as it sees them.
  if (!/^(\d{1,3}\.){3}\d{1,3}$/.test(s) && !/^[0-9a-fA-F:.]{2,45}$/.test(s)) throw new ParamError("not an IP address");
  return s.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "").toLowerCase();
}

function role(p: unknown[]): Role {
  const order = p[4] === undefined ? 0 : p[4];
  if (typeof order !== "number" || !Number.isSafeInteger(order)) throw new ParamError("role order must be an integer");
  return {
    id: text(p[0], "role id"),
    label: text(p[1], "role label", true),
    description: text(p[2], "role description", true),
    color: text(p[3], "role color", true),
    order,
  };
}

function call(method: string, p: unknown[]): AdminCall {
  switch (method) {
    case "supportedmethods":
    case "listbannedpubkeys":
    case "listallowedpubkeys":
    case "listeventsneedingmoderation":
    case "listbannedevents":
    case "listallowedkinds":
    case "listdisallowedkinds":
    case "listblockedips":
      return { method };
    case "banpubkey":
    case "unbanpubkey":
    case "allowpubkey":
    case "unallowpubkey":
      return { method, pubkey: hex64(p[0], "pubkey"), reason: text(p[1], "reason", true) };
    case "allowevent":
    case "banevent":
      return { method, id: hex64(p[0], "event id"), reason: text(p[1], "reason", true) };
    case "previewbanpubkey":
      return { method, pubkey: hex64(p[0], "pubkey") };
    case "previewbanevent":
      return { method, id: hex64(p[0], "event id") };
    case "changerelayname":
    case "changerelaydescription":
      return { method, value: text(p[0], method.slice(11)) };
    case "changerelayicon":
      return { method, value: iconUrl(p[0]) };
    case "allowkind":
    case "disallowkind":
    case "resetkind": {
      const kind = p[0];
      if (typeof kind !== "number" || !Number.isInteger(kind) || kind < 0 || kind > 65535)
        throw new ParamError("kind must be an integer from 0 to 65535");
      return { method, kind };
    }
    case "blockip":
      return { method, ip: ip(p[0]), reason: text(p[1], "reason", true) };
    case "unblockip":
      return { method, ip: ip(p[0]) };
    case "createrole":
    case "editrole":
      return { method, role: role(p) };
    case "deleterole":
      return { method, id: text(p[0], "role id") };
    case "assignrole":
    case "unassignrole":
      return { method, pubkey: hex64(p[0], "pubkey"), role: text(p[1], "role id") };
    case "listgroups":
      return { method };
    case "listgroupmembers":
    case "listgroupinvites":
      return { method, group: groupId(p[0]) };
    case "removegroupmember":
      return { method, group: groupId(p[0]), pubkey: hex64(p[1], "pubkey"), reason: text(p[2], "reason", true) };
    case "deletegroup":
      return { method, group: groupId(p[0]), reason: text(p[1], "reason", true) };
    case "creategroupinvite":
      return { method, group: groupId(p[0]), code: inviteCode(p[1]) };
    case "listadmissions":
      return { method, basis: basis(p[0], true), offset: offset(p[1]) };
    case "revokeadmission":
      return { method, pubkey: hex64(p[0], "pubkey"), basis: basis(p[1], false), reason: text(p[2], "reason", true) };
    case "listinvoices":
    case "listmembers":
    case "createinvitecode":
      return { method };
    case "addmember":
    case "removemember":
      return { method, pubkey: hex64(p[0], "pubkey"), reason: text(p[1], "reason", true) };
    default:
      throw new ParamError(`unsupported method: ${method.slice(0, 64)}`);
  }
}

/** A request body's call, or the error to answer with. */
export function parseAdminCall(body: string): AdminCall | { error: string } {
  let req: unknown;
  try {
    req = JSON.parse(body);
  } catch {
    return { error: "request body is not JSON" };
  }
  const { method, params } = (req ?? {}) as { method?: unknown; params?: unknown };
  if (typeof method !== "string") return { error: "method must be a string" };
  if (params !== undefined && !Array.isArray(params)) return { error: "params must be an array" };
  try {
    return call(method, params ?? []);
  } catch (err) {
    if (err instanceof ParamError) return { error: `${method}: ${err.message}` };
    throw err;
  }
}
