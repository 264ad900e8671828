// Who may read what, in one place. Kinds in [authorization] restricted_read_kinds (DMs, gift
// wraps) are shown only to their author and the pubkeys they p-tag, once the connection
// authenticated as one of them (NIP-42). With [groups] enabled (NIP-29), an event of a private
// group (its h tag) is shown only to the group's members, and the relay's 39000-39009 of a hidden
// group (their d tag) too, and its records (9000-9022, by h: they name its members). The rule is
// applied wherever an event could leave the relay: a
// request is admitted with one Reader (readerFor), which the stored read (its Visibility: the
// store filters by it), the catch-up and COUNT and NIP-77 ask; live fanout asks canRead per
// member at each event (so a member removed gets nothing more at once); memory's answers never
// serve a gated event (gated); in-memory search matching (filterLimits) and the full-text index
// leave restricted kinds out (writeRules). What a ban hides until its retention ends (issue 34,
// admin/state.ts) is left out of every stored read for everyone (Visibility.hidden); nothing of it
// is sent live, since a banned author's new events and a banned event are refused on write.
// With [authorization] read = "members" (issue 33) only
// connections authenticated as an admitted pubkey read (memberRefusal, canRead), but for the
// restricted kinds addressed to them: every event is gated then, asked member by member.
import { setOf, type Config } from "../config/schema.ts";
import { groupOf, isRelayGroupKind } from "../nips/nip29.ts";
import { compileSearch, searchSyntax } from "../nips/nip50.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { CompiledFilter, FilterLimits } from "../protocol/filter.ts";
import { ProtocolError } from "../protocol/reasons.ts";
import { groupRecord } from "../store/semantics.ts";
import type { HiddenReads, Visibility } from "../store/types.ts";
import type { WriteRules } from "../store/types.ts";
import { ADMISSION_TEXTS, joinUrl, type AdmissionView } from "./admission.ts";
import type { GroupView } from "./groups.ts";

/** What the read rule reads: the config, the group state, the relay's key and the admissions (RelayContext satisfies it). */
export interface ReadRules {
  readonly config: Config;
  readonly groups?: GroupView;
  readonly relayKey?: { readonly pubkey: string };
  /** Issue 33: who is admitted (access/registry.ts), for read = "members". */
  readonly access?: AdmissionView;
  /** Issue 34: what bans hide now (admin/state.ts AdminState.hiding). */
  readonly admin?: { readonly hiding: HiddenReads | undefined };
}

/** [authorization] read = "members": only admitted pubkeys read. */
const membersOnly = (r: ReadRules): boolean => r.config.authorization.read === "members";

/** One of these pubkeys is admitted now (any enabled model, or manual: the allow lists, [admin] pubkeys, the relay key). */
export function isMember(r: ReadRules, authed: ReadonlySet<string>): boolean {
  if (!r.access) return false;
  for (const pk of authed) if (r.access.bits(pk) !== 0) return true;
  return false;
}

/**
 * read = "members": the refusal of a request (CLOSED, NEG-ERR) from a reader who is not a member,
 * unless every filter asks only for restricted kinds (DMs, gift wraps), left to their own rule so
 * that a members' inbox still delivers to its recipients.
 */
export function memberRefusal(r: ReadRules, authed: ReadonlySet<string>, filters: readonly CompiledFilter[]): string | undefined {
  if (!membersOnly(r)) return undefined;
  const restricted = restrictedKinds(r.config);
  if (filters.length > 0 && filters.every((f) => f.kinds && f.kinds.size > 0 && [...f.kinds].every((k) => restricted.has(k))))
    return undefined;
  if (authed.size === 0) return `auth-required: ${ADMISSION_TEXTS.readAuth}`;
  if (isMember(r, authed)) return undefined;
  // Until the rows are read, or the first trust graph is built, a member may not be known yet:
  // "try again", as writers hear (issue 33 review, L9), not "restricted".
  if (r.access && !r.access.ready) return `error: ${ADMISSION_TEXTS.loading}`;
  if (r.access?.trustLoading) return `error: ${ADMISSION_TEXTS.trustLoading}`;
  const pay = r.config.pay_to_relay;
  const join = pay.enabled && pay.sign_ups ? `: join at ${joinUrl(r.config, [...authed][0]!)}` : "";
  return `restricted: ${ADMISSION_TEXTS.readMembers}${join}`;
}

/**
 * NIP-29 invite codes: a 9009 (create-invite) carries a group's code, so with groups on it is read
 * only as a direct message is, by its author (the moderator who made the code) and the pubkeys it
 * p-tags; the relay's admin lists codes over NIP-86 listgroupinvites. A closed group's code is
 * otherwise anyone's to join with. (A 9021 that used a code stays readable: the state is rebuilt
 * from the 9021s, and a sync or an export must carry them.)
 */
const INVITE_KINDS = [9009];
const withInvites = new WeakMap<readonly number[], number[]>();

/** The kinds only their author and the pubkeys they p-tag may read, as a list (the store's Visibility). */
export function restrictedKindList(config: Config): number[] {
  const base = config.authorization.restricted_read_kinds;
  if (!config.groups.enabled) return base;
  let kinds = withInvites.get(base);
  if (!kinds) withInvites.set(base, (kinds = [...new Set([...base, ...INVITE_KINDS])]));
  return kinds;
}

export const restrictedKinds = (config: Config): ReadonlySet<number> => setOf(restrictedKindList(config));

/** The group state, while [groups] is enabled. */
const groupsOn = (r: ReadRules): GroupView | undefined => (r.config.groups.enabled ? r.groups : undefined);

const relaySets = new WeakMap<readonly string[], Map<string, ReadonlySet<string>>>();

/**
 * The relay's keys: its own and those it had before ([groups] former_relay_keys), whose 39xxx are
 * a group's metadata too (a hidden group's name and members stay hidden after a key change).
 */
export function relayKeys(r: ReadRules): ReadonlySet<string> {
  const former = r.config.groups.former_relay_keys;
  const current = r.relayKey?.pubkey ?? "";
  let byCurrent = relaySets.get(former);
  if (!byCurrent) relaySets.set(former, (byCurrent = new Map()));
  let keys = byCurrent.get(current);
  if (!keys) byCurrent.set(current, (keys = new Set([current, ...former].filter((k) => k !== ""))));
  return keys;
}

const relayLists = new WeakMap<ReadonlySet<string>, readonly string[]>();
/** relayKeys as a list (the store's Visibility), one per set. */
function relayKeyList(r: ReadRules): readonly string[] {
  const keys = relayKeys(r);
  let list = relayLists.get(keys);
  if (!list) relayLists.set(keys, (list = [...keys]));
  return list;
}

/**
 * An event of a group (an h tag, or the relay's 39000-39009, by any of its keys): only some may
 * read it, now or after a change of the group. Static per event.
 */
export function groupGated(r: ReadRules, e: NostrEvent): boolean {
  if (!groupsOn(r)) return false;
  if (isRelayGroupKind(e.kind) && relayKeys(r).has(e.pubkey)) return true;
  for (const t of e.tags) if (t[0] === "h") return true;
  return false;
}

/**
 * Only some may read it: a restricted kind, or a group's event. Fanout sends it member by member;
 * memory's answers never serve it.
 */
export const gated = (r: ReadRules, e: NostrEvent): boolean => membersOnly(r) || restrictedKinds(r.config).has(e.kind) || groupGated(r, e);

/** May a connection authenticated as `authed` read this event? */
export function canRead(r: ReadRules, authed: ReadonlySet<string>, e: NostrEvent): boolean {
  const restricted = restrictedKinds(r.config).has(e.kind);
  if (restricted && !addressedTo(authed, e)) return false;
  // Members only: asked at each event, so a revoked member gets nothing more at once.
  if (!restricted && membersOnly(r) && !isMember(r, authed)) return false;
  const groups = groupsOn(r);
  if (!groups) return true;
  const group = groupOf(e, relayKeys(r));
  if (!group) return true;
  if (!groups.ready) return false;
  if (groups.access(group.id, authed, group.metadata) !== "ok") return false;
  // A hidden group's records (9000-9022) spell out its members: read as its metadata is.
  if (!group.metadata && groupRecord(e.kind, true) && groups.access(group.id, authed, true) !== "ok") return false;
  // An h tag beside the first (refused on write with groups on; stored before they were).
  for (const t of e.tags)
    if (t[0] === "h" && t[1] !== undefined && t[1] !== group.id && groups.access(t[1], authed, false) !== "ok") return false;
  return true;
}

function addressedTo(authed: ReadonlySet<string>, e: NostrEvent): boolean {
  if (authed.has(e.pubkey)) return true;
  for (const t of e.tags) if (t[0] === "p" && t[1] !== undefined && authed.has(t[1])) return true;
  return false;
}

/** An anonymous reader's memberships: none (one object for every such read). */
const NO_MEMBERS: readonly string[] = Object.freeze([]);

/** What a stored read of this connection may return. */
export function visibilityFor(r: ReadRules, authed: ReadonlySet<string>): Visibility {
  const v: Visibility = { restrictedKinds: restrictedKindList(r.config), viewers: [...authed] };
  const hiding = r.admin?.hiding;
  if (hiding) v.hidden = hiding;
  const groups = groupsOn(r);
  if (!groups?.gating) return v;
  // The store knows which groups are gated (group_gates); the reader sends only its own
  // memberships in them, never the list of what it may not read.
  const members = authed.size === 0 ? NO_MEMBERS : groups.memberships(authed);
  v.groups = { members, relays: relayKeyList(r) };
  return v;
}

/**
 * A filter naming a private group in `#h` that this reader may not read: the refusal (CLOSED,
 * NEG-ERR). Hidden metadata (`#d`) and a hidden group's `#h` are not refused: a non-member just
 * gets nothing, so existence is not revealed.
 */
export function groupFilterRefusal(r: ReadRules, authed: ReadonlySet<string>, filters: readonly CompiledFilter[]): string | undefined {
  const groups = groupsOn(r);
  if (!groups) return undefined;
  for (const f of filters)
    for (const [name, values] of f.tags) {
      if (name !== "h") continue;
      for (const id of values) {
        const access = groups.ready ? groups.access(id, authed, false) : authed.size === 0 ? "auth-required" : "restricted";
        // A hidden group (or a deleted one) is answered as an unknown one: nothing, no refusal
        // (the store's residual hides its rows), so its existence is not revealed.
        if (access !== "ok" && groups.ready && groups.access(id, authed, true) !== "ok") continue;
        if (access === "auth-required") return "auth-required: this group is private: authenticate as a member";
        if (access === "restricted") return "restricted: this group is private: members only";
      }
    }
  return undefined;
}

/**
 * One request's reader: who asks and what they may read, decided once when the request is
 * admitted and carried with it (relay/read/req.ts admitFilters) to every stage that sends events:
 * the stored read (visibility), the catch-up and live checks (canRead, which reads the group
 * state as it is now, so a member removed meanwhile reads nothing more).
 */
export interface Reader {
  readonly authed: ReadonlySet<string>;
  /** Issue 33: authenticated as an admitted pubkey when the request was admitted (read = "members"). */
  readonly member: boolean;
  /** For the store: restricted kinds, and the reader's memberships in gated groups (the store knows which are gated). */
  readonly visibility: Visibility;
  /** Kinds only some may read (memory's answers give up on them). */
  readonly restricted: ReadonlySet<number>;
  canRead(e: NostrEvent): boolean;
  /** Needs a per-event check (a restricted kind or a group event): the ring's flag, or the event. */
  gated(e: NostrEvent): boolean;
}

export function readerFor(r: ReadRules, authed: ReadonlySet<string>): Reader {
  return {
    authed,
    member: isMember(r, authed),
    visibility: visibilityFor(r, authed),
    restricted: restrictedKinds(r.config),
    canRead: (e) => canRead(r, authed, e),
    gated: (e) => gated(r, e),
  };
}

/** How REQ filters are compiled: their size limits, and NIP-50 search that never matches a restricted kind. */
export function filterLimits(config: Config): FilterLimits {
  const skip = restrictedKinds(config);
  return {
    maxValues: config.limits.max_filter_values,
    maxValueLength: config.limits.max_filter_value_length,
    compileSearch: config.nips.nip50
      ? (q) => {
          const syntax = searchSyntax(q);
          if (syntax) throw new ProtocolError("invalid", `search syntax NIP-50 does not define (${syntax}): search for plain words`);
          const search = compileSearch(q, skip);
          // Each term is another index a search reads (store/sqlite/query.ts searchWalk).
          const max = config.nips.nip50_max_terms;
          if (search.terms.length > max) throw new ProtocolError("invalid", `a search may have at most ${max} words`);
          return search;
        }
      : undefined,
  };
}

/** What the writer is told: NIP-09 and NIP-62 on or off, and the search index (without restricted kinds). */
export function writeRules(config: Config): WriteRules {
  return { deletion: config.nips.nip09, vanish: config.nips.nip62, search: config.nips.nip50, searchSkipKinds: restrictedKinds(config) };
}
