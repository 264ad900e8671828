// Issue 33 over the wire: who may write, and with read = "members" read, while an admission
// model is on. No engine is built here (each model has its own wire tests): a model is
// switched on in the config and pubkeys are admitted through NIP-86 (allowpubkey: manual;
// addmember answers that the engine is not running) or the registry itself (relay.ctx.access, as
// an engine does). Each case starts its relay with the config it needs.
import { afterEach, describe, expect, test } from "bun:test";
import type { AdmissionRegistry } from "../src/access/registry.ts";
import { encodeNpub } from "../src/nips/nip19.ts";
import { ADMISSION_TEXTS } from "../src/policy/admission.ts";
import { startRelay } from "../src/relay/server.ts";
import type { AdmissionStore, Store } from "../src/store/types.ts";
import {
  accepted,
  adminCall as callAsAdmin,
  Client,
  failOnRelayErrors,
  now,
  openTestStore,
  refusedWith,
  relayInfo,
  signer,
  startTestRelay,
  testConfig,
  waitUntil,
  type ConfigPatch,
  type Signer,
  type TestRelay,
} from "./helpers.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { databaseFor, dropDatabase, onPostgres } from "./postgres-env.ts";

failOnRelayErrors();

const relays: TestRelay[] = [];
const clients: Client[] = [];
const cleanups: (() => Promise<void>)[] = [];
// Each test's relays stop after it (on Postgres dropping a database takes a while: not all at the end).
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const r of relays.splice(0)) await r.stop();
  for (const f of cleanups.splice(0)) await f();
}, 120_000);

const admin = signer();

async function relayWith(patch: ConfigPatch): Promise<{ relay: TestRelay; c: Client }> {
  const relay = await startTestRelay({ ...patch, admin: { pubkeys: [admin.pubkey], ...patch.admin } });
  relays.push(relay);
  return { relay, c: await connect(relay) };
}

async function connect(relay: { url: string }, as?: Signer): Promise<Client> {
  const c = await Client.connect(relay.url);
  clients.push(c);
  if (as) expect((await c.auth(as, relay.url))[2]).toBe(true);
  return c;
}

const note = (s = signer(), content = `hello ${Math.random()}`) => s.sign({ kind: 1, content });
const okText = async (c: Client, e: ReturnType<typeof note>) => (await c.publish(e)).slice(2);

/** A NIP-86 call with a NIP-98 token of the relay's admin. */
const adminCall = (relay: TestRelay, method: string, params: unknown[] = []) => callAsAdmin(relay.url, admin, method, params);

describe("writes while a model is on (membership, no engine)", () => {
  test("a stranger hears the model's text; a member, an allow-listed and an admin-allowed pubkey write; revoking stops it", async () => {
    const listed = signer();
    const { relay, c } = await relayWith({ membership: { enabled: true }, authorization: { pubkey_allowlist: [listed.pubkey] } });
    const stranger = signer();
    expect(await okText(c, note(stranger))).toEqual([false, `restricted: ${ADMISSION_TEXTS.member}`]);
    // The allow list is the manual basis: its pubkeys write free, and it no longer keeps others out by itself.
    await accepted(c, note(listed));
    await accepted(c, note(admin)); // [admin] pubkeys are manual too
    const member = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", { via: "admin" });
    await accepted(c, note(member));
    expect((await adminCall(relay, "allowpubkey", [stranger.pubkey, "friend"])).body).toEqual({ result: true });
    await accepted(c, note(stranger));
    // revokeadmission over NIP-86 (no members engine: the row itself).
    expect((await adminCall(relay, "revokeadmission", [member.pubkey, "member", "left"])).body).toEqual({ result: true });
    await refusedWith(c, note(member), `restricted: ${ADMISSION_TEXTS.member}`);
  });

  test("bans win over every basis: the deny list and banpubkey", async () => {
    const denied = signer();
    const banned = signer();
    const { relay, c } = await relayWith({
      membership: { enabled: true },
      authorization: { pubkey_allowlist: [denied.pubkey], pubkey_denylist: [denied.pubkey] },
    });
    await relay.ctx.access!.admit(banned.pubkey, "member", {});
    await accepted(c, note(banned));
    expect((await adminCall(relay, "banpubkey", [banned.pubkey, "spam"])).body).toEqual({ result: true });
    await refusedWith(c, note(denied), "blocked: this pubkey may not publish here");
    await refusedWith(c, note(banned), "blocked: this pubkey is banned from this relay");
  });

  test("a ban ends every basis for reads too: a banned member and a denied allow-listed pubkey read nothing with read = members, and are no inbox", async () => {
    const denied = signer();
    const { relay, c } = await relayWith({
      membership: { enabled: true },
      authorization: { read: "members", pubkey_allowlist: [denied.pubkey], pubkey_denylist: [denied.pubkey] },
    });
    const banned = signer();
    await relay.ctx.access!.admit(banned.pubkey, "member", {});
    await accepted(await connect(relay, admin), note(admin, "members only"));
    expect((await (await connect(relay, banned)).req("before", { kinds: [1] })).end).toEqual(["EOSE", "before"]);
    expect((await adminCall(relay, "banpubkey", [banned.pubkey, "spam"])).body).toEqual({ result: true });
    const membersOnly = `restricted: ${ADMISSION_TEXTS.readMembers}`;
    for (const who of [banned, denied]) {
      const r = await (await connect(relay, who)).req("after", { kinds: [1] });
      expect(r.end).toEqual(["CLOSED", "after", membersOnly]);
      expect(r.events).toEqual([]);
      await refusedWith(c, signer().sign({ kind: 1059, tags: [["p", who.pubkey]], content: "x" }), "restricted:");
    }
  });

  test("a request to vanish from a pubkey no longer admitted is carried out (NIP-62), not stored", async () => {
    const { relay, c } = await relayWith({ membership: { enabled: true } });
    const gone = signer();
    await relay.ctx.access!.admit(gone.pubkey, "member", {});
    const old = note(gone);
    await accepted(c, old);
    await relay.ctx.access!.revoke(gone.pubkey, "member", "");
    const vanish = gone.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]] });
    const [, , ok, text] = await c.publish(vanish);
    expect(ok).toBe(false);
    expect(text).toStartWith(`restricted: ${ADMISSION_TEXTS.member}; the request to vanish was carried out`);
    const reader = await connect(relay, admin);
    expect((await reader.req("gone", { ids: [old.id, vanish.id] })).events).toEqual([]);
  });

  test("DMs and gift wraps to an admitted pubkey come from anyone; to a stranger they are refused", async () => {
    const { relay, c } = await relayWith({ membership: { enabled: true } });
    const member = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", {});
    const throwaway = signer();
    await accepted(c, throwaway.sign({ kind: 1059, tags: [["p", member.pubkey]], content: "wrapped" }));
    await accepted(c, throwaway.sign({ kind: 4, tags: [["p", member.pubkey]], content: "dm" }));
    await refusedWith(c, throwaway.sign({ kind: 1059, tags: [["p", signer().pubkey]], content: "x" }), "restricted:");
    await refusedWith(c, throwaway.sign({ kind: 1, tags: [["p", member.pubkey]], content: "not a dm" }), "restricted:");
  });

  test("inbox mail is no free storage: not to the relay's key or an admin, not p-tagging its author, at most 2 p tags", async () => {
    const { relay, c } = await relayWith({ membership: { enabled: true } });
    const member = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", {});
    const { self } = await relayInfo(relay.url);
    const s = signer();
    const dm = (kind: number, ...to: string[]) => s.sign({ kind, tags: to.map((p) => ["p", p]), content: "B".repeat(1000) });
    // The relay's key (NIP-11 self) and the admins are admitted, but public: no inbox.
    await refusedWith(c, dm(4, admin.pubkey), "restricted:");
    await refusedWith(c, dm(1059, self), "restricted:");
    await refusedWith(c, dm(4, admin.pubkey, self), "restricted:");
    // Mail that names its author is read back by it: storage, not mail.
    await refusedWith(c, dm(4, member.pubkey, s.pubkey), "restricted:");
    await refusedWith(c, dm(1059, member.pubkey, signer().pubkey, signer().pubkey), "restricted:");
    await accepted(c, dm(1059, member.pubkey, signer().pubkey));
    // The admins and the relay key still write their own, as any admitted pubkey.
    await accepted(c, admin.sign({ kind: 4, tags: [["p", s.pubkey]], content: "hi" }));
  });

  test("a kind 0 passes as the ask to be verified only while checks admit, naming an address that parses and the domain lists allow", async () => {
    const lists = { domain_whitelist: ["127.0.0.1"], http_loopback: true };
    const { c } = await relayWith({ membership: { enabled: true }, verified_users: { mode: "enabled", ...lists } });
    const profile = (nip05: string, s = signer()) => s.sign({ kind: 0, content: JSON.stringify({ nip05, about: "A".repeat(1000) }) });
    await accepted(c, profile("t@127.0.0.1:9"));
    await refusedWith(c, profile("x"), "restricted:");
    await refusedWith(c, profile("not an address@127.0.0.1:9"), "restricted:");
    await refusedWith(c, profile("t@localhost:9"), "restricted:"); // not in domain_whitelist
    await refusedWith(c, signer().sign({ kind: 0, content: JSON.stringify({ name: "u" }) }), "restricted:");
    // Passive checks never admit: such a profile is no way in.
    const passive = await relayWith({ membership: { enabled: true }, verified_users: { mode: "passive", ...lists } });
    await refusedWith(passive.c, profile("t@127.0.0.1:9"), "restricted:");
  });

  test("NIP-43 kinds the relay signs are refused from anyone else, even admitted", async () => {
    const { relay, c } = await relayWith({ membership: { enabled: true } });
    const member = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", {});
    for (const kind of [13534, 8000, 8001])
      await refusedWith(c, member.sign({ kind, tags: [["-"]] }), `blocked: only this relay signs kind ${kind}`);
  });
});

describe("refusal texts", () => {
  test("pay on: the join URL from relay_url, with every model's text; sign_ups off; the first model wins", async () => {
    const base = { node_url: "http://127.0.0.1:9", api_secret: "k" };
    const { c } = await relayWith({
      info: { relay_url: "wss://relay.example.com/nostr" },
      pay_to_relay: { enabled: true, ...base },
      membership: { enabled: true },
    });
    const s = signer();
    expect(await okText(c, note(s))).toEqual([
      false,
      `restricted: ${ADMISSION_TEXTS.paid(`https://relay.example.com/nostr/join?pubkey=${s.pubkey}`)}`,
    ]);
    const closed = await relayWith({ pay_to_relay: { enabled: true, sign_ups: false, ...base }, membership: { enabled: true } });
    // No new sign-ups: the next model speaks, without a join URL.
    expect(await okText(closed.c, note(s))).toEqual([false, `restricted: ${ADMISSION_TEXTS.member}`]);
    const only = await relayWith({ pay_to_relay: { enabled: true, sign_ups: false, ...base } });
    expect(await okText(only.c, note(s))).toEqual([false, `restricted: ${ADMISSION_TEXTS.noSignUps}`]);
    const wot = await relayWith({ web_of_trust: { enabled: true, seeds: [admin.pubkey], depth: 2 } });
    // Until its first graph is built (an empty store: a few ms) it is "loading"; then the stranger
    // hears the web of trust's own text. Which one the first note meets is a race, so the note is
    // sent again until the graph speaks.
    const loading = `error: ${ADMISSION_TEXTS.trustLoading}`;
    const trusted = `restricted: ${ADMISSION_TEXTS.trusted(2)}`;
    let text = await okText(wot.c, note(s));
    for (const deadline = Date.now() + 10_000; text[1] === loading && Date.now() < deadline; await Bun.sleep(50))
      text = await okText(wot.c, note(s));
    expect(text).toEqual([false, trusted]);
    const verified = await relayWith({ verified_users: { mode: "enabled" } });
    expect(await okText(verified.c, note(s))).toEqual([false, `restricted: ${ADMISSION_TEXTS.nip05Unknown}`]);
  });

  test("until the registry's rows are read, writers hear it is loading", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bunstr-admission-loading-"));
    const real = await openTestStore(dir);
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const admission: AdmissionStore = { ...real.admission, rows: async () => (await held, real.admission.rows()) };
    // The store as it is, but for its admission rows, held back until the test lets them come.
    const store = new Proxy(real, {
      get: (t, k) =>
        k === "admission" ? admission : typeof Reflect.get(t, k) === "function" ? Reflect.get(t, k).bind(t) : Reflect.get(t, k),
    }) as Store;
    const relay = startRelay({ config: testConfig({ membership: { enabled: true }, admin: { pubkeys: [admin.pubkey] } }), store });
    cleanups.push(async () => {
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
      if (onPostgres) await dropDatabase(databaseFor(dir));
    });
    const c = await connect(relay);
    expect(await okText(c, note(admin))).toEqual([false, `error: ${ADMISSION_TEXTS.loading}`]);
    release();
    await relay.ready;
    await accepted(c, note(admin));
  });
});

describe('reads with [authorization] read = "members"', () => {
  test("CLOSED for the anonymous and for strangers on REQ, COUNT and NEG-OPEN; members read; DMs still reach their recipient", async () => {
    const { relay, c: anon } = await relayWith({ membership: { enabled: true }, authorization: { read: "members" } });
    const member = signer();
    const stranger = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", {});
    const writer = await connect(relay, member);
    const e = note(member);
    await accepted(writer, e);
    await accepted(writer, member.sign({ kind: 4, tags: [["p", stranger.pubkey]], content: "to the stranger" }));

    const authFirst = `auth-required: ${ADMISSION_TEXTS.readAuth}`;
    expect((await anon.req("a", { kinds: [1] })).end).toEqual(["CLOSED", "a", authFirst]);
    expect(await anon.count("ac", [{ kinds: [1] }])).toEqual(["CLOSED", "ac", authFirst]);
    const s = await connect(relay, stranger);
    const membersOnly = `restricted: ${ADMISSION_TEXTS.readMembers}`;
    expect((await s.req("s", { kinds: [1] })).end).toEqual(["CLOSED", "s", membersOnly]);
    expect((await s.req("s2", {})).end).toEqual(["CLOSED", "s2", membersOnly]);
    expect(await s.count("sc", [{ authors: [member.pubkey] }])).toEqual(["CLOSED", "sc", membersOnly]);
    s.send(["NEG-OPEN", "n", { kinds: [1] }, "61"]);
    expect(await s.next((f) => f[0] === "NEG-ERR" && f[1] === "n")).toEqual(["NEG-ERR", "n", membersOnly]);
    // A stranger's inbox: DMs addressed to them are still theirs.
    const dms = await s.req("dm", { kinds: [4] });
    expect(dms.end).toEqual(["EOSE", "dm"]);
    expect(dms.events.map((x) => x.content)).toEqual(["to the stranger"]);

    const m = await connect(relay, member);
    const read = await m.req("m", { kinds: [1] });
    expect(read.end).toEqual(["EOSE", "m"]);
    expect(read.events.map((x) => x.id)).toEqual([e.id]);
    expect(await m.count("mc", [{ kinds: [1] }])).toEqual(["COUNT", "mc", { count: 1 }]);
  });

  test("with pay on, a stranger is told where to join", async () => {
    const { relay } = await relayWith({
      info: { relay_url: "ws://relay.test/" },
      pay_to_relay: { enabled: true, node_url: "http://127.0.0.1:9", api_secret: "k" },
      authorization: { read: "members" },
    });
    const stranger = signer();
    const s = await connect(relay);
    expect((await s.auth(stranger, "ws://relay.test/"))[2]).toBe(true); // AUTH names info.relay_url
    expect((await s.req("s", { kinds: [1] })).end).toEqual([
      "CLOSED",
      "s",
      `restricted: ${ADMISSION_TEXTS.readMembers}: join at http://relay.test/join?pubkey=${stranger.pubkey}`,
    ]);
  });

  test("a revoked member gets no more live events, at once", async () => {
    const { relay } = await relayWith({ membership: { enabled: true }, authorization: { read: "members" } });
    const member = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", {});
    const reader = await connect(relay, member);
    const writer = await connect(relay, admin);
    reader.send(["REQ", "live", { kinds: [1] }, { kinds: [4], "#p": [member.pubkey] }]);
    await reader.next((f) => f[0] === "EOSE" && f[1] === "live");
    const before = note(admin, "before");
    await accepted(writer, before);
    await reader.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === before.id);
    await relay.ctx.access!.revoke(member.pubkey, "member", "test");
    const after = note(admin, "after");
    await accepted(writer, after);
    // A DM to the member, fanned out after `after`: once it arrives, `after` would have too.
    const dm = admin.sign({ kind: 4, tags: [["p", member.pubkey]], content: "fence" });
    await accepted(writer, dm);
    await reader.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === dm.id);
    expect(reader.eventsFor("live").map((x) => x.content)).toEqual(["before", "fence"]);
  });

  test("until the first trust graph is built, a reader not known yet hears it is loading, not restricted", async () => {
    const { relay } = await relayWith({ web_of_trust: { enabled: true, seeds: [admin.pubkey] }, authorization: { read: "members" } });
    const registry = relay.ctx.access as AdmissionRegistry;
    await waitUntil("the first graph", () => registry.engines.wot?.ready === true, 10_000);
    const built = registry.engines.wot!;
    registry.engines.wot = { ready: false, size: 0, has: () => false, path: () => undefined, pubkeys: () => [] };
    const s = await connect(relay, signer());
    expect((await s.req("l", { kinds: [1] })).end).toEqual(["CLOSED", "l", `error: ${ADMISSION_TEXTS.trustLoading}`]);
    expect((await (await connect(relay, admin)).req("a", { kinds: [1] })).end).toEqual(["EOSE", "a"]); // manual: known
    registry.engines.wot = built;
    expect((await s.req("r", { kinds: [1] })).end).toEqual(["CLOSED", "r", `restricted: ${ADMISSION_TEXTS.readMembers}`]);
  });

  test("read = members with no model: admins and allow-listed pubkeys read", async () => {
    const listed = signer();
    const { relay } = await relayWith({ authorization: { read: "members", pubkey_allowlist: [listed.pubkey] } });
    expect((await (await connect(relay, listed)).req("l", { kinds: [1] })).end).toEqual(["EOSE", "l"]);
    expect((await (await connect(relay, admin)).req("a", { kinds: [1] })).end).toEqual(["EOSE", "a"]);
    expect((await (await connect(relay, signer())).req("x", { kinds: [1] })).end).toEqual([
      "CLOSED",
      "x",
      `restricted: ${ADMISSION_TEXTS.readMembers}`,
    ]);
  });
});

describe("no model on: as before", () => {
  test("an allow list makes the relay allow-only; no registry; everyone reads", async () => {
    const listed = signer();
    const { relay, c } = await relayWith({ authorization: { pubkey_allowlist: [listed.pubkey] } });
    expect(relay.ctx.access).toBeUndefined();
    await accepted(c, note(listed));
    await refusedWith(c, note(), "restricted: this pubkey is not allowed to publish here");
    expect((await c.req("r", { kinds: [1] })).end).toEqual(["EOSE", "r"]);
  });

  test("without a list everyone writes; the admission methods are not listed and say why", async () => {
    const { relay, c } = await relayWith({});
    await accepted(c, note());
    const methods = (await adminCall(relay, "supportedmethods")).body.result as string[];
    expect(methods).not.toContain("listadmissions");
    expect((await adminCall(relay, "listadmissions")).body.error).toBe(
      "no admission model is on ([pay_to_relay], [verified_users], [web_of_trust], [membership])",
    );
  });
});

describe("operators: NIP-86 and NIP-11", () => {
  test("listadmissions pages stored rows by basis, with their evidence; manual lists; revoke refuses manual and trusted; member methods answered by their engine", async () => {
    const listed = signer();
    const { relay } = await relayWith({ membership: { enabled: true }, authorization: { pubkey_allowlist: [listed.pubkey] } });
    const a = signer();
    const b = signer();
    await relay.ctx.access!.admit(a.pubkey, "member", { invited_by: b.pubkey, via: "invite" });
    await relay.ctx.access!.admit(b.pubkey, "member", { via: "admin" });
    const methods = (await adminCall(relay, "supportedmethods")).body.result as string[];
    expect(methods).toEqual(expect.arrayContaining(["listadmissions", "revokeadmission", "addmember", "listmembers", "createinvitecode"]));
    expect(methods).not.toContain("listinvoices");
    const all = (await adminCall(relay, "listadmissions")).body.result;
    expect(all.map((x: any) => x.pubkey).sort()).toEqual([a.pubkey, b.pubkey].sort());
    const first = all.find((x: any) => x.pubkey === a.pubkey);
    expect(first.bases).toEqual([
      { basis: "member", since: expect.any(Number), until: null, evidence: { invited_by: b.pubkey, via: "invite" } },
    ]);
    expect((await adminCall(relay, "listadmissions", ["member", 1])).body.result.length).toBe(1);
    expect((await adminCall(relay, "listadmissions", ["paid"])).body.result).toEqual([]);
    const manual = (await adminCall(relay, "listadmissions", ["manual"])).body.result;
    expect(manual.find((x: any) => x.pubkey === listed.pubkey).bases[0].evidence).toEqual({ lists: ["pubkey_allowlist"] });
    expect(manual.find((x: any) => x.pubkey === relay.ctx.relayKey.pubkey).bases[0].evidence).toEqual({ lists: ["relay"] });
    expect((await adminCall(relay, "listmembers")).body.result.map((x: any) => x.pubkey).sort()).toEqual([a.pubkey, b.pubkey].sort());
    expect((await adminCall(relay, "revokeadmission", [listed.pubkey, "manual", ""])).body.error).toContain("use unallowpubkey");
    expect((await adminCall(relay, "revokeadmission", [listed.pubkey, "trusted", ""])).body.error).toContain("ban it instead");
    expect((await adminCall(relay, "revokeadmission", [a.pubkey, "gold", ""])).body.error).toBe(
      "revokeadmission: basis must be one of paid, verified, trusted, member, manual",
    );
    // Answered by its engine (relay/membership.ts): a member already, so nothing to add.
    expect((await adminCall(relay, "addmember", [a.pubkey, ""])).body).toEqual({ result: true });
    expect((await adminCall(relay, "listinvoices")).body.error).toBe(
      "paid admission is not enabled on this relay ([pay_to_relay] enabled)",
    );
  });

  test("NIP-11: payment_required, restricted_writes, fees, payments_url; 43 while membership is on", async () => {
    const plain = await relayInfo((await relayWith({})).relay.url);
    expect(plain.limitation.payment_required).toBe(false);
    expect(plain.limitation.restricted_writes).toBe(false);
    expect(plain.fees).toBeUndefined();
    expect(plain.supported_nips).not.toContain(43);
    const { relay } = await relayWith({
      info: { relay_url: "wss://relay.example.com/" },
      pay_to_relay: { enabled: true, node_url: "http://127.0.0.1:9", api_secret: "k", admission_cost: 21, cost_per_event: 2 },
      membership: { enabled: true },
    });
    const info = await relayInfo(relay.url);
    expect(info.limitation.payment_required).toBe(true);
    expect(info.limitation.restricted_writes).toBe(true);
    expect(info.fees).toEqual({ admission: [{ amount: 21_000, unit: "msats" }], publication: [{ amount: 2000, unit: "msats" }] });
    expect(info.payments_url).toBe("https://relay.example.com/join");
    expect(info.supported_nips).toContain(43);
  });

  test("/metrics counts admitted pubkeys per basis and refusals by model", async () => {
    const { relay, c } = await relayWith({ membership: { enabled: true } });
    await relay.ctx.access!.admit(signer().pubkey, "member", {});
    await refusedWith(c, note(), "restricted:");
    const text = await (await fetch(`${relay.url.replace(/^ws/, "http")}metrics`)).text();
    expect(text).toContain('bunstr_admitted_pubkeys{basis="member"} 1\n');
    expect(text).toContain('bunstr_admitted_pubkeys{basis="manual"} 2\n'); // the admin and the relay key
    expect(text).toContain('bunstr_admission_refusals_total{basis="member"} 1\n');
    expect(text).toContain('bunstr_invoices_total{event="created"} 0\n');
    expect(text).toContain("# TYPE bunstr_wot_graph_pubkeys gauge\n");
  });
});

describe("/join while pay is off and on", () => {
  test("404 while off; status by hex or npub, bad pubkeys 400, banned 403, node down 502", async () => {
    const off = (await relayWith({})).relay;
    expect((await fetch(`${off.url.replace(/^ws/, "http")}join/status?pubkey=${"a".repeat(64)}`)).status).toBe(404);
    const { relay } = await relayWith({ pay_to_relay: { enabled: true, node_url: "http://127.0.0.1:9", api_secret: "k" } });
    const http = relay.url.replace(/^ws/, "http");
    const member = signer();
    const get = async (path: string) => {
      const res = await fetch(`${http}${path}`);
      return { status: res.status, body: await res.json(), type: res.headers.get("content-type"), cache: res.headers.get("cache-control") };
    };
    expect(await get(`join/status?pubkey=${encodeNpub(member.pubkey)}`)).toEqual({
      status: 200,
      body: { admitted: false },
      type: "application/json",
      cache: "no-store",
    });
    await relay.ctx.access!.admit(member.pubkey, "paid", { payment_hash: "h", amount_sats: 4200, paid_at: now() });
    expect((await get(`join/status?pubkey=${member.pubkey}`)).body).toEqual({ admitted: true });
    expect((await get(`join/invoice?pubkey=${member.pubkey}`)).body).toEqual({ admitted: true });
    expect(await get("join/invoice?pubkey=npub1nope")).toMatchObject({
      status: 400,
      body: { error: "invalid: pubkey must be 64 hex characters or an npub" },
    });
    const banned = signer();
    await adminCall(relay, "banpubkey", [banned.pubkey, ""]);
    expect(await get(`join/invoice?pubkey=${banned.pubkey}`)).toMatchObject({
      status: 403,
      body: { error: "blocked: this pubkey is banned from this relay" },
    });
    // The payments engine runs; its node (port 9) does not answer.
    expect(await get(`join/invoice?pubkey=${signer().pubkey}`)).toMatchObject({
      status: 502,
      body: { error: "error: the payment node did not answer, try again" },
    });
    const hook = await fetch(`${http}lnbits`, { method: "POST", body: JSON.stringify({ payment_hash: "f".repeat(64) }) });
    expect([hook.status, await hook.json()]).toEqual([200, {}]);
    // The writer the payment admitted writes.
    const c = await connect(relay);
    await accepted(c, note(member));
  });
});

test("the registry answers what the store holds after a restart", async () => {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-admission-restart-"));
  const patch: ConfigPatch = { membership: { enabled: true } };
  const first = await startTestRelay(patch, { dir });
  const member = signer();
  await first.ctx.access!.admit(member.pubkey, "member", { via: "admin" });
  await first.close();
  const again = await startTestRelay(patch, { dir });
  relays.push(again);
  cleanups.push(async () => {
    rmSync(dir, { recursive: true, force: true });
    if (onPostgres) await dropDatabase(databaseFor(dir));
  });
  const c = await connect(again);
  await waitUntil("the registry is loaded", () => again.ctx.access!.ready, 5000);
  await accepted(c, note(member));
});
