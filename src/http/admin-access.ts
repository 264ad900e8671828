// bunstr's NIP-86 admission methods (issue 33): who is admitted and why, read from the registry
// and the store (access/registry.ts), revoking a stored admission, and the engines' own methods
// (invoices, NIP-43 members), each answered by its engine (registry.engines.*) and with a plain
// error while that engine is absent. Manual admissions are the allow lists (allowpubkey,
// unallowpubkey); a trusted pubkey comes from the web of trust and is banned, not revoked.
import type { AdmissionRegistry } from "../access/registry.ts";
import { AdminError } from "../admin/state.ts";
import type { Config } from "../config/schema.ts";
import { accessMethodsOff, type AccessCall } from "../nips/nip86.ts";
import type { AdmissionRow, Store } from "../store/types.ts";

/** What the admission methods reach (RelayContext has it). */
export interface AccessAdminSource {
  readonly config: Config;
  readonly store: Store;
  /** Present while a model is on (relay/admission.ts). */
  readonly access?: AdmissionRegistry;
  readonly admin: { readonly allowedPubkeys: ReadonlyMap<string, unknown> };
  readonly relayKey: { readonly pubkey: string };
}

/** Most pubkeys in one listadmissions answer; the next page starts at offset + PAGE. */
export const ADMISSIONS_PAGE = 500;
/** listinvoices: the newest this many. */
const INVOICES_LISTED = 200;

interface Listed {
  pubkey: string;
  bases: { basis: string; since: number | null; until: number | null; evidence: unknown }[];
}

const OFF: Record<string, string> = {
  listinvoices: "paid admission is not enabled on this relay ([pay_to_relay] enabled)",
  listadmissions: "no admission model is on ([pay_to_relay], [verified_users], [web_of_trust], [membership])",
  revokeadmission: "no admission model is on ([pay_to_relay], [verified_users], [web_of_trust], [membership])",
};
const MEMBERS_OFF = "NIP-43 membership is not enabled on this relay ([membership] enabled)";
const notRunning = (what: string) => new AdminError(`${what} is not running on this relay yet`);

/** Runs one admission call by the admin `by`; the NIP-86 result. Throws AdminError for a call that cannot be done. */
export async function accessCall(ctx: AccessAdminSource, call: AccessCall, by: string): Promise<unknown> {
  if (accessMethodsOff(ctx.config).includes(call.method)) throw new AdminError(OFF[call.method] ?? MEMBERS_OFF);
  const registry = ctx.access;
  if (!registry) throw new AdminError(OFF.listadmissions!);
  const { members } = registry.engines;
  switch (call.method) {
    case "listadmissions":
      return listAdmissions(ctx, registry, call.basis, call.offset);
    case "revokeadmission":
      return revoke(registry, call.pubkey, call.basis, call.reason);
    case "listinvoices":
      return ctx.store.admission.recentInvoices(INVOICES_LISTED);
    case "listmembers":
      return (await registry.stored())
        .filter((r) => r.basis === "member")
        .map((r) => ({ pubkey: r.pubkey, since: r.since, evidence: parsed(r) }));
    case "addmember":
      if (!members) throw notRunning("NIP-43 membership");
      await members.add(call.pubkey, call.reason);
      return true;
    case "removemember":
      if (!members) throw notRunning("NIP-43 membership");
      await members.remove(call.pubkey, call.reason);
      return true;
    case "createinvitecode":
      if (!members) throw notRunning("NIP-43 membership");
      return members.createInvite(by);
  }
}

async function revoke(registry: AdmissionRegistry, pubkey: string, basis: string, reason: string): Promise<true> {
  if (basis === "manual")
    throw new AdminError(
      "a manual admission is an allow list entry: use unallowpubkey (or remove it from [authorization] pubkey_allowlist)",
    );
  if (basis === "trusted")
    throw new AdminError("a trusted pubkey comes from the web of trust's follows and cannot be revoked: ban it instead (banpubkey)");
  if (basis === "member" && registry.engines.members)
    await registry.engines.members.remove(pubkey, reason); // 8001 and the member list too
  else await registry.revoke(pubkey, basis as "paid" | "verified" | "member", reason);
  return true;
}

const parsed = (r: AdmissionRow): unknown => {
  try {
    return JSON.parse(r.evidence);
  } catch {
    return r.evidence;
  }
};

/** One page of admitted pubkeys with their bases: stored rows, the web of trust's graph, or the allow lists. */
async function listAdmissions(ctx: AccessAdminSource, registry: AdmissionRegistry, basis: string, offset: number): Promise<Listed[]> {
  if (basis === "trusted") {
    const wot = registry.engines.wot;
    if (!wot) return [];
    return wot.pubkeys(offset, ADMISSIONS_PAGE).map((pubkey) => {
      const p = wot.path(pubkey);
      return { pubkey, bases: [{ basis: "trusted", since: null, until: null, evidence: { path: p?.path ?? [], depth: p?.depth ?? 0 } }] };
    });
  }
  if (basis === "manual") return manualPage(ctx, offset);
  const byPubkey = new Map<string, Listed>();
  for (const r of await registry.stored()) {
    if (basis && r.basis !== basis) continue;
    let entry = byPubkey.get(r.pubkey);
    if (!entry) byPubkey.set(r.pubkey, (entry = { pubkey: r.pubkey, bases: [] }));
    entry.bases.push({ basis: r.basis, since: r.since, until: r.until, evidence: parsed(r) });
  }
  return [...byPubkey.values()].slice(offset, offset + ADMISSIONS_PAGE);
}

/** The manual basis: the config allow list, the admin allow list, [admin] pubkeys and the relay's key. */
function manualPage(ctx: AccessAdminSource, offset: number): Listed[] {
  const lists = new Map<string, string[]>();
  const add = (pks: Iterable<string>, list: string) => {
    for (const pk of pks) lists.set(pk, [...(lists.get(pk) ?? []), list]);
  };
  add(ctx.config.authorization.pubkey_allowlist, "pubkey_allowlist");
  add(ctx.admin.allowedPubkeys.keys(), "allowpubkey");
  add(ctx.config.admin.pubkeys, "admin");
  add([ctx.relayKey.pubkey], "relay");
  return [...lists]
    .slice(offset, offset + ADMISSIONS_PAGE)
    .map(([pubkey, from]) => ({ pubkey, bases: [{ basis: "manual", since: null, until: null, evidence: { lists: from } }] }));
}
