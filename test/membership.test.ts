// NIP-43 members and invitations over the wire ([membership] enabled): admins add and remove
// members through NIP-86; members ask for invite codes with a REQ for kind 28935; strangers join
// with a 28934 carrying the code, and leave with a 28936; the relay announces each change with
// 8000/8001 and a new member list (13534), signed by its key (NIP-11 `self`) with the `-` tag.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { SimplePool } from "nostr-tools/pool";
import { finalizeEvent, type EventTemplate } from "nostr-tools/pure";
import { Relay as ToolsRelay } from "nostr-tools/relay";
import { Members } from "../src/access/members.ts";
import { AdmissionRegistry } from "../src/access/registry.ts";
import { BASIS_BIT } from "../src/policy/admission.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { verifySchnorr } from "../src/protocol/schnorr.ts";
import {
  ALREADY_MEMBER,
  EXPIRED_CODE,
  INVALID_CODE,
  INVITE_AUTH,
  INVITE_MEMBERS,
  LEFT,
  NO_INVITES_LEFT,
  NOT_MEMBER,
  NOT_NOW,
} from "../src/relay/membership.ts";
import {
  accepted,
  adminCall as nip86,
  Client,
  failOnRelayErrors,
  now,
  relayInfo,
  signer,
  startTestRelay,
  testConfig,
  waitUntil,
  type Signer,
  type TestRelay,
} from "./helpers.ts";
import { connectAs } from "./groups-helpers.ts";

failOnRelayErrors();

const REFUSED = "restricted: this relay is for its members: ask a member for an invite code (NIP-43)";

const RELAY_URL = "wss://members.example/";
const admin = signer();
let relay: TestRelay;
let self: string;

beforeAll(async () => {
  spyOn(console, "log").mockImplementation(() => {});
  spyOn(console, "warn").mockImplementation(() => {});
  relay = await startTestRelay({
    membership: { enabled: true, invites_per_member: 1 },
    admin: { pubkeys: [admin.pubkey] },
    // The name the welcome names (the test's AUTH names the relay by its port instead).
    info: { relay_url: RELAY_URL },
    options: { auth_relay_url_check: false },
  });
  self = (await relayInfo(relay.url)).self;
});
afterAll(() => relay?.stop());

const httpUrl = (r: TestRelay) => r.url.replace(/^ws/, "http");

/** A NIP-86 call as `as` (the admin by default), naming the relay as it calls itself: the JSON body. */
async function adminCall(r: TestRelay, method: string, params: unknown[] = [], as: Signer = admin): Promise<any> {
  return (await nip86(r.url, as, method, params, r.ctx.config.info.relay_url)).body;
}

const note = (s: Signer, content = "hello") => s.sign({ kind: 1, content });
const joinRequest = (s: Signer, code?: string, created_at = now()) =>
  s.sign({ kind: 28934, created_at, tags: code === undefined ? [["-"]] : [["-"], ["claim", code]] });
const leaveRequest = (s: Signer, created_at = now()) => s.sign({ kind: 28936, created_at, tags: [["-"]] });

/** The relay's events of `kind` (newest first), signed by `self`. */
async function relayEvents(c: Client, kind: number, p?: string): Promise<NostrEvent[]> {
  const sub = `r-${Math.random().toString(36).slice(2, 10)}`;
  const { events } = await c.req(sub, { kinds: [kind], authors: [self], ...(p ? { "#p": [p] } : {}) });
  c.send(["CLOSE", sub]);
  return events;
}

/** The member list (13534) as stored now: its members. */
async function listed(c: Client): Promise<string[]> {
  const [list] = await relayEvents(c, 13534);
  expect(list).toBeDefined();
  expect(list!.tags[0]).toEqual(["-"]);
  expect(verifySchnorr(list!)).toBe(true);
  return list!.tags.filter((t) => t[0] === "member").map((t) => t[1]!);
}

/** Asks for an invite on `c` (authed as a member or admin): the code, or the CLOSED text. */
async function askInvite(c: Client): Promise<{ code?: string; closed?: string; event?: NostrEvent }> {
  const sub = `inv-${Math.random().toString(36).slice(2, 10)}`;
  const { events, end } = await c.req(sub, { kinds: [28935] });
  if (end[0] === "CLOSED") return { closed: end[2] };
  c.send(["CLOSE", sub]);
  expect(events).toHaveLength(1);
  const e = events[0]!;
  return { code: e.tags.find((t) => t[0] === "claim")?.[1], event: e };
}

/** A member added by the admin, with a connection authed as it. */
async function member(): Promise<{ s: Signer; c: Client }> {
  const s = signer();
  expect(await adminCall(relay, "addmember", [s.pubkey, "test"])).toEqual({ result: true });
  return { s, c: await connectAs(relay, s) };
}

describe("members and the relay's announcements", () => {
  test("admin addmember: 8000 and a 13534 signed by NIP-11 self with -, then the member writes", async () => {
    const info = await relayInfo(relay.url);
    expect(info.supported_nips).toContain(43);
    const s = signer();
    const c = await connectAs(relay, s);
    expect(await c.publish(note(s))).toEqual(["OK", expect.any(String), false, REFUSED]);
    expect(await adminCall(relay, "addmember", [s.pubkey, "a friend"])).toEqual({ result: true });
    const [added] = await relayEvents(c, 8000, s.pubkey);
    expect(added!.pubkey).toBe(info.self);
    expect(added!.tags).toEqual([["-"], ["p", s.pubkey]]);
    expect(verifySchnorr(added!)).toBe(true);
    expect(await listed(c)).toContain(s.pubkey);
    await accepted(c, note(s));
    const members = (await adminCall(relay, "listmembers")).result as { pubkey: string }[];
    expect(members.map((m) => m.pubkey)).toContain(s.pubkey);
    c.close();
  });

  test("a pubkey nobody admitted is refused with the members text", async () => {
    const s = signer();
    const c = await connectAs(relay, s);
    expect(await c.publish(note(s))).toEqual(["OK", expect.any(String), false, REFUSED]);
    c.close();
  });

  test("clients' 13534, 8000, 8001 and 28935 are refused: only this relay signs them", async () => {
    const { s, c } = await member();
    for (const kind of [13534, 8000, 8001, 28935]) {
      const e = s.sign({ kind, tags: [["-"], ["p", s.pubkey]] });
      expect(await c.publish(e)).toEqual(["OK", e.id, false, `blocked: only this relay signs kind ${kind}`]);
    }
    c.close();
  });
});

describe("the member list under a burst", () => {
  test("30 members added at once: a few 13534s (one in flight, one waiting), the last lists them all", async () => {
    const watcher = await Client.connect(relay.url);
    const sub = "lists";
    expect((await watcher.req(sub, { kinds: [13534], authors: [self], limit: 0 })).end).toEqual(["EOSE", sub]);
    const added = Array.from({ length: 30 }, () => signer().pubkey);
    const answers = await Promise.all(added.map((pk) => adminCall(relay, "addmember", [pk, "burst"])));
    expect(answers.every((a) => a.result === true)).toBe(true);
    // The list naming them all reaches the live subscription (on Postgres its fanout may follow the answers).
    const namesAll = (l: NostrEvent) => added.every((pk) => l.tags.some((t) => t[0] === "member" && t[1] === pk));
    await waitUntil("a member list naming all 30", () => watcher.eventsFor(sub).some(namesAll), 5000);
    const lists = watcher.eventsFor(sub);
    expect(lists.length).toBeLessThan(30);
    watcher.close();
  });
});

describe("invitations", () => {
  test("a member's REQ for 28935 gets one relay-signed code; a stranger joins with it, then writes", async () => {
    const { s: inviter, c } = await member();
    const { code, event } = await askInvite(c);
    expect(code).toMatch(/^[a-z2-7]{16}$/);
    expect(event!.pubkey).toBe(self);
    expect(event!.tags[0]).toEqual(["-"]);
    expect(verifySchnorr(event!)).toBe(true);
    // Never stored: a read by id finds nothing.
    expect((await c.req("again", { ids: [event!.id] })).events).toEqual([]);

    const stranger = signer();
    const sc = await connectAs(relay, stranger);
    expect(await sc.publish(note(stranger))).toEqual(["OK", expect.any(String), false, REFUSED]);
    const join = joinRequest(stranger, code);
    const ok = await sc.publish(join);
    expect(ok[2]).toBe(true);
    expect(ok[3]).toBe(`info: welcome to ${RELAY_URL}`);
    await accepted(sc, note(stranger, "I am in"));
    expect(await listed(c)).toContain(stranger.pubkey);
    const [added] = await relayEvents(c, 8000, stranger.pubkey);
    expect(added).toBeDefined();
    const members = (await adminCall(relay, "listmembers")).result as { pubkey: string; evidence: any }[];
    expect(members.find((m) => m.pubkey === stranger.pubkey)?.evidence).toMatchObject({ invited_by: inviter.pubkey, via: "invite" });
    // Joining again: already a member, the same code or not.
    expect((await sc.publish(joinRequest(stranger, code)))[3]).toBe(ALREADY_MEMBER);
    c.close();
    sc.close();
  });

  test("invalid, used and expired codes, a join without a code and a stale join are refused with their texts", async () => {
    const { c } = await member();
    const { code } = await askInvite(c);
    const first = signer();
    const fc = await connectAs(relay, first);
    expect((await fc.publish(joinRequest(first, code)))[2]).toBe(true);

    const late = signer();
    const lc = await connectAs(relay, late);
    const cases: [NostrEvent, string][] = [
      [joinRequest(late, "nosuchcode"), INVALID_CODE],
      [joinRequest(late, code), INVALID_CODE], // used by `first`
      [joinRequest(late), INVALID_CODE],
      [joinRequest(late, "nosuchcode", now() - 3600), NOT_NOW.join],
    ];
    for (const [e, text] of cases) expect(await lc.publish(e)).toEqual(["OK", e.id, false, text]);

    // An expired code, put in the store as the admin's.
    await relay.ctx.store.admission.putInvite({
      code: "expiredcode12345",
      issuer: admin.pubkey,
      created_at: now() - 7200,
      expires_at: now() - 3600,
      used_by: null,
      used_at: null,
    });
    const expired = joinRequest(late, "expiredcode12345");
    expect(await lc.publish(expired)).toEqual(["OK", expired.id, false, EXPIRED_CODE]);
    await expect(lc.publish(note(late))).resolves.toEqual(["OK", expect.any(String), false, REFUSED]);
    fc.close();
    lc.close();
    c.close();
  });

  test("asking for codes: not authed, not a member, the quota (1 per member), admins unlimited", async () => {
    const anon = await Client.connect(relay.url);
    expect((await askInvite(anon)).closed).toBe(INVITE_AUTH);
    const outsider = signer();
    const oc = await connectAs(relay, outsider);
    expect((await askInvite(oc)).closed).toBe(INVITE_MEMBERS);

    const { c } = await member();
    const one = await askInvite(c);
    // Asked again while unused: the same code, not a second one.
    expect((await askInvite(c)).code).toBe(one.code);
    const joiner = signer();
    const jc = await connectAs(relay, joiner);
    expect((await jc.publish(joinRequest(joiner, one.code)))[2]).toBe(true);
    expect((await askInvite(c)).closed).toBe(NO_INVITES_LEFT);

    const ac = await connectAs(relay, admin);
    const codes = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const { code } = await askInvite(ac);
      codes.add(code!);
      const j = signer();
      const js = await connectAs(relay, j);
      expect((await js.publish(joinRequest(j, code)))[2]).toBe(true);
      js.close();
    }
    expect(codes.size).toBe(3);
    for (const x of [anon, oc, c, jc, ac]) x.close();
  });

  test("a banned member gets no code, its code from before the ban admits nobody, and an admin still removes it", async () => {
    const { s, c } = await member();
    const { code } = await askInvite(c);
    expect(await adminCall(relay, "banpubkey", [s.pubkey, "abuse"])).toEqual({ result: true });
    expect((await askInvite(c)).closed).toBe(INVITE_MEMBERS);
    const puppet = signer();
    const pc = await connectAs(relay, puppet);
    const join = joinRequest(puppet, code);
    expect(await pc.publish(join)).toEqual(["OK", join.id, false, INVALID_CODE]);
    expect(await pc.publish(note(puppet))).toEqual(["OK", expect.any(String), false, REFUSED]);
    expect(await listed(c)).not.toContain(puppet.pubkey);
    // Membership is the stored row, ban or not: removemember announces its end.
    expect(await adminCall(relay, "removemember", [s.pubkey, "banned"])).toEqual({ result: true });
    expect((await relayEvents(c, 8001, s.pubkey)).length).toBe(1);
    expect(await listed(c)).not.toContain(s.pubkey);
    pc.close();
    c.close();
  });

  test("createinvitecode (NIP-86) makes a code a stranger joins with", async () => {
    const { result } = await adminCall(relay, "createinvitecode");
    expect(result.code).toMatch(/^[a-z2-7]{16}$/);
    expect(result.expires_at).toBeGreaterThan(now() + 600);
    const s = signer();
    const c = await connectAs(relay, s);
    expect((await c.publish(joinRequest(s, result.code)))[3]).toStartWith("info: welcome to ");
    await accepted(c, note(s));
    c.close();
  });
});

describe("metrics", () => {
  test("bunstr_member_invites_total counts codes issued, claimed, invalid and expired; members are a basis of the gauge", async () => {
    const text = await (await fetch(`${httpUrl(relay)}metrics`)).text();
    const value = (result: string) =>
      Number(text.match(new RegExp(`^bunstr_member_invites_total\\{result="${result}"\\} (\\d+)$`, "m"))?.[1] ?? 0);
    // The tests above issued codes, claimed them, tried invalid and expired ones.
    for (const result of ["issued", "claimed", "invalid", "expired"]) expect(value(result), result).toBeGreaterThan(0);
    expect(value("claimed")).toBeLessThanOrEqual(value("issued") + 1);
    expect(text).toMatch(/^bunstr_admitted_pubkeys\{basis="member"\} [1-9]\d*$/m);
  });
});

describe("leaving and removal", () => {
  test("leave (28936): 8001, a 13534 without them, writes refused; leaving again says so", async () => {
    const { s, c } = await member();
    expect(await listed(c)).toContain(s.pubkey);
    const leave = leaveRequest(s);
    expect(await c.publish(leave)).toEqual(["OK", leave.id, true, LEFT]);
    const [removed] = await relayEvents(c, 8001, s.pubkey);
    expect(removed!.tags).toEqual([["-"], ["p", s.pubkey]]);
    expect(await listed(c)).not.toContain(s.pubkey);
    expect(await c.publish(note(s))).toEqual(["OK", expect.any(String), false, REFUSED]);
    const again = leaveRequest(s);
    expect(await c.publish(again)).toEqual(["OK", again.id, true, NOT_MEMBER]);
    c.close();
  });

  test("removemember (NIP-86): 8001 and the member can no longer write", async () => {
    const { s, c } = await member();
    await accepted(c, note(s));
    expect(await adminCall(relay, "removemember", [s.pubkey, "spam"])).toEqual({ result: true });
    expect((await relayEvents(c, 8001, s.pubkey)).length).toBe(1);
    expect(await listed(c)).not.toContain(s.pubkey);
    expect(await c.publish(note(s))).toEqual(["OK", expect.any(String), false, REFUSED]);
    c.close();
  });

  test("a removed or departed member's open invite code admits nobody (issue 33 review, M6)", async () => {
    for (const how of ["removed", "left"] as const) {
      const { s, c } = await member();
      const { code } = await askInvite(c);
      expect(code).toBeDefined();
      if (how === "removed") expect(await adminCall(relay, "removemember", [s.pubkey, "kicked"])).toEqual({ result: true });
      else expect((await c.publish(leaveRequest(s)))[3]).toBe(LEFT);
      const puppet = signer();
      const pc = await connectAs(relay, puppet);
      expect(await pc.publish(joinRequest(puppet, code))).toEqual(["OK", expect.any(String), false, INVALID_CODE]);
      expect(await pc.publish(note(puppet))).toEqual(["OK", expect.any(String), false, REFUSED]);
      c.close();
      pc.close();
    }
  });

  test("joins and leaves are never fanned out to subscribers", async () => {
    const watcher = await member();
    const sub = "watch-requests";
    expect((await watcher.c.req(sub, { kinds: [28934, 28936] })).end).toEqual(["EOSE", sub]);
    const { code } = await askInvite(watcher.c);
    const s = signer();
    const c = await connectAs(relay, s);
    expect((await c.publish(joinRequest(s, code)))[2]).toBe(true);
    expect((await c.publish(leaveRequest(s)))[3]).toBe(LEFT);
    // Fanned out, they would have been sent before their OKs; a REQ answered after them on the
    // watcher's connection comes after anything sent to it before.
    expect((await watcher.c.req("after", { ids: ["0".repeat(64)] })).end).toEqual(["EOSE", "after"]);
    expect(watcher.c.eventsFor(sub)).toEqual([]);
    c.close();
  });
});

describe("reading restricted to members", () => {
  let r: TestRelay;
  beforeAll(async () => {
    r = await startTestRelay({
      membership: { enabled: true },
      authorization: { read: "members" },
      admin: { pubkeys: [admin.pubkey] },
    });
  });
  afterAll(() => r?.stop());

  test("a non-member's REQ is CLOSED, a member reads", async () => {
    const m = signer();
    expect(await adminCall(r, "addmember", [m.pubkey, ""])).toEqual({ result: true });
    const mc = await connectAs(r, m);
    const posted = note(m, "members only");
    await accepted(mc, posted);

    const anon = await Client.connect(r.url);
    expect((await anon.req("a", { kinds: [1] })).end).toEqual([
      "CLOSED",
      "a",
      "auth-required: this relay is for its members: authenticate first",
    ]);
    const outsider = signer();
    const oc = await connectAs(r, outsider);
    expect((await oc.req("o", { kinds: [1] })).end).toEqual(["CLOSED", "o", "restricted: this relay is for its members"]);
    const { events, end } = await mc.req("m", { ids: [posted.id] });
    expect(end).toEqual(["EOSE", "m"]);
    expect(events.map((e) => e.id)).toEqual([posted.id]);
    for (const x of [mc, anon, oc]) x.close();
  });
});

describe("the member list at start", () => {
  test("a restart with the same members writes no new 13534; a smaller max_members_listed writes one", async () => {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = mkdtempSync(join(tmpdir(), "bunstr-membership-"));
    const patch = { membership: { enabled: true }, admin: { pubkeys: [admin.pubkey] } };
    let r = await startTestRelay(patch, { dir });
    const [a, b] = [signer(), signer()];
    for (const s of [a, b]) expect(await adminCall(r, "addmember", [s.pubkey, ""])).toEqual({ result: true });
    const key = r.ctx.relayKey.pubkey;
    const lists = async (x: TestRelay) => {
      const c = await Client.connect(x.url);
      const { events } = await c.req("l", { kinds: [13534], authors: [key] });
      c.close();
      return events;
    };
    const before = await lists(r);
    // Oldest first; added in the same second, by pubkey. a was added before b: in an earlier
    // second (a loaded run crossed one between the two calls) a comes first whatever its pubkey.
    const sameSecond = [a.pubkey, b.pubkey].sort();
    const listed = before[0]!.tags.slice(1).map((t) => t[1]!);
    expect(before[0]!.tags[0]).toEqual(["-"]);
    expect([sameSecond, [a.pubkey, b.pubkey]]).toContainEqual(listed);
    expect(before[0]!.tags.slice(1).map((t) => t[0])).toEqual(["member", "member"]);
    await r.stop();

    r = await startTestRelay(patch, { dir });
    expect((await lists(r))[0]!.id).toBe(before[0]!.id);
    await r.stop();

    r = await startTestRelay({ ...patch, membership: { enabled: true, max_members_listed: 1 } }, { dir });
    const after = await lists(r);
    expect(after[0]!.tags).toEqual([["-"], ["member", listed[0]!]]);
    expect(after[0]!.created_at).toBeGreaterThan(before[0]!.created_at);
    await r.stop();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe("a real client (nostr-tools)", () => {
  test("asks for an invite, joins with it and publishes through nostr-tools' Relay, authenticating as the NIP asks", async () => {
    const { c } = await member();
    const { code } = await askInvite(c);
    c.close();
    const s = signer();
    const onauth = async (t: EventTemplate) => finalizeEvent(t, s.sk);
    const tools = await ToolsRelay.connect(relay.url);
    try {
      // The 28934 is protected (NIP-70): its author authenticates first, to the challenge sent at connect.
      await waitUntil("the AUTH challenge", () => (tools as unknown as { challenge?: string }).challenge !== undefined, 5000);
      await tools.auth(onauth);
      const reason = await tools.publish(
        finalizeEvent({ kind: 28934, created_at: now(), tags: [["-"], ["claim", code!]], content: "" }, s.sk),
      );
      expect(reason).toBe(`info: welcome to ${RELAY_URL}`);
      const posted = finalizeEvent({ kind: 1, created_at: now(), tags: [], content: "via nostr-tools" }, s.sk);
      expect(await tools.publish(posted)).toBe("");
      const pool = new SimplePool();
      const got = await pool.querySync([relay.url], { ids: [posted.id] });
      pool.destroy();
      expect(got.map((e) => e.id)).toEqual([posted.id]);
    } finally {
      tools.close();
    }
  });
});

describe("access/members.ts against a store", () => {
  const open = async () => {
    const store = new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 1 });
    const config = testConfig({ membership: { enabled: true, invites_per_member: 2 }, admin: { pubkeys: [admin.pubkey] } });
    const registry = new AdmissionRegistry({ store: store.admission, config: () => config });
    await registry.load();
    return { store, registry, members: new Members(registry, store.admission, () => config) };
  };
  let n = 0;
  const code = () => `code${(++n).toString().padStart(12, "0")}`;

  test("two joins racing for one code: one member, the other told the code is used", async () => {
    const { store, registry, members } = await open();
    try {
      const t = now();
      const { row } = (await members.invite(admin.pubkey, true, t, code)) as { row: { code: string } };
      const [x, y] = [signer().pubkey, signer().pubkey];
      const results = await Promise.all([members.join(x, row.code, t), members.join(y, row.code, t)]);
      expect(results.filter((r) => r.joined)).toHaveLength(1);
      expect(results.filter((r) => !r.joined)).toEqual([{ joined: false, why: "used" }]);
      expect([x, y].filter((pk) => members.has(pk) && (registry.bits(pk) & BASIS_BIT.member) !== 0)).toHaveLength(1);
    } finally {
      await store.close();
    }
  });

  test("one join per pubkey at once; a member joining again is told so and uses no code", async () => {
    const { store, members } = await open();
    try {
      const t = now();
      const a = (await members.invite(admin.pubkey, true, t, code)) as { row: { code: string } };
      const s = signer().pubkey;
      const [first, second] = await Promise.all([members.join(s, a.row.code, t), members.join(s, a.row.code, t)]);
      expect(first).toEqual({ joined: true, issuer: admin.pubkey });
      expect(second).toEqual({ joined: false, why: "busy" });
      const b = (await members.invite(admin.pubkey, true, t, code)) as { row: { code: string } };
      expect(await members.join(s, b.row.code, t)).toEqual({ joined: false, why: "member" });
      // b is still open: the admin is handed it again.
      expect(((await members.invite(admin.pubkey, true, t, code)) as { row: { code: string } }).row.code).toBe(b.row.code);
    } finally {
      await store.close();
    }
  });

  test("quota: a member's codes that were used (expired unused ones do not count); asked at once, one code made", async () => {
    const { store, registry, members } = await open();
    try {
      const t = now();
      const m = signer().pubkey;
      await members.add(m, admin.pubkey, t);
      // A code that expired unused admitted nobody: it does not count.
      await store.admission.putInvite({
        code: code(),
        issuer: m,
        created_at: t - 7200,
        expires_at: t - 3600,
        used_by: null,
        used_at: null,
      });
      const asked = await Promise.all([1, 2, 3].map(() => members.invite(m, false, t, code)));
      const codes = new Set(asked.map((r) => (r as { row: { code: string } }).row.code));
      expect(codes.size).toBe(1);
      for (let i = 0; i < 2; i++) {
        const r = (await members.invite(m, false, t, code)) as { row: { code: string } };
        expect((await members.join(signer().pubkey, r.row.code, t)).joined).toBe(true);
      }
      expect(await members.invite(m, false, t, code)).toBe("none-left");
      expect((await store.admission.invitesBy(m)).length).toBe(3);
      // The quota is the store's: another process (another Postgres node) asking meanwhile makes no more.
      const other = new Members(registry, store.admission, () => testConfig({ membership: { enabled: true, invites_per_member: 2 } }));
      expect(await other.invite(m, false, t, code)).toBe("none-left");
    } finally {
      await store.close();
    }
  });

  test("load reads the member rows only, oldest first; remove revokes", async () => {
    const { store, registry, members } = await open();
    try {
      const [x, y] = [signer().pubkey, signer().pubkey];
      await registry.admit(x, "paid", {});
      await members.add(y, admin.pubkey, now());
      const fresh = new Members(registry, store.admission, () => testConfig({ membership: { enabled: true } }));
      await fresh.load();
      expect(fresh.list().map((m) => m.pubkey)).toEqual([y]);
      expect(fresh.list()[0]!.evidence).toMatchObject({ via: "admin", invited_by: admin.pubkey });
      expect(await fresh.remove(y, "test")).toBe(true);
      expect(await fresh.remove(y, "test")).toBe(false);
      expect(registry.bits(y) & BASIS_BIT.member).toBe(0);
      // Membership is the registry's answer, for every instance (on Postgres, every node).
      expect(members.has(y)).toBe(false);
    } finally {
      await store.close();
    }
  });
});
