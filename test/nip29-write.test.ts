// NIP-29 over the wire: who may write what in a group (issue 32, point 4), what malformed or
// flooding input does (point 8), and that a restart rebuilds what the writes decided. The answers
// are OK frames; the state is read in-process (relay.ctx.groups), where listgroups reads it.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join as pathJoin } from "node:path";
import type { Client, Signer, TestRelay } from "./helpers.ts";
import { accepted, failOnRelayErrors, now, refusedWith, signer, startTestRelay, waitUntil } from "./helpers.ts";
import { authAs, connectAs, createGroup, groupRelay, join, mod } from "./groups-helpers.ts";
import { databaseFor, dropDatabase, onPostgres } from "./postgres-env.ts";

failOnRelayErrors();

let relay: TestRelay;
let owner: Signer;
let c: Client;
const state = () => relay.ctx.groups!;
const roles = (id: string, pk: string) =>
  state()
    .members(id)
    ?.find((m) => m.pubkey === pk)?.roles;

beforeAll(async () => {
  relay = await groupRelay({ groups: { max_members_per_group: 3, max_groups_per_pubkey: 2 } });
  owner = signer();
  c = await connectAs(relay);
});
afterAll(async () => {
  c.close();
  await relay.stop();
});

/** A fresh group of a fresh owner (max_groups_per_pubkey is 2 here). */
async function freshGroup(flags: string[][] = []): Promise<{ id: string; admin: Signer }> {
  const admin = signer();
  const id = `g-${Math.random().toString(36).slice(2, 10)}`;
  await createGroup(c, relay, admin, id, flags);
  return { id, admin };
}

describe("who may write (point 4)", () => {
  test("an h tag naming no group: invalid:", async () => {
    const ok = await c.publish(mod(9, signer(), "nosuchgroup"));
    expect(ok.slice(2)).toEqual([false, 'invalid: no group "nosuchgroup" on this relay']);
  });

  test("restricted group: an outsider restricted:, a member OK", async () => {
    const { id, admin } = await freshGroup([["restricted"]]);
    const member = signer();
    await accepted(c, mod(9000, admin, id, [["p", member.pubkey]]));
    await refusedWith(c, mod(9, signer(), id), "restricted: only members can write in this group");
    await accepted(c, mod(9, member, id));
  });

  test("a moderator cannot remove an admin nor give roles; an admin can", async () => {
    const { id, admin } = await freshGroup();
    const moderator = signer();
    const other = signer();
    await accepted(c, mod(9000, admin, id, [["p", moderator.pubkey, "moderator"]]));
    await accepted(c, mod(9000, moderator, id, [["p", other.pubkey]])); // a plain member: allowed
    await refusedWith(c, mod(9001, moderator, id, [["p", admin.pubkey]]), "restricted: a moderator cannot act on an admin");
    await refusedWith(c, mod(9000, moderator, id, [["p", other.pubkey, "moderator"]]), "restricted: a moderator cannot change roles");
    expect(roles(id, other.pubkey)).toEqual([]);
    await accepted(c, mod(9000, admin, id, [["p", other.pubkey, "moderator"]]));
    expect(roles(id, other.pubkey)).toEqual(["moderator"]);
    await accepted(c, mod(9001, admin, id, [["p", moderator.pubkey]]));
    expect(roles(id, moderator.pubkey)).toBeUndefined();
  });

  test("a removed user cannot post nor rejoin (blocked:) until a 9000 puts them back; one who left can rejoin", async () => {
    const { id, admin } = await freshGroup();
    const user = signer();
    expect(await join(c, user, id)).toEqual(["OK", expect.any(String), true, ""]);
    await accepted(c, mod(9001, admin, id, [["p", user.pubkey]]));
    await refusedWith(c, mod(9, user, id), "blocked: you were removed from this group");
    expect((await join(c, user, id)).slice(2)).toEqual([false, "blocked: you were removed from this group"]);
    await accepted(c, mod(9000, admin, id, [["p", user.pubkey]]));
    await accepted(c, mod(9, user, id));
    const leaver = signer();
    expect((await join(c, leaver, id))[2]).toBe(true);
    await accepted(c, mod(9022, leaver, id));
    expect((await join(c, leaver, id))[2]).toBe(true);
  });

  test("closed group: 9021 without a code or with a wrong one restricted:, with an invite code OK", async () => {
    const { id, admin } = await freshGroup([["closed"]]);
    const user = signer();
    expect((await join(c, user, id)).slice(2)).toEqual([false, "restricted: this group is closed: joining needs an invite code"]);
    expect((await join(c, user, id, "wrong")).slice(2)).toEqual([false, "restricted: unknown invite code"]);
    await accepted(c, mod(9009, admin, id, [["code", "let-me-in"]]));
    expect((await join(c, user, id, "let-me-in"))[2]).toBe(true);
    expect(roles(id, user.pubkey)).toEqual([]);
  });

  test('supported_kinds ["9"]: kind 1 blocked:, kind 9 OK; default_kinds applies to a group without the tag', async () => {
    const { id, admin } = await freshGroup([["supported_kinds", "9"]]);
    await refusedWith(c, mod(1, admin, id), "blocked: kind 1 is not accepted in this group");
    await accepted(c, mod(9, admin, id));
    const open = await freshGroup();
    await accepted(c, mod(1, open.admin, open.id));
    relay.ctx.config.groups.default_kinds = [9, 11]; // as a reload would
    try {
      await refusedWith(c, mod(1, open.admin, open.id), "blocked: kind 1 is not accepted in this group");
      await accepted(c, mod(11, open.admin, open.id));
      await refusedWith(c, mod(11, admin, id), "blocked: kind 11 is not accepted in this group"); // the group's own tag wins
    } finally {
      relay.ctx.config.groups.default_kinds = [];
    }
  });

  test("previous: a recent id's prefix OK, a random prefix invalid:", async () => {
    const { id, admin } = await freshGroup();
    const x = mod(9, admin, id);
    await accepted(c, x);
    await accepted(c, mod(9, admin, id, [["previous", x.id.slice(0, 8)]]));
    const random = "0123abcd" === x.id.slice(0, 8) ? "fedc3210" : "0123abcd";
    await refusedWith(
      c,
      mod(9, admin, id, [["previous", random]]),
      `invalid: previous reference "${random}" names no recent event of this group`,
    );
  });

  test("late publication: an event of 2 h ago and a moderation event of an hour ago are invalid:", async () => {
    const { id, admin } = await freshGroup();
    await refusedWith(c, mod(9, admin, id, [], now() - 7200), "invalid: event is older than this group accepts (late publication, 3600 s)");
    await refusedWith(c, mod(9000, admin, id, [["p", signer().pubkey]], now() - 3660), "invalid: event is older than this group accepts");
    await accepted(c, mod(9, admin, id, [], now() - 60));
  });
});

describe("bad input (point 8)", () => {
  test("each malformed moderation event is refused with its reason and changes no group", async () => {
    await createGroup(c, relay, owner, "bad-input");
    const before = JSON.stringify(state().list());
    const membersBefore = JSON.stringify(state().members("bad-input"));
    const cases: [ReturnType<typeof mod>, string][] = [
      [mod(9000, owner, "bad-input"), "invalid: 9000 needs a p tag with a 64-hex pubkey"],
      [mod(9000, owner, "bad-input", [["p", "zz"]]), "invalid: 9000 needs a p tag with a 64-hex pubkey"],
      [mod(9000, owner, "bad-input", [["p", signer().pubkey, "overlord"]]), 'invalid: unknown role "overlord" (roles: admin, moderator)'],
      [mod(9005, owner, "bad-input"), "invalid: 9005 needs 1-100 e tags of 64-hex ids"],
      [mod(9009, owner, "bad-input"), "invalid: 9009 needs a code tag (1-128 characters)"],
      [mod(9, owner, "bad-input", [["h", "other"]]), "invalid: an event belongs to one group (one h tag)"],
      [mod(9, owner, "not a group id!"), "invalid: group id must be 1-64 characters of a-z, A-Z, 0-9, - and _"],
      [mod(9000, owner, "missing-group", [["p", signer().pubkey]]), 'invalid: no group "missing-group" on this relay'],
      [owner.sign({ kind: 9000, tags: [["p", signer().pubkey]] }), "invalid: group moderation events need an h tag"],
      [mod(9002, owner, "bad-input", [["parent", "no-such-parent"]]), 'invalid: no group "no-such-parent" to be the parent'],
      [mod(9002, owner, "bad-input", [["parent", "bad-input"]]), "invalid: a group cannot be its own parent"],
      [
        owner.sign({
          kind: 39000,
          tags: [
            ["d", "bad-input"],
            ["name", "mine now"],
          ],
        }),
        "blocked: only the relay signs group metadata (kinds 39000-39009)",
      ],
    ];
    for (const [e, reason] of cases) expect((await c.publish(e)).slice(2)).toEqual([false, reason]);
    expect(JSON.stringify(state().list())).toBe(before);
    expect(JSON.stringify(state().members("bad-input"))).toBe(membersBefore);
  });

  test("join flood: 50 joins of one pubkey one after another: 1 OK, the rest duplicate:", async () => {
    const { id } = await freshGroup();
    const user = signer();
    const answers: boolean[] = [];
    for (let i = 0; i < 50; i++) {
      const ok = await c.publish(user.sign({ kind: 9021, content: `try ${i}`, tags: [["h", id]] }));
      answers.push(ok[2]);
      if (!ok[2]) expect(ok[3]).toBe("duplicate: already a member");
    }
    expect(answers.filter(Boolean).length).toBe(1);
    expect(state().members(id)!.length).toBe(2);
  });

  test("join flood sent at once: one membership; every answer OK or duplicate:", async () => {
    const { id } = await freshGroup();
    const user = signer();
    const joins = Array.from({ length: 50 }, (_, i) => user.sign({ kind: 9021, content: `burst ${i}`, tags: [["h", id]] }));
    const oks = await Promise.all(joins.map((e) => c.publish(e)));
    for (const ok of oks) if (!ok[2]) expect(ok[3]).toBe("duplicate: already a member");
    expect(oks.some((ok) => ok[2])).toBe(true);
    expect(
      state()
        .members(id)!
        .map((m) => m.pubkey),
    ).toContain(user.pubkey);
    expect(state().members(id)!.length).toBe(2);
  });

  test("max_members_per_group = 3: the 4th member blocked:", async () => {
    const { id, admin } = await freshGroup();
    expect((await join(c, signer(), id))[2]).toBe(true);
    expect((await join(c, signer(), id))[2]).toBe(true);
    expect((await join(c, signer(), id)).slice(2)).toEqual([false, "blocked: group is full (3 members)"]);
    await refusedWith(c, mod(9000, admin, id, [["p", signer().pubkey]]), "blocked: group is full (3 members)");
    expect(state().members(id)!.length).toBe(3);
  });

  test("max_groups_per_pubkey = 2: the 3rd create blocked:; 1,000 creates sent at once leave 2 groups", async () => {
    const creator = signer();
    const own = await connectAs(relay, creator);
    await accepted(own, mod(9007, creator, "mine-1"));
    await accepted(own, mod(9007, creator, "mine-2"));
    await refusedWith(own, mod(9007, creator, "mine-3"), "blocked: you have created the most groups allowed (2)");
    const flooder = signer();
    const flood = await connectAs(relay, flooder);
    const creates = Array.from({ length: 1000 }, (_, i) => mod(9007, flooder, `flood-${i}`));
    const oks = await Promise.all(creates.map((e) => flood.publish(e)));
    for (const ok of oks) if (!ok[2]) expect(ok[3]).toStartWith("blocked: you have created the most groups allowed (2)");
    expect(
      state()
        .list()
        .filter((g) => g.createdBy === flooder.pubkey).length,
    ).toBe(2);
    own.close();
    flood.close();
  });

  test("9007 without AUTH: auth-required:", async () => {
    const anon = await connectAs(relay);
    const ok = await anon.publish(mod(9007, signer(), "needs-auth"));
    expect(ok.slice(2)).toEqual([false, "auth-required: authenticate to create a group"]);
    anon.close();
    await authAs(c, owner, relay.url); // already AUTHed: nothing sent
  });
});

describe("creates per address (review of issue 32, finding 6)", () => {
  test("fresh keys from one address: past creates_per_address_per_hour, rate-limited:; a refused create is not charged", async () => {
    const r = await groupRelay({ groups: { creates_per_address_per_hour: 2 }, rate_limits: { exempt_private_addresses: false } });
    const sybils = [signer(), signer(), signer()];
    const conns = await Promise.all(sybils.map((s) => connectAs(r, s)));
    try {
      await accepted(conns[0]!, mod(9007, sybils[0]!, "sybil-1"));
      // The group rule refuses it first (the id exists): no token taken.
      await refusedWith(conns[1]!, mod(9007, sybils[1]!, "sybil-1"), "duplicate:");
      await accepted(conns[1]!, mod(9007, sybils[1]!, "sybil-2"));
      await refusedWith(conns[2]!, mod(9007, sybils[2]!, "sybil-3"), "rate-limited: too many groups created from this address");
      expect(
        r.ctx
          .groups!.list()
          .map((g) => g.id)
          .sort(),
      ).toEqual(["sybil-1", "sybil-2"]);
      // Other group events from the address are not charged to it.
      await accepted(conns[0]!, mod(9002, sybils[0]!, "sybil-1", [["private"]]));
    } finally {
      for (const x of conns) x.close();
      await r.close();
    }
  });
});

describe("after a restart (the state rebuilt from the store)", () => {
  test("members, removals, invites and the previous windows are as before", async () => {
    const dir = mkdtempSync(pathJoin(tmpdir(), "bunstr-groups-"));
    const [admin, member, removed] = [signer(), signer(), signer()];
    let r = await groupRelay({}, { dir });
    let rc = await connectAs(r);
    try {
      await createGroup(rc, r, admin, "kept", [["restricted"], ["closed"]]);
      for (const code of ["k1", "k2", "k3", "k4"]) await accepted(rc, mod(9009, admin, "kept", [["code", code]]));
      expect((await join(rc, member, "kept", "k1"))[2]).toBe(true);
      expect((await join(rc, removed, "kept", "k2"))[2]).toBe(true);
      await accepted(rc, mod(9001, admin, "kept", [["p", removed.pubkey]]));
      const x = mod(9, member, "kept");
      await accepted(rc, x);
      const before = JSON.stringify([r.ctx.groups!.list(), r.ctx.groups!.members("kept"), r.ctx.groups!.invites("kept")]);
      rc.close();
      await r.close();
      r = await groupRelay({}, { dir });
      rc = await connectAs(r);
      expect(JSON.stringify([r.ctx.groups!.list(), r.ctx.groups!.members("kept"), r.ctx.groups!.invites("kept")])).toBe(before);
      await accepted(rc, mod(9, member, "kept", [["previous", x.id.slice(0, 8)]]));
      await refusedWith(rc, mod(9, member, "kept", [["previous", "00000000"]]), "invalid: previous reference");
      await refusedWith(rc, mod(9, signer(), "kept"), "restricted: only members can write in this group");
      await refusedWith(rc, mod(9, removed, "kept"), "blocked: you were removed from this group");
      // The codes used before the restart stay used (a code admits one join); the others still admit.
      expect((await join(rc, signer(), "kept", "k1"))[3]).toBe("restricted: unknown invite code");
      expect((await join(rc, signer(), "kept", "k3"))[2]).toBe(true);
    } finally {
      rc.close();
      await r.close();
      rmSync(dir, { recursive: true, force: true });
      if (onPostgres) await dropDatabase(databaseFor(dir));
    }
  });
});

describe("[mirror] (review of issue 32, finding 5)", () => {
  test("posts arriving from a mirrored relay pass a direct post's checks: no group, restricted, removed are not stored; a member's is", async () => {
    const source = await startTestRelay({});
    const logs = spyOn(console, "log");
    const local = await groupRelay({ mirror: { relays: [source.url] } });
    try {
      await waitUntil("the mirror's subscription", () => logs.mock.calls.some((x) => String(x[0]).includes("subscribed to")), 10_000);
      const [admin, member, removed, outsider] = [signer(), signer(), signer(), signer()];
      const id = `m-${Math.random().toString(36).slice(2, 10)}`;
      const a = await connectAs(local, admin);
      await createGroup(a, local, admin, id, [["restricted"]]);
      await accepted(a, mod(9000, admin, id, [["p", member.pubkey]]));
      await accepted(a, mod(9000, admin, id, [["p", removed.pubkey]]));
      await accepted(a, mod(9001, admin, id, [["p", removed.pubkey]]));
      const w = await connectAs(source);
      const refused = [mod(9, outsider, id), mod(9, removed, id), mod(9, outsider, `none-${id}`)];
      const fine = mod(9, member, id);
      for (const e of [...refused, fine]) await accepted(w, e);
      let seen: string[] = [];
      for (let i = 0; i < 200 && !seen.includes(fine.id); i++) {
        await Bun.sleep(50);
        seen = (await a.req(`s${i}`, { ids: [...refused, fine].map((e) => e.id) })).events.map((e) => e.id);
      }
      expect(seen).toEqual([fine.id]);
      for (const x of [a, w]) x.close();
    } finally {
      logs.mockRestore();
      await local.stop();
      await source.stop();
    }
  }, 30_000);
});
