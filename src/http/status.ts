// What the status page shows besides NIP-11: uptime, stored events, open connections and the
// policies in force, read from config at request time (a reload changes config in place).
import type { Config } from "../config/schema.ts";
import type { Store } from "../store/types.ts";

/** The slice of RelayContext the status page reads (RelayContext satisfies it). */
export interface StatusSource {
  config: Config;
  store: Store;
  readonly startedAt: number;
  connections(): number;
  /** The relay key (NIP-11 `self`), when the relay has one. */
  readonly relayKey?: { readonly pubkey: string };
  /** NIP-86 state, when the relay has it: only the sizes are shown. */
  admin?: AdminCounts;
}

type Sized = { readonly size: number };
interface AdminCounts {
  readonly bannedPubkeys: Sized;
  readonly allowedPubkeys: Sized;
  readonly bannedEvents: Sized;
  readonly blockedIps: Sized;
  readonly allowedKinds: Sized;
  readonly disallowedKinds: Sized;
}

export interface PolicyRow {
  label: string;
  value: string;
  /** Entries of a list, shown folded (capped): the size is in `value`. */
  items?: string[];
}

/** A full count scans the events table: one per store per this many ms (status page and metrics). */
export const STORED_COUNT_TTL_MS = 10_000;
const counts = new WeakMap<Store, { at: number; count: Promise<number> }>();

/** Events in the store, cached ~10 s; undefined when the store cannot answer (closing, busy). */
export async function eventsStored(store: Store): Promise<number | undefined> {
  let hit = counts.get(store);
  if (!hit || Date.now() - hit.at > STORED_COUNT_TTL_MS) {
    // maxSeq = the last commit, now = 0: every stored event, expired-but-unswept ones included.
    hit = { at: Date.now(), count: store.count({ filters: [{}], maxSeq: store.lastSeq(), now: 0 }).then((r) => r.count) };
    counts.set(store, hit);
  }
  try {
    return await hit.count;
  } catch {
    // Not cached: the next request asks again. The page still renders, with "unknown".
    if (counts.get(store) === hit) counts.delete(store);
    return undefined;
  }
}

export function formatUptime(ms: number): string {
  let s = Math.max(0, Math.floor(ms / 1000));
  const parts: string[] = [];
  for (const [unit, size] of [
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
  ] as const) {
    if (s >= size || parts.length > 0) parts.push(`${Math.floor(s / size)}${unit}`);
    s %= size;
  }
  parts.push(`${s}s`);
  return parts.join(" ");
}

/** Lists are folded on the page; a huge allowlist must not make a huge page. */
const MAX_ITEMS = 200;
/** "1 kind", "3 kinds", "2 entries": a count that cannot be read as a kind number. */
const counted = (n: number, noun: string, plural = `${noun}s`): string => `${n} ${n === 1 ? noun : plural}`;
/** A list's size in words; a short list of kinds is also named inline ("2 kinds: 4, 1059"). */
function list(label: string, values: readonly (string | number)[], empty: string, noun = "entry"): PolicyRow {
  if (values.length === 0) return { label, value: empty };
  const inline = noun === "kind" && values.length <= 10 ? `: ${values.join(", ")}` : "";
  return {
    label,
    value: `${counted(values.length, noun, noun === "entry" ? "entries" : `${noun}s`)}${inline}`,
    items: values.slice(0, MAX_ITEMS).map(String),
  };
}
const seconds = (n: number) => (n > 0 ? `${n} s` : "no limit");

/** Sections rendered by hand below, or not policy at all (addresses, paths, secrets). */
const KNOWN_SECTIONS = new Set([
  "info",
  "network",
  "database",
  "options",
  "limits",
  "authorization",
  "nips",
  "admin",
  "metrics",
  "log",
  "mirror",
  "groups",
  "pay_to_relay",
  "verified_users",
  "web_of_trust",
  "membership",
]);
/** Never shown, whatever section a later key lands in. */
const SECRET = /token|secret|password|private|credential/i;

export function policiesInForce(config: Config, admin?: AdminCounts): PolicyRow[] {
  const o = config.options;
  const l = config.limits;
  const a = config.authorization;
  const rows: PolicyRow[] = [
    { label: "Authentication (NIP-42)", value: o.auth },
    list("Pubkeys allowed to publish", a.pubkey_allowlist, "anyone", "pubkey"),
    list("Pubkeys denied", a.pubkey_denylist, "none", "pubkey"),
    list("Kinds allowed", a.kind_allowlist, "all", "kind"),
    list("Kinds denied", a.kind_denylist, "none", "kind"),
    list("Kinds readable only by author and recipients", a.restricted_read_kinds, "none", "kind"),
    { label: "Proof of work (NIP-13)", value: o.min_pow_difficulty > 0 ? `at least ${o.min_pow_difficulty} bits` : "not required" },
    { label: "created_at at most in the past", value: seconds(l.created_at_lower_limit) },
    { label: "created_at at most in the future", value: seconds(l.created_at_upper_limit) },
    { label: "Largest message", value: `${l.max_message_bytes} bytes` },
    { label: "Longest content", value: `${l.max_content_length} characters` },
    { label: "Most tags per event", value: `${l.max_event_tags}` },
    { label: "Subscriptions per connection", value: `${l.max_subscriptions}` },
    { label: "Filters per subscription", value: `${l.max_filters}` },
    { label: "Largest limit", value: `${l.max_limit}` },
    { label: "Write-policy plugin", value: o.write_policy_plugin ? "on" : "off" },
    { label: "Relay administrators (NIP-86)", value: counted(config.admin.pubkeys.length, "pubkey") },
    ...groupRows(config.groups),
    ...admissionRows(config),
  ];
  if (admin)
    rows.push(
      { label: "Pubkeys banned by an admin", value: counted(admin.bannedPubkeys.size, "pubkey") },
      { label: "Pubkeys allowed by an admin", value: counted(admin.allowedPubkeys.size, "pubkey") },
      { label: "Events banned by an admin", value: counted(admin.bannedEvents.size, "event") },
      { label: "IP addresses blocked by an admin", value: counted(admin.blockedIps.size, "address", "addresses") },
      { label: "Kinds allowed by an admin", value: counted(admin.allowedKinds.size, "kind") },
      { label: "Kinds disallowed by an admin", value: counted(admin.disallowedKinds.size, "kind") },
    );
  // Keys other modules add later (rate limits, …) show without a change here.
  const known = new Set([
    "pubkey_allowlist",
    "pubkey_denylist",
    "kind_allowlist",
    "kind_denylist",
    "restricted_read_kinds",
    "read",
    "accept_dms_to_members",
  ]);
  for (const [k, v] of Object.entries(a)) if (!known.has(k)) rows.push(generic(`authorization.${k}`, v));
  for (const [section, keys] of Object.entries(config as Record<string, unknown>)) {
    if (KNOWN_SECTIONS.has(section) || typeof keys !== "object" || keys === null) continue;
    rows.push(...sectionRows(section, keys as Record<string, unknown>));
  }
  return rows.filter((r) => !SECRET.test(r.label));
}

/** Issue 33: who may write (the admission models, each off in one row) and who may read. */
function admissionRows(c: Config): PolicyRow[] {
  const pay = c.pay_to_relay;
  const wot = c.web_of_trust;
  return [
    { label: "Who may read", value: c.authorization.read === "members" ? "admitted pubkeys, authenticated" : "everyone" },
    {
      label: "Paid admission",
      value: pay.enabled ? `${pay.admission_cost} sats${pay.cost_per_event > 0 ? `, then ${pay.cost_per_event} per event` : ""}` : "off",
    },
    { label: "NIP-05 verified writers", value: c.verified_users.mode },
    { label: "Web of trust", value: wot.enabled ? `follows to depth ${wot.depth}` : "off" },
    { label: "Members only (NIP-43)", value: c.membership.enabled ? "on" : "off" },
    { label: "DMs to admitted pubkeys accepted from anyone", value: c.authorization.accept_dms_to_members ? "on" : "off" },
  ];
}

/** [groups] (NIP-29): off in one row; on, who may create groups and their limits. */
function groupRows(g: Config["groups"]): PolicyRow[] {
  if (!g.enabled) return [{ label: "Relay-based groups (NIP-29)", value: "off" }];
  return [
    { label: "Relay-based groups (NIP-29)", value: "on" },
    list("Who may create a group", g.creators, "nobody", "rule"),
    { label: "Most groups", value: `${g.max_groups}` },
    { label: "Most groups one pubkey creates", value: `${g.max_groups_per_pubkey}` },
    { label: "Most members in a group", value: `${g.max_members_per_group}` },
    list("Kinds a group accepts unless it lists its own", g.default_kinds, "all", "kind"),
    { label: "Oldest group event accepted", value: seconds(g.late_publication_seconds) },
  ];
}

/** What a [rate_limits] bucket counts, in words; a key not named here reads from its name. */
const RATE_WHAT: Record<string, string> = {
  connections: "New connections",
  events: "EVENTs",
  reqs: "REQs",
  counts: "COUNTs (NIP-45)",
  neg_opens: "NEG-OPENs (NIP-77)",
  auths: "AUTHs (NIP-42)",
  query_ms: "Milliseconds of query time",
  negentropy_ms: "Milliseconds of NIP-77 work",
};
/** Plain labels for keys that are not rates. */
const PLAIN: Record<string, string> = {
  "rate_limits.exempt_private_addresses": "Loopback and local-network addresses exempt from the per-IP rate limits",
};

/** "EVENTs per minute from one IP", "REQs per minute from one authenticated pubkey". */
function rateLabel(section: string, rate: string): string {
  const perPubkey = rate.startsWith("pubkey_");
  const name = perPubkey ? rate.slice("pubkey_".length) : rate;
  const what = RATE_WHAT[name] ?? name.replace(/_/g, " ");
  const from =
    section === "rate_limits" ? (perPubkey ? " from one authenticated pubkey" : " from one IP") : ` (${section.replace(/_/g, " ")})`;
  return `${what} per minute${from}`;
}

/** A section's keys as rows; a rate (x_per_minute) and its bucket (x_burst) make one row. */
function sectionRows(section: string, keys: Record<string, unknown>): PolicyRow[] {
  const rows: PolicyRow[] = [];
  const paired = new Set<string>();
  for (const [k, v] of Object.entries(keys)) {
    const rate = /^(.+)_per_minute$/.exec(k)?.[1];
    const burst = rate === undefined ? undefined : keys[`${rate}_burst`];
    if (rate === undefined || typeof v !== "number" || typeof burst !== "number") continue;
    paired.add(k).add(`${rate}_burst`);
    rows.push({ label: rateLabel(section, rate), value: v > 0 ? `${v} (bursts of ${burst})` : "unlimited" });
  }
  for (const [k, v] of Object.entries(keys)) if (!paired.has(k)) rows.push(generic(PLAIN[`${section}.${k}`] ?? `${section}.${k}`, v));
  return rows;
}

function generic(label: string, v: unknown): PolicyRow {
  if (Array.isArray(v))
    return list(
      label,
      v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))),
      "none",
    );
  if (typeof v === "boolean") return { label, value: v ? "on" : "off" };
  if (typeof v === "object" && v !== null) return { label, value: JSON.stringify(v) };
  return { label, value: String(v) };
}
