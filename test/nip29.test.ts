// NIP-29 over the wire, the relay's side (issue 32): every moderation kind and what the relay
// publishes in answer, signed by its key (NIP-11 self): 39000-39005, the 9000 answering a join,
// the 9001 answering a leave (point 3); deletions by 9005, 9008, NIP-09 and NIP-62 (point 6);
// the state surviving a restart.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join as joinPath } from "node:path";
import { Database } from "bun:sqlite";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import type { Filter } from "../src/protocol/filter.ts";
import { writeCost } from "../src/policy/write-cost.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { RULES } from "./memory-answers.ts";
import { onPostgres } from "./postgres-env.ts";
import type { Client, Signer, TestRelay } from "./helpers.ts";
import { accepted, failOnRelayErrors, openTestStore, refusedWith, relayInfo, signer, storeEvents, testConfig } from "./helpers.ts";
import { afterRestart, authAs, connectAs, createGroup, groupRelay, join, mod, purged, relayEvents } from "./groups-helpers.ts";

failOnRelayErrors();

let relay: TestRelay;
let c: Client;
let self: string;

beforeAll(async () => {
  relay = await groupRelay();
  c = await connectAs(relay);
  self = (await relayInfo(relay.url)).self;
});
afterAll(async () => {
  c.close();
  await relay.stop();
});

const freshId = () => `g-${Math.random().toString(36).slice(2, 10)}`;

/** A fresh group of a fresh owner, the owner AUTHed on `c`. */
async function freshGroup(flags: string[][] = []): Promise<{ id: string; owner: Signer }> {
  const owner = signer();
  const id = freshId();
  await createGroup(c, relay, owner, id, flags);
  return { id, owner };
}

/** The p tags of the relay's latest `kind` of group `id`. */
async function listed(id: string, kind: number): Promise<string[][]> {
  const e = (await relayEvents(c, id, self)).get(kind);
  return e ? e.tags.filter((t) => t[0] === "p") : [];
}

/** Stored events matching `filter`, read from the store itself (no read rule: what the relay holds). */
async function stored(r: TestRelay, filter: Filter): Promise<NostrEvent[]> {
  const out: NostrEvent[] = [];
  for await (const rows of r.ctx.store.query({ filters: [filter], limits: [1000], maxSeq: r.ctx.store.lastSeq(), now: 0 }))
    for (const json of rows) out.push(JSON.parse(json) as NostrEvent);
  return out;
}

/** Writes `e` as the relay's own writer does (no policy): a row a purge has not reached yet. */
async function storeRaw(r: TestRelay, e: NostrEvent): Promise<void> {
  expect((await r.ctx.writer.enqueue({ event: e, json: serializeEvent(e), cost: 1 })).stored).toBe(true);
}

/** Stored events matching `filter`, read by `reader` (c: AUTHed as every owner so far). */
async function read(filter: Record<string, unknown>, reader: Client = c): Promise<NostrEvent[]> {
  const sub = `r-${Math.random().toString(36).slice(2, 10)}`;
  const { events } = await reader.req(sub, filter);
  reader.send(["CLOSE", sub]);
  return events;
}

describe("every kind: what the relay publishes (point 3)", () => {
  test("create: 9007 without AUTH auth-required:, with AUTH OK; 39000-39003 appear signed by self", async () => {
    const owner = signer();
    const id = freshId();
    const anonymous = await connectAs(relay);
    await refusedWith(anonymous, mod(9007, owner, id), "auth-required:");
    anonymous.close();
    expect(self).toBe(relay.ctx.relayKey.pubkey);
    await createGroup(c, relay, owner, id);
    const events = await relayEvents(c, id, self);
    expect([...events.keys()].sort()).toEqual([39000, 39001, 39002, 39003]);
    for (const e of events.values()) {
      expect(e.pubkey).toBe(self);
      expect(e.tags[0]).toEqual(["d", id]);
    }
    expect(events.get(39001)!.tags.slice(1)).toEqual([["p", owner.pubkey, "admin"]]);
    expect(events.get(39002)!.tags.slice(1)).toEqual([["p", owner.pubkey]]);
    expect(
      events
        .get(39003)!
        .tags.filter((t) => t[0] === "role")
        .map((t) => t[1]),
    ).toEqual(["admin", "moderator"]);
  });

  test("put-user with roles updates 39001 and 39002; remove-user updates 39002", async () => {
    const { id, owner } = await freshGroup();
    const mod1 = signer();
    const plain = signer();
    await accepted(c, mod(9000, owner, id, [["p", mod1.pubkey, "moderator"]]));
    await accepted(c, mod(9000, owner, id, [["p", plain.pubkey]]));
    expect(await listed(id, 39001)).toContainEqual(["p", mod1.pubkey, "moderator"]);
    expect((await listed(id, 39001)).map((t) => t[1])).not.toContain(plain.pubkey);
    expect((await listed(id, 39002)).map((t) => t[1]).sort()).toEqual([owner.pubkey, mod1.pubkey, plain.pubkey].sort());
    await accepted(c, mod(9001, owner, id, [["p", plain.pubkey]]));
    expect((await listed(id, 39002)).map((t) => t[1]).sort()).toEqual([owner.pubkey, mod1.pubkey].sort());
  });

  test("edit-metadata: a full edit (nostr-tools) sets and clears flags; a partial name-only edit keeps private", async () => {
    const { id, owner } = await freshGroup();
    const flags = async () => {
      const e = (await relayEvents(c, id, self)).get(39000)!;
      return {
        name: e.tags.find((t) => t[0] === "name")?.[1],
        flags: e.tags.map((t) => t[0]).filter((n) => ["private", "closed", "restricted", "hidden"].includes(n!)),
      };
    };
    await accepted(c, mod(9002, owner, id, [["name", "first"], ["private"], ["closed"]]));
    expect(await flags()).toEqual({ name: "first", flags: ["private", "closed"] });
    await accepted(c, mod(9002, owner, id, [["name", "second"], ["private"]]));
    expect(await flags()).toEqual({ name: "second", flags: ["private"] });
    await accepted(c, mod(9002, owner, id, [["name", "third"]]));
    expect(await flags()).toEqual({ name: "third", flags: ["private"] });
  });

  test("9009 then 9021 with the code joins a closed group; the relay publishes a 9000 for the joiner", async () => {
    const { id, owner } = await freshGroup([["closed"]]);
    const joiner = signer();
    await refusedWith(c, mod(9021, joiner, id), "restricted:");
    await accepted(c, mod(9009, owner, id, [["code", "letmein"]]));
    expect(await join(c, joiner, id, "letmein")).toEqual(["OK", expect.any(String), true, ""]);
    const answers = await read({ kinds: [9000], authors: [self], "#h": [id], "#p": [joiner.pubkey] });
    expect(answers.length).toBe(1);
    expect((await listed(id, 39002)).map((t) => t[1])).toContain(joiner.pubkey);
    // A code admits one join (the 9021 that used it is readable): a second joiner with it is refused.
    const second = signer();
    expect((await join(c, second, id, "letmein")).slice(2)).toEqual([false, "restricted: unknown invite code"]);
  });

  test("9021 by a member: duplicate:", async () => {
    const { id } = await freshGroup();
    const user = signer();
    expect((await join(c, user, id))[2]).toBe(true);
    const again = await join(c, user, id);
    expect(again[2]).toBe(false);
    expect(again[3]).toStartWith("duplicate: ");
  });

  test("9022: the relay's 9001 names the request; 39002 without the leaver", async () => {
    const { id, owner } = await freshGroup();
    const user = signer();
    expect((await join(c, user, id))[2]).toBe(true);
    const leave = mod(9022, user, id);
    await accepted(c, leave);
    const answers = await read({ kinds: [9001], authors: [self], "#h": [id] });
    expect(answers.length).toBe(1);
    expect(answers[0]!.tags).toContainEqual(["p", user.pubkey]);
    expect(answers[0]!.tags).toContainEqual(["e", leave.id]);
    expect((await listed(id, 39002)).map((t) => t[1])).toEqual([owner.pubkey]);
    // Left, not removed: may join again.
    expect((await join(c, user, id))[2]).toBe(true);
  });

  test("9010 pins: 39005 lists them in order", async () => {
    const { id, owner } = await freshGroup();
    const a = owner.sign({ kind: 9, content: "a", tags: [["h", id]] });
    const b = owner.sign({ kind: 9, content: "b", tags: [["h", id]] });
    await accepted(c, a);
    await accepted(c, b);
    await accepted(
      c,
      mod(9010, owner, id, [
        ["e", b.id],
        ["e", a.id],
        ["a", `30023:${owner.pubkey}:x`],
      ]),
    );
    const pins = (await relayEvents(c, id, self)).get(39005)!;
    expect(pins.tags).toEqual([
      ["d", id],
      ["e", b.id],
      ["e", a.id],
      ["a", `30023:${owner.pubkey}:x`],
    ]);
  });

  test("39000-39005 signed by anyone but the relay: blocked:", async () => {
    const { id } = await freshGroup();
    const forger = signer();
    for (const kind of [39000, 39001, 39002, 39003, 39005]) await refusedWith(c, forger.sign({ kind, tags: [["d", id]] }), "blocked:");
  });

  test("a burst of joins writes few 39002s, the last listing everyone", async () => {
    const { id, owner } = await freshGroup();
    const users = Array.from({ length: 20 }, () => signer());
    const oks = await Promise.all(users.map((u) => join(c, u, id)));
    expect(oks.every((ok) => ok[2])).toBe(true);
    expect((await listed(id, 39002)).map((t) => t[1]).sort()).toEqual([owner.pubkey, ...users.map((u) => u.pubkey)].sort());
  });
});

describe("deletion (point 6)", () => {
  test("9005 by a moderator: the event is gone, and republishing it is blocked:", async () => {
    const { id, owner } = await freshGroup();
    const moderator = signer();
    const author = signer();
    await accepted(c, mod(9000, owner, id, [["p", moderator.pubkey, "moderator"]]));
    expect((await join(c, author, id))[2]).toBe(true);
    const x = mod(9, author, id);
    await accepted(c, x);
    expect((await read({ ids: [x.id] })).length).toBe(1);
    await accepted(c, mod(9005, moderator, id, [["e", x.id]]));
    expect(await read({ ids: [x.id] })).toEqual([]);
    await refusedWith(c, x, "blocked:");
  });

  test("a 9005's target is kept out by the store too (the state forgets a group's oldest targets past 10,000)", async () => {
    // A connection of its own: `c` AUTHs as a limited number of pubkeys.
    const own = await connectAs(relay);
    const owner = signer();
    const id = freshId();
    await createGroup(own, relay, owner, id);
    const x = mod(9, owner, id);
    await accepted(own, x);
    await accepted(own, mod(9005, owner, id, [["e", x.id]]));
    own.close();
    expect(await read({ ids: [x.id] })).toEqual([]);
    // Past the group state's judge, as an archive or a forgotten id would be: the writer refuses it.
    const outcome = await relay.ctx.writer.enqueue({ event: x, json: serializeEvent(x), cost: writeCost(x) });
    expect(outcome.stored).toBe(false);
    expect(!outcome.stored && !outcome.duplicate && outcome.refusal.prefix).toBe("blocked");
    expect(await read({ ids: [x.id] })).toEqual([]);
  });

  test("a 9005 naming an event of another group deletes nothing there", async () => {
    const one = await freshGroup();
    const other = await freshGroup();
    const y = mod(9, other.owner, other.id);
    await accepted(c, y);
    await accepted(c, mod(9005, one.owner, one.id, [["e", y.id]]));
    expect((await read({ ids: [y.id] })).length).toBe(1);
  });

  test("9008: the group's events and 39xxx go, the 9008 stays; new events refused, the id not reused", async () => {
    const { id, owner } = await freshGroup();
    const m = mod(9, owner, id);
    await accepted(c, m);
    const gone = mod(9008, owner, id);
    await accepted(c, gone);
    expect((await stored(relay, { "#h": [id] })).map((e) => e.id)).toEqual([gone.id]);
    expect((await stored(relay, { kinds: [39000, 39001, 39002, 39003], "#d": [id] })).length).toBe(0);
    const after = await c.publish(mod(9, owner, id));
    expect(after[2]).toBe(false);
    expect(after[3]).toMatch(/^(invalid|blocked): /);
    await refusedWith(c, mod(9007, owner, id), "blocked:");
  });

  test("an author's kind 5 deletes their own group message", async () => {
    const { id, owner } = await freshGroup();
    const x = mod(9, owner, id);
    await accepted(c, x);
    await accepted(
      c,
      owner.sign({
        kind: 5,
        tags: [
          ["e", x.id],
          ["h", id],
        ],
      }),
    );
    expect(await read({ ids: [x.id] })).toEqual([]);
  });

  test("a NIP-62 request removes the author's group messages", async () => {
    const { id } = await freshGroup();
    const author = signer();
    expect((await join(c, author, id))[2]).toBe(true);
    const x = mod(9, author, id);
    await accepted(c, x);
    await authAs(c, author, relay.url);
    await accepted(c, author.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]] }));
    expect(await read({ ids: [x.id] })).toEqual([]);
  });
});

describe("restart (point 3)", () => {
  test("a restart keeps the state: a member still writes, an outsider is still refused, 39xxx not written again", async () => {
    const r = await groupRelay();
    let rc = await connectAs(r);
    const owner = signer();
    const member = signer();
    const id = freshId();
    await createGroup(rc, r, owner, id, [["restricted"]]);
    await accepted(rc, mod(9000, owner, id, [["p", member.pubkey]]));
    const before = await relayEvents(rc, id, r.ctx.relayKey.pubkey);
    rc.close();
    await afterRestart(r, async (again) => {
      rc = await connectAs(again);
      await accepted(rc, mod(9, member, id));
      await refusedWith(rc, mod(9, signer(), id), "restricted:");
      const after = await relayEvents(rc, id, again.ctx.relayKey.pubkey);
      expect([...after.values()].map((e) => e.id).sort()).toEqual([...before.values()].map((e) => e.id).sort());
      rc.close();
    });
  });
});

describe("reconcile at start", () => {
  test("moderation events stored without the relay's 39xxx (an import): the relay writes them at start", async () => {
    const dir = mkdtempSync(joinPath(tmpdir(), "bunstr-nip29-"));
    const owner = signer();
    const member = signer();
    const id = freshId();
    const config = testConfig({ groups: { enabled: true, creators: ["anyone"] } });
    const store = await openTestStore(dir, config);
    await storeEvents(store, [mod(9007, owner, id), mod(9000, owner, id, [["p", member.pubkey]])]);
    await store.close();
    const r = await groupRelay({}, { dir });
    try {
      const rc = await connectAs(r);
      const events = await relayEvents(rc, id, r.ctx.relayKey.pubkey);
      expect([...events.keys()].sort()).toEqual([39000, 39001, 39002, 39003]);
      expect(
        events
          .get(39002)!
          .tags.slice(1)
          .map((t) => t[1])
          .sort(),
      ).toEqual([owner.pubkey, member.pubkey].sort());
      rc.close();
    } finally {
      await r.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("restart after a deletion (point 6)", () => {
  test("a hidden group's 39xxx a former relay key signed is read by its members only, as the current key's (review finding 8); 9008 deletes it too", async () => {
    const former = signer();
    const r = await groupRelay({ groups: { former_relay_keys: [former.pubkey] } });
    const rc = await connectAs(r);
    const anon = await connectAs(r);
    try {
      const owner = signer();
      const id = freshId();
      await createGroup(rc, r, owner, id, [["hidden"]]);
      const old = former.sign({
        kind: 39002,
        tags: [
          ["d", id],
          ["p", owner.pubkey],
        ],
      });
      await storeRaw(r, old);
      const read = async (c: typeof rc) =>
        (await c.req(`f8-${Math.random()}`, { kinds: [39002], authors: [former.pubkey] })).events.map((e) => e.id);
      expect(await read(anon)).toEqual([]);
      expect(await read(rc)).toEqual([old.id]); // rc is AUTHed as the owner, a member
      await accepted(rc, mod(9008, owner, id));
      expect(await stored(r, { ids: [old.id] })).toEqual([]);
    } finally {
      rc.close();
      anon.close();
      await r.stop();
    }
  });

  test("an event a 9005 deleted that is still stored (its deletion never ran) goes at the next start", async () => {
    const r = await groupRelay();
    const rc = await connectAs(r);
    const owner = signer();
    const id = freshId();
    await createGroup(rc, r, owner, id);
    const x = mod(9, owner, id);
    await accepted(rc, x);
    // Committed, but not carried out: as when its node dies right after the commit.
    await storeRaw(r, mod(9005, owner, id, [["e", x.id]]));
    expect((await stored(r, { ids: [x.id] })).length).toBe(1);
    rc.close();
    await afterRestart(r, async (again) => {
      await purged(again);
      expect(await stored(again, { ids: [x.id] })).toEqual([]);
    });
  });

  test("an admin's kind 5 of its own 9007, 9001, 9002 and its request to vanish change nothing, then or after a restart", async () => {
    const r = await groupRelay();
    const rc = await connectAs(r);
    const [owner, member, removed, stranger] = [signer(), signer(), signer(), signer()];
    const id = freshId();
    const created = mod(9007, owner, id);
    await authAs(rc, owner, r.url);
    await accepted(rc, created);
    const edit = mod(9002, owner, id, [["private"], ["closed"]]);
    await accepted(rc, edit);
    await accepted(rc, mod(9000, owner, id, [["p", member.pubkey]]));
    const removal = mod(9001, owner, id, [["p", removed.pubkey]]);
    await accepted(rc, removal);
    const post = mod(9, member, id);
    await accepted(rc, post);
    await accepted(rc, owner.sign({ kind: 5, tags: [created, edit, removal].map((e) => ["e", e.id]) }));
    await accepted(rc, owner.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]] }));
    expect((await stored(r, { ids: [created.id, edit.id, removal.id] })).length).toBe(3);
    rc.close();
    await afterRestart(r, async (again) => {
      expect(again.ctx.groups!.list().find((g) => g.id === id)).toMatchObject({ private: true, closed: true });
      const anon = await connectAs(again);
      expect(await read({ ids: [post.id] }, anon)).toEqual([]);
      const x = await connectAs(again, stranger);
      await refusedWith(x, mod(9007, stranger, id), "duplicate:");
      await authAs(x, removed, again.url);
      await refusedWith(x, mod(9021, removed, id), "blocked:");
      for (const y of [anon, x]) y.close();
    });
  });

  test("a deleted private group's rows a purge has not reached are read by no one, and go at the next start", async () => {
    const r = await groupRelay();
    const rc = await connectAs(r);
    const [owner, member, outsider] = [signer(), signer(), signer()];
    const id = freshId();
    await createGroup(rc, r, owner, id, [["private"]]);
    await accepted(rc, mod(9000, owner, id, [["p", member.pubkey]]));
    await accepted(rc, mod(9008, owner, id));
    // What a purge still running (or cut short by a crash) leaves: the group's rows after its 9008.
    const left = mod(9, member, id);
    await storeRaw(r, left);
    const anon = await connectAs(r);
    const out = await connectAs(r, outsider);
    const mem = await connectAs(r, member);
    for (const reader of [anon, out, mem]) {
      expect(await read({ ids: [left.id] }, reader)).toEqual([]);
      expect(await read({ kinds: [9], authors: [member.pubkey] }, reader)).toEqual([]);
    }
    for (const x of [rc, anon, out, mem]) x.close();
    await afterRestart(r, async (again) => {
      await purged(again);
      expect(await stored(again, { ids: [left.id] })).toEqual([]);
    });
  });

  test("a change the commit feed tells after accepted() stopped waiting (Postgres: a late feed) is carried out when it comes", async () => {
    const r = await groupRelay();
    try {
      const rc = await connectAs(r);
      const [owner, user] = [signer(), signer()];
      const id = freshId();
      const key = (await relayInfo(r.url)).self;
      await createGroup(rc, r, owner, id);
      const post = mod(9, owner, id);
      await accepted(rc, post);
      const del = mod(9005, owner, id, [["e", post.id]]);
      const joined = mod(9021, user, id);
      // The feed tells these two past FEED_WAIT_MS (5 s): the OKs go first, true.
      const groups = r.ctx.groupRelay as unknown as { committed(e: NostrEvent): void };
      const feed = groups.committed.bind(groups);
      groups.committed = (e) => (e.id === del.id || e.id === joined.id ? void setTimeout(() => feed(e), 5_500) : feed(e));
      await authAs(rc, user, r.url);
      const ok = (e: NostrEvent) => {
        const from = rc.frames.length;
        rc.send(["EVENT", e]);
        return rc.next((f) => f[0] === "OK" && f[1] === e.id, 10_000, from);
      };
      const oks = await Promise.all([ok(del), ok(joined)]);
      expect(oks.map((ok) => ok[2])).toEqual([true, true]);
      let done = false;
      for (const until = Date.now() + 15_000; !done && Date.now() < until; await Bun.sleep(100)) {
        const left = await stored(r, { ids: [post.id] });
        const answers = await stored(r, { kinds: [9000], authors: [key], "#e": [joined.id] });
        done = left.length === 0 && answers.length === 1;
      }
      expect(done).toBe(true);
      const members = (await relayEvents(rc, id, key)).get(39002)!;
      expect(members.tags.filter((t) => t[0] === "p").map((t) => t[1])).toContain(user.pubkey);
      rc.close();
    } finally {
      await r.stop();
    }
  }, 30_000);

  test("a group deleted (9008, its events purged) stays deleted after a restart", async () => {
    const r = await groupRelay();
    let rc = await connectAs(r);
    const owner = signer();
    const id = freshId();
    await createGroup(rc, r, owner, id);
    await accepted(rc, mod(9008, owner, id));
    rc.close();
    await afterRestart(r, async (again) => {
      rc = await connectAs(again);
      await authAs(rc, owner, again.url);
      await refusedWith(rc, mod(9007, owner, id), "blocked:");
      rc.close();
    });
  });
});

// Another process on the served SQLite file (the old relay of a hand-over while it drains, `bunstr
// import`): its commits reach this relay only as "the database changed", and are read by seq.
if (!onPostgres)
  describe("another process's commits", () => {
    test("a 9000 written into the served file by another process makes a member, and the relay lists them", async () => {
      // A connection of its own: one connection AUTHs as a limited number of pubkeys.
      const c = await connectAs(relay);
      const owner = signer();
      const id = freshId();
      await createGroup(c, relay, owner, id, [["restricted"]]);
      const member = signer();
      await refusedWith(c, mod(9, member, id), "restricted:");
      const put = mod(9000, owner, id, [["p", member.pubkey]]);
      const db = new Database(relay.dbPath);
      try {
        expect(new SqliteWriter(db).writeBatchImmediate([{ event: put, json: serializeEvent(put) }], RULES)[0]!.stored).toBe(true);
      } finally {
        db.close();
      }
      // The relay looks for others' commits when it is next asked (store/sqlite/store.ts lastSeq).
      const deadline = Date.now() + 5000;
      for (;;) {
        await Bun.sleep(30);
        await read({ ids: ["00".repeat(32)] });
        if (relay.ctx.groups!.members(id)!.some((m) => m.pubkey === member.pubkey) || Date.now() > deadline) break;
      }
      await accepted(c, mod(9, member, id));
      const deadline2 = Date.now() + 5000;
      while (!(await listed(id, 39002)).some((t) => t[1] === member.pubkey) && Date.now() < deadline2) await Bun.sleep(30);
      expect((await listed(id, 39002)).map((t) => t[1])).toContain(member.pubkey);
      c.close();
    });

    test("a 9005 written into the served file by another process (which deletes nothing) has its targets deleted here", async () => {
      const c = await connectAs(relay);
      const owner = signer();
      const id = freshId();
      await createGroup(c, relay, owner, id);
      const post = mod(9, owner, id);
      await accepted(c, post);
      const del = mod(9005, owner, id, [["e", post.id]]);
      const db = new Database(relay.dbPath);
      try {
        expect(new SqliteWriter(db).writeBatchImmediate([{ event: del, json: serializeEvent(del) }], RULES)[0]!.stored).toBe(true);
      } finally {
        db.close();
      }
      const deadline = Date.now() + 5000;
      while ((await stored(relay, { ids: [post.id] })).length > 0 && Date.now() < deadline) {
        await read({ ids: ["00".repeat(32)] }); // the relay looks for others' commits when next asked
        await Bun.sleep(30);
      }
      expect(await stored(relay, { ids: [post.id] })).toEqual([]);
      c.close();
    });
  });
