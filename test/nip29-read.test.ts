// NIP-29 over the wire: who may read a private group's events (issue 32, point 5), each read
// path its own test: REQ (admission and the stored read), COUNT, NIP-77, search, live fanout,
// the catch-up, memory's answers, and a hidden group's metadata. Fixture: private group P with
// member M, outsider O (AUTHed), anonymous A, and event x in P (by M).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { nip77 } from "nostr-tools";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { QueryJob, RowBatch } from "../src/store/types.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readOrCreateKeyFile } from "../src/cli/relay-key.ts";
import { startRelay } from "../src/relay/server.ts";
import { Client, failOnRelayErrors, fence, openTestStore, signer, testConfig, type Signer, type TestRelay } from "./helpers.ts";
import { accepted } from "./helpers.ts";
import { authAs, connectAs, createGroup, groupRelay, mod } from "./groups-helpers.ts";

failOnRelayErrors();

const WORD = "zanzibarquokka";
let relay: TestRelay;
let owner: Signer;
let M: Signer;
let O: Signer;
let cOwner: Client;
let cM: Client;
let cO: Client;
let cA: Client;
let P: string;
let x: NostrEvent;

beforeAll(async () => {
  relay = await groupRelay();
  owner = signer();
  M = signer();
  O = signer();
  P = `p-${Math.random().toString(36).slice(2, 10)}`;
  cOwner = await connectAs(relay);
  await createGroup(cOwner, relay, owner, P, [["private"]]);
  await accepted(cOwner, mod(9000, owner, P, [["p", M.pubkey]]));
  cM = await connectAs(relay, M);
  cO = await connectAs(relay, O);
  cA = await connectAs(relay);
  x = M.sign({
    kind: 9,
    content: `hello ${WORD}`,
    tags: [
      ["h", P],
      ["t", WORD],
    ],
  });
  await accepted(cM, x);
});
afterAll(async () => {
  for (const c of [cOwner, cM, cO, cA]) c.close();
  await relay.stop();
});

let n = 0;
const sub = () => `s${++n}`;

/** The ids a REQ of `filter` gets on `c` (the subscription closed after EOSE), and how it ended. */
async function reqIds(c: Client, filter: Record<string, unknown>): Promise<{ ids: string[]; end: unknown[] }> {
  const id = sub();
  const { events, end } = await c.req(id, filter);
  c.send(["CLOSE", id]);
  return { ids: events.map((e) => e.id), end };
}

describe("REQ", () => {
  test('{"#h":[P]}: anonymous auth-required:, an outsider restricted:, the member gets x', async () => {
    const a = await reqIds(cA, { "#h": [P] });
    expect(a.end[0]).toBe("CLOSED");
    expect(a.end[2]).toStartWith("auth-required: ");
    const o = await reqIds(cO, { "#h": [P] });
    expect(o.end[0]).toBe("CLOSED");
    expect(o.end[2]).toStartWith("restricted: ");
    expect((await reqIds(cM, { "#h": [P] })).ids).toContain(x.id);
  });

  for (const [name, filter] of [
    ["kinds", () => ({ kinds: [9] })],
    ["ids", () => ({ ids: [x.id] })],
    ["authors", () => ({ authors: [M.pubkey] })],
  ] as const)
    test(`{${name}}: anonymous and the outsider get no x, the member gets it`, async () => {
      expect((await reqIds(cA, filter())).ids).not.toContain(x.id);
      expect((await reqIds(cO, filter())).ids).not.toContain(x.id);
      expect((await reqIds(cM, filter())).ids).toContain(x.id);
    });
});

describe("COUNT", () => {
  test('{"#h":[P]} refused as REQ is; {kinds:[9]} counts x only for the member', async () => {
    const a = await cA.count(sub(), [{ "#h": [P] }]);
    expect([a[0], a[2].slice(0, 15)]).toEqual(["CLOSED", "auth-required: "]);
    const o = await cO.count(sub(), [{ "#h": [P] }]);
    expect([o[0], o[2].slice(0, 12)]).toEqual(["CLOSED", "restricted: "]);
    const filter = { kinds: [9], authors: [M.pubkey] };
    expect((await cO.count(sub(), [filter]))[2]).toEqual({ count: 0 });
    expect((await cA.count(sub(), [filter]))[2]).toEqual({ count: 0 });
    expect((await cM.count(sub(), [filter]))[2]).toEqual({ count: 1 });
  });
});

describe("NIP-77", () => {
  /** NEG-OPEN of `filter` against an empty set: NEG-ERR's reason, or the ids the relay has that we need. */
  async function negNeed(c: Client, filter: Record<string, unknown>): Promise<string | string[]> {
    const storage = new nip77.NegentropyStorageVector();
    storage.seal();
    const neg = new nip77.Negentropy(storage);
    const id = sub();
    const from = c.frames.length;
    c.send(["NEG-OPEN", id, filter, neg.initiate()]);
    const answer = await c.next((f) => (f[0] === "NEG-MSG" || f[0] === "NEG-ERR") && f[1] === id, 5000, from);
    if (answer[0] === "NEG-ERR") return answer[2] as string;
    const need: string[] = [];
    neg.reconcile(
      answer[2],
      () => {},
      (i: string) => need.push(i),
    );
    c.send(["NEG-CLOSE", id]);
    return need;
  }

  test('NEG-OPEN {"#h":[P]}: NEG-ERR auth-required: / restricted:; {kinds:[9]}: x is not among the outsider\'s items', async () => {
    expect(await negNeed(cA, { "#h": [P] })).toStartWith("auth-required: ");
    expect(await negNeed(cO, { "#h": [P] })).toStartWith("restricted: ");
    expect(await negNeed(cO, { kinds: [9] })).not.toContain(x.id);
    expect(await negNeed(cM, { kinds: [9] })).toContain(x.id);
  });
});

describe("search", () => {
  test("a word of x: the outsider gets nothing, the member x", async () => {
    expect((await reqIds(cO, { search: WORD })).ids).toEqual([]);
    expect((await reqIds(cA, { search: WORD })).ids).toEqual([]);
    expect((await reqIds(cM, { search: WORD })).ids).toEqual([x.id]);
  });
});

describe("live", () => {
  test("the outsider's open {kinds:[9]} and {search} get nothing when the member posts; the member's get it", async () => {
    const [oKinds, oSearch, mKinds, mSearch] = [sub(), sub(), sub(), sub()];
    await cO.req(oKinds, { kinds: [9], since: x.created_at + 1 });
    await cO.req(oSearch, { search: WORD, since: x.created_at + 1 });
    await cM.req(mKinds, { kinds: [9], since: x.created_at + 1 });
    await cM.req(mSearch, { search: WORD, since: x.created_at + 1 });
    const y = M.sign({ kind: 9, content: `again ${WORD}`, tags: [["h", P]], created_at: x.created_at + 2 });
    await accepted(cM, y);
    await cM.next((f) => f[0] === "EVENT" && f[1] === mKinds && f[2].id === y.id);
    await cM.next((f) => f[0] === "EVENT" && f[1] === mSearch && f[2].id === y.id);
    await (await fence(cO))();
    expect([...cO.eventsFor(oKinds), ...cO.eventsFor(oSearch)].map((e) => e.id)).not.toContain(y.id);
    for (const [c, id] of [
      [cO, oKinds],
      [cO, oSearch],
      [cM, mKinds],
      [cM, mSearch],
    ] as const)
      c.send(["CLOSE", id]);
  });

  test("a public group's events reach an anonymous live subscriber, until the group turns private", async () => {
    const G = `o-${Math.random().toString(36).slice(2, 10)}`;
    await createGroup(cOwner, relay, owner, G);
    const id = sub();
    await cA.req(id, { "#h": [G], limit: 0 });
    const open = owner.sign({ kind: 9, content: "open", tags: [["h", G]] });
    await accepted(cOwner, open);
    await cA.next((f) => f[0] === "EVENT" && f[1] === id && f[2].id === open.id);
    await accepted(cOwner, mod(9002, owner, G, [["private"]]));
    const closed = owner.sign({ kind: 9, content: "closed", tags: [["h", G]] });
    await accepted(cOwner, closed);
    await (await fence(cA))();
    expect(cA.eventsFor(id).map((e) => e.id)).not.toContain(closed.id);
    cA.send(["CLOSE", id]);
  });

  test("a member removed stops receiving live events at once", async () => {
    const leaver = signer();
    await accepted(cOwner, mod(9000, owner, P, [["p", leaver.pubkey]]));
    const c = await connectAs(relay, leaver);
    const id = sub();
    await c.req(id, { "#h": [P], limit: 0 });
    const before = M.sign({ kind: 9, content: "before", tags: [["h", P]] });
    await accepted(cM, before);
    await c.next((f) => f[0] === "EVENT" && f[1] === id && f[2].id === before.id);
    await accepted(cOwner, mod(9001, owner, P, [["p", leaver.pubkey]]));
    const after = M.sign({ kind: 9, content: "after", tags: [["h", P]] });
    await accepted(cM, after);
    await (await fence(c))();
    expect(c.eventsFor(id).map((e) => e.id)).not.toContain(after.id);
    c.close();
  });
});

describe("catch-up", () => {
  test("an event committed while the outsider's stored read runs is not caught up to it; the member's is", async () => {
    // Each stored read waits for `go`: the events committed meanwhile come by the catch-up ring.
    const store = relay.ctx.store;
    const query = store.query.bind(store);
    let go!: () => void;
    const gate = new Promise<void>((resolve) => (go = resolve));
    let waiting = 0;
    store.query = (job: QueryJob, ctx?: Parameters<typeof store.query>[1]): AsyncIterable<RowBatch> => ({
      async *[Symbol.asyncIterator]() {
        waiting++;
        await gate;
        yield* query(job, ctx);
      },
    });
    try {
      const [o, m] = [sub(), sub()];
      const z = M.sign({ kind: 9, content: "in flight", tags: [["h", P]] });
      // By id: no answer of memory's, so both go to the (waiting) store.
      const filter = { ids: [z.id] };
      const oDone = cO.req(o, filter);
      const mDone = cM.req(m, filter);
      while (waiting < 2) await Bun.sleep(5);
      store.query = query;
      await accepted(cM, z);
      go();
      expect((await oDone).events.map((e) => e.id)).not.toContain(z.id);
      expect((await mDone).events.map((e) => e.id)).toContain(z.id);
      cO.send(["CLOSE", o]);
      cM.send(["CLOSE", m]);
    } finally {
      store.query = query;
      go();
    }
  });
});

describe("memory's answers", () => {
  test("the same REQ twice (the ring's feeds, a kept tag answer) never serves x to the outsider or anonymous", async () => {
    for (const filter of [
      { authors: [M.pubkey], limit: 20 },
      { "#t": [WORD], limit: 20 },
    ])
      for (const c of [cO, cA, cO, cA, cO]) expect((await reqIds(c, filter)).ids).not.toContain(x.id);
    expect((await reqIds(cM, { authors: [M.pubkey], limit: 20 })).ids).toContain(x.id);
  });
});

describe("hidden group", () => {
  test("{kinds:[39000]}: an outsider has no d=H, a member sees it", async () => {
    const H = `h-${Math.random().toString(36).slice(2, 10)}`;
    await createGroup(cOwner, relay, owner, H, [["hidden"]]);
    await accepted(cOwner, mod(9000, owner, H, [["p", M.pubkey]]));
    const dOf = async (c: Client) => {
      const id = sub();
      const { events } = await c.req(id, { kinds: [39000] });
      c.send(["CLOSE", id]);
      return events.map((e) => e.tags.find((t) => t[0] === "d")?.[1]);
    };
    expect(await dOf(cO)).not.toContain(H);
    expect(await dOf(cA)).not.toContain(H);
    expect(await dOf(cM)).toContain(H);
    // Not refused either: existence is not revealed.
    const o = await reqIds(cO, { kinds: [39000], "#d": [H] });
    expect(o).toEqual({ ids: [], end: ["EOSE", expect.any(String)] });
  });
});

describe("a hidden (not private) group's members (review of issue 32, finding 11)", () => {
  test("its records (9000-9022) are read as its metadata: members only, stored and live; its posts stay public", async () => {
    const H = `h-${Math.random().toString(36).slice(2, 10)}`;
    await createGroup(cOwner, relay, owner, H, [["hidden"]]);
    const joinerA = signer();
    const cJ = await connectAs(relay, joinerA);
    const joined = mod(9021, joinerA, H);
    await accepted(cJ, joined);
    const post = mod(9, owner, H);
    await accepted(cOwner, post);
    // Live: an outsider's and an anonymous subscription to joins get none of this group's.
    const live = [cA, cO].map((c) => {
      const id = sub();
      c.send(["REQ", id, { kinds: [9000, 9021], limit: 0 }]);
      return { c, id };
    });
    for (const { c, id } of live) await c.next((f) => f[0] === "EOSE" && f[1] === id);
    const second = signer();
    const cS = await connectAs(relay, second);
    const joined2 = mod(9021, second, H);
    await accepted(cS, joined2);
    for (const { c, id } of live) {
      await (await fence(c))();
      expect(c.eventsFor(id).map((e) => e.id)).not.toContain(joined2.id);
      c.send(["CLOSE", id]);
    }
    for (const reader of [cA, cO]) {
      const byH = await reqIds(reader, { "#h": [H] });
      expect(byH.ids).toEqual([post.id]);
      const byKind = await reqIds(reader, { kinds: [9000, 9001, 9007, 9021], authors: [owner.pubkey, joinerA.pubkey, second.pubkey] });
      expect(byKind.ids).toEqual([]);
    }
    const member = await reqIds(cJ, { "#h": [H] });
    expect(member.ids).toContain(joined.id);
    expect(member.ids).toContain(joined2.id);
    expect(member.ids).toContain(post.id);
    for (const c of [cJ, cS]) c.close();
  });
});

describe("at start (review of issue 32, finding 3)", () => {
  test("until the group state is rebuilt, a websocket upgrade is answered 503 starting; then served, the private group hidden", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bunstr-nip29-start-"));
    const config = testConfig({ groups: { enabled: true, creators: ["anyone"] } });
    const first = await groupRelay({}, { dir });
    const [o, m] = [signer(), signer()];
    const id = `s-${Math.random().toString(36).slice(2, 10)}`;
    const c = await connectAs(first);
    await createGroup(c, first, o, id, [["private"]]);
    await accepted(c, mod(9000, o, id, [["p", m.pubkey]]));
    const post = mod(9, m, id);
    await authAs(c, m, first.url);
    await accepted(c, post);
    c.close();
    await first.close();
    // The rebuild's first page waits for the gate: the state is not ready meanwhile.
    const store = await openTestStore(dir, config);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inOrder = store.groups.inOrder.bind(store.groups);
    store.groups.inOrder = async (...args) => {
      await gate;
      return inOrder(...args);
    };
    const relay = startRelay({ config, store, relayKey: readOrCreateKeyFile(join(dir, "relay.key"), () => {}) });
    try {
      const http = relay.url.replace(/^ws/, "http");
      const headers = {
        Upgrade: "websocket",
        Connection: "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
      };
      const during = await fetch(http, { headers });
      expect(during.status).toBe(503);
      expect(await during.text()).toBe("starting");
      release();
      await relay.ready;
      const anon = await Client.connect(relay.url);
      const { events } = await anon.req("s", { kinds: [9] });
      expect(events.map((e) => e.id)).not.toContain(post.id);
      anon.close();
    } finally {
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("sybil private groups (review of issue 32, finding 6)", () => {
  test("the store keeps the gates: a read carries the reader's memberships, not every private group; a gate lost in the store is mended at start", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bunstr-nip29-gates-"));
    const [o, m] = [signer(), signer()];
    const id = `g-${Math.random().toString(36).slice(2, 10)}`;
    let r = await groupRelay({}, { dir });
    try {
      const c = await connectAs(r);
      await createGroup(c, r, o, id, [["private"]]);
      await accepted(c, mod(9000, o, id, [["p", m.pubkey]]));
      await authAs(c, m, r.url);
      const post = mod(9, m, id);
      await accepted(c, post);
      c.close();
      // What a stored read of this relay passes the store: its memberships, whatever the number of private groups.
      const queries: QueryJob[] = [];
      const query = r.ctx.store.query.bind(r.ctx.store);
      r.ctx.store.query = (job, ctx) => (queries.push(job), query(job, ctx));
      const anon = await Client.connect(r.url);
      expect((await reqIds(anon, { kinds: [9] })).ids).not.toContain(post.id);
      const member = await connectAs(r, m);
      expect((await reqIds(member, { kinds: [9] })).ids).toContain(post.id);
      expect(queries.map((q) => q.visibility?.groups?.members)).toEqual([[], [id]]);
      anon.close();
      member.close();
      // The store's row lowered behind the state's back (a lost correction, a tool): the next start mends it before a read.
      await r.ctx.store.admin.setGroupGates([{ group: id, events: false, metadata: false }], { seq: Number.MAX_SAFE_INTEGER });
      await r.close();
      r = await groupRelay({}, { dir });
      const again = await Client.connect(r.url);
      expect((await reqIds(again, { kinds: [9] })).ids).not.toContain(post.id);
      again.close();
    } finally {
      await r.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("invite codes (review of issue 32, finding 4)", () => {
  test("a closed group's 9009: read by its author only, stored or live; the 9021 that used it stays readable", async () => {
    const id = `c-${Math.random().toString(36).slice(2, 10)}`;
    const [admin, joiner, outsider] = [signer(), signer(), signer()];
    const cAdmin = await connectAs(relay);
    await createGroup(cAdmin, relay, admin, id, [["closed"]]);
    const cOut = await connectAs(relay, outsider);
    const cAnon = await connectAs(relay);
    const live = sub();
    cOut.send(["REQ", live, { kinds: [9009], "#h": [id] }]);
    await cOut.next((f) => f[0] === "EOSE" && f[1] === live);
    const pass = await fence(cOut);
    const invite = mod(9009, admin, id, [["code", "s3cret-code"]]);
    await accepted(cAdmin, invite);
    for (const reader of [cOut, cAnon]) {
      expect((await reqIds(reader, { kinds: [9009] })).ids).toEqual([]);
      expect((await reqIds(reader, { ids: [invite.id] })).ids).toEqual([]);
    }
    expect((await reqIds(cAdmin, { kinds: [9009], "#h": [id] })).ids).toEqual([invite.id]);
    await pass();
    expect(cOut.frames.filter((f) => f[0] === "EVENT" && f[1] === live)).toEqual([]);
    const cJoin = await connectAs(relay, joiner);
    const joinReq = mod(9021, joiner, id, [["code", "s3cret-code"]]);
    await accepted(cJoin, joinReq);
    expect((await reqIds(cOut, { ids: [joinReq.id] })).ids).toEqual([joinReq.id]);
    for (const x of [cAdmin, cOut, cAnon, cJoin]) x.close();
  });
});

describe("a hidden group's existence (review of issue 32, finding 10)", () => {
  test('{"#h":[hidden private group]}: an anonymous reader and an outsider get EOSE and nothing, as for an unknown id', async () => {
    const id = `h-${Math.random().toString(36).slice(2, 10)}`;
    const admin = signer();
    const cAdmin = await connectAs(relay);
    await createGroup(cAdmin, relay, admin, id, [["private"], ["hidden"]]);
    const post = mod(9, admin, id);
    await accepted(cAdmin, post);
    for (const reader of [cA, cO]) {
      const known = await reqIds(reader, { "#h": [id] });
      expect(known.end[0]).toBe("EOSE");
      expect(known.ids).toEqual([]);
    }
    expect((await reqIds(cAdmin, { "#h": [id] })).ids).toContain(post.id);
    cAdmin.close();
  });
});
