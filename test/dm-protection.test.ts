// NIP-17 / NIP-59 (and kind 4) DM protection over a real websocket: events of the restricted
// kinds (default 4, 1059, 21059) are served — stored, live, counted — only to a connection that
// authenticated (NIP-42) as their author or as a p-tagged recipient.
//
// NIP-17: "Relays SHOULD protect message metadata by only serving `kind:1059` events to users
// p-tagged on the event (enforced using NIP-42 AUTH)."
// NIP-59: "relays SHOULD only serve `kind 1059` events intended for the marked recipient";
// kind 21059 "follows ephemeral event semantics (relays MUST NOT store it)".
// NIP-42: ["CLOSED", "sub_1", "auth-required: we can't serve DMs to unauthenticated users"].
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { unwrapEvent, wrapEvent } from "nostr-tools/nip17";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now, signer, startTestRelay, type Signer, type TestRelay, relayInfo } from "./helpers.ts";

let relay: TestRelay;
let open: TestRelay;
const clients: Client[] = [];

beforeAll(async () => {
  relay = await startTestRelay();
  open = await startTestRelay({ authorization: { restricted_read_kinds: [] } });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await relay.stop();
  await open.stop();
});

async function connect(url = relay.url): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

/** A connection authenticated (NIP-42) as every given signer, each AUTH answered OK true. */
async function connectAs(url: string, ...as: Signer[]): Promise<Client> {
  const c = await connect(url);
  const challenge = (await c.next((f) => f[0] === "AUTH"))[1] as string;
  for (const s of as) {
    const e = s.sign({
      kind: 22242,
      tags: [
        ["relay", url],
        ["challenge", challenge],
      ],
    });
    const from = c.frames.length;
    c.send(["AUTH", e]);
    expect(await c.next((f) => f[0] === "OK" && f[1] === e.id, 5000, from)).toEqual(["OK", e.id, true, ""]);
  }
  return c;
}

/** A gift-wrap-shaped event signed by a throwaway key (content need not decrypt for the relay). */
const wrap = (to: string, opts: { kind?: number; created_at?: number; by?: Signer } = {}): NostrEvent =>
  (opts.by ?? signer()).sign({
    kind: opts.kind ?? 1059,
    content: "ciphertext-" + Math.random(),
    tags: [["p", to]],
    created_at: opts.created_at,
  });

async function publishAll(c: Client, ...evs: NostrEvent[]): Promise<void> {
  for (const e of evs) expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
}

const ids = (evs: NostrEvent[]) => evs.map((e) => e.id);

const count = (c: Client, subId: string, ...filters: object[]) => c.count(subId, filters);

const nip11 = relayInfo;

test("NIP-11 lists 17 and 59 by default, and not when restricted_read_kinds = []", async () => {
  const on = (await nip11(relay.url)).supported_nips as number[];
  expect(on).toContain(17);
  expect(on).toContain(59);
  const off = (await nip11(open.url)).supported_nips as number[];
  expect(off).not.toContain(17);
  expect(off).not.toContain(59);
});

describe("stored DMs", () => {
  const sender = signer();
  const recipient = signer();
  const third = signer();
  let giftWrap: NostrEvent;
  let dm4: NostrEvent;

  beforeAll(async () => {
    const p = await connect();
    // A real NIP-17 gift wrap (NIP-44 encrypted, signed by a one-time key, created_at in the past).
    giftWrap = JSON.parse(JSON.stringify(wrapEvent(sender.sk, { publicKey: recipient.pubkey }, "meet at noon")));
    dm4 = sender.sign({ kind: 4, content: "legacy dm?iv=x", tags: [["p", recipient.pubkey]] });
    await publishAll(p, giftWrap, dm4);
    p.close();
  });

  test.each([[[1059]], [[4]], [[21059]], [[1, 1059]]])("REQ kinds %j unauthenticated: CLOSED auth-required:", async (kinds) => {
    const c = await connect();
    const r = await c.req("dm", { kinds, "#p": [recipient.pubkey] });
    expect(r.events).toEqual([]);
    expect(r.end[0]).toBe("CLOSED");
    expect(r.end[1]).toBe("dm");
    expect(r.end[2]).toStartWith("auth-required:");
  });

  test("authenticated as the recipient: gets the gift wrap, which unwraps to the message", async () => {
    const c = await connectAs(relay.url, recipient);
    const r = await c.req("inbox", { kinds: [1059], "#p": [recipient.pubkey] });
    expect(r.end).toEqual(["EOSE", "inbox"]);
    expect(r.events).toEqual([giftWrap]);
    const rumor = unwrapEvent(r.events[0] as any, recipient.sk);
    expect(rumor.content).toBe("meet at noon");
    expect(rumor.pubkey).toBe(sender.pubkey);
    // kind 4: the recipient reads it too.
    expect(ids((await c.req("k4", { kinds: [4], authors: [sender.pubkey] })).events)).toEqual([dm4.id]);
  });

  test("authenticated as a third party: EOSE and nothing", async () => {
    const c = await connectAs(relay.url, third);
    expect(await c.req("snoop", { kinds: [1059], "#p": [recipient.pubkey] })).toEqual({ events: [], end: ["EOSE", "snoop"] });
    expect(await c.req("snoop4", { kinds: [4], authors: [sender.pubkey] })).toEqual({ events: [], end: ["EOSE", "snoop4"] });
    expect(await c.req("snoopid", { ids: [giftWrap.id, dm4.id] })).toEqual({ events: [], end: ["EOSE", "snoopid"] });
  });

  test("kind 4: the author reads their own DM; a connection authenticated as a third party and the recipient reads it", async () => {
    const a = await connectAs(relay.url, sender);
    expect(ids((await a.req("mine", { kinds: [4], "#p": [recipient.pubkey] })).events)).toEqual([dm4.id]);
    // The gift wrap's author is a one-time key: the real sender is not its author nor p-tagged.
    expect((await a.req("wrap", { kinds: [1059], "#p": [recipient.pubkey] })).events).toEqual([]);
    const both = await connectAs(relay.url, third, recipient);
    expect(ids((await both.req("both", { kinds: [1059, 4], "#p": [recipient.pubkey] })).events).sort()).toEqual(
      [giftWrap.id, dm4.id].sort(),
    );
  });

  test("REQ without kinds, unauthenticated: DMs silently left out, the author's other events come", async () => {
    const author = signer();
    const to = signer();
    const t = now() - 100;
    const note = author.sign({ kind: 1, content: "public note", created_at: t });
    const mention = author.sign({ kind: 1, content: "hi @to", tags: [["p", to.pubkey]], created_at: t + 1 });
    const dm = author.sign({ kind: 4, content: "secret?iv=x", tags: [["p", to.pubkey]], created_at: t + 2 });
    // A gift wrap signed by a key that also published a plain note.
    const wrapper = signer();
    const wrapNote = wrapper.sign({ kind: 1, content: "wrapper note", created_at: t - 1 });
    const gw = wrap(to.pubkey, { by: wrapper, created_at: t + 3 });
    const p = await connect();
    await publishAll(p, note, mention, dm, wrapNote, gw);

    const c = await connect();
    const byAuthor = await c.req("a", { authors: [author.pubkey] });
    expect(byAuthor.end).toEqual(["EOSE", "a"]);
    expect(ids(byAuthor.events)).toEqual([mention.id, note.id]);
    expect((await c.req("w", { authors: [wrapper.pubkey] })).events.map((e) => e.id)).toEqual([wrapNote.id]);
    const byId = await c.req("i", { ids: [dm.id, gw.id, note.id] });
    expect(byId.end).toEqual(["EOSE", "i"]);
    expect(ids(byId.events)).toEqual([note.id]);
    expect(ids((await c.req("p", { "#p": [to.pubkey] })).events)).toEqual([mention.id]);
    expect(ids((await c.req("multi", { authors: [author.pubkey, wrapper.pubkey] }, { "#p": [to.pubkey] })).events)).toEqual([
      mention.id,
      note.id,
      wrapNote.id,
    ]);
    // The same REQ authenticated as the recipient includes them.
    const r = await connectAs(relay.url, to);
    expect(ids((await r.req("a", { authors: [author.pubkey] })).events)).toEqual([dm.id, mention.id, note.id]);
    expect(ids((await r.req("p", { "#p": [to.pubkey] })).events)).toEqual([gw.id, dm.id, mention.id]);
  });

  test("limit applies after visibility: the newest matching event is an invisible DM, limit 1 returns the newest visible one", async () => {
    const author = signer();
    const to = signer();
    const t = now() - 100;
    const older = author.sign({ kind: 1, content: "older", tags: [["p", to.pubkey]], created_at: t });
    const visible = author.sign({ kind: 1, content: "newest visible", tags: [["p", to.pubkey]], created_at: t + 1 });
    const dms = [2, 3, 4].map((i) => author.sign({ kind: 4, content: `dm ${i}?iv=x`, tags: [["p", to.pubkey]], created_at: t + i }));
    const wraps = [5, 6].map((i) => wrap(to.pubkey, { created_at: t + i }));
    const p = await connect();
    await publishAll(p, older, visible, ...dms, ...wraps);

    const c = await connect();
    // Driven by authors, by a tag, and by ids: each plan must filter before it limits.
    expect(ids((await c.req("l1", { authors: [author.pubkey], limit: 1 })).events)).toEqual([visible.id]);
    expect(ids((await c.req("l2", { "#p": [to.pubkey], limit: 1 })).events)).toEqual([visible.id]);
    expect(ids((await c.req("l3", { "#p": [to.pubkey], limit: 2 })).events)).toEqual([visible.id, older.id]);
    expect(ids((await c.req("l4", { ids: [...ids(dms), ...ids(wraps), visible.id], limit: 1 })).events)).toEqual([visible.id]);
    // A third party is no better off than an anonymous connection.
    const x = await connectAs(relay.url, third);
    expect(ids((await x.req("l5", { "#p": [to.pubkey], limit: 1 })).events)).toEqual([visible.id]);
    // The recipient sees the newest one.
    const r = await connectAs(relay.url, to);
    expect(ids((await r.req("l6", { "#p": [to.pubkey], limit: 1 })).events)).toEqual([wraps[1]!.id]);
  });
});

describe("deleting gift wraps", () => {
  // NIP-59: "Since signing keys are random, relays SHOULD delete `kind:1059` events whose p-tag
  // matches the signer of NIP-09 deletions or NIP-62 vanish requests."
  test("a NIP-09 deletion request signed by the p-tagged recipient deletes the gift wrap; one by a third party does not", async () => {
    const recipient = signer();
    const gw = wrap(recipient.pubkey, { created_at: now() - 10 });
    const other = wrap(recipient.pubkey, { created_at: now() - 20 });
    const p = await connect();
    await publishAll(p, gw, other);
    const r = await connectAs(relay.url, recipient);
    expect(ids((await r.req("before", { kinds: [1059], "#p": [recipient.pubkey] })).events)).toEqual([gw.id, other.id]);
    // A third party asking to delete it changes nothing.
    await publishAll(
      p,
      signer().sign({
        kind: 5,
        tags: [
          ["e", gw.id],
          ["k", "1059"],
        ],
      }),
    );
    expect(ids((await r.req("third", { kinds: [1059], "#p": [recipient.pubkey] })).events)).toEqual([gw.id, other.id]);
    await publishAll(
      r,
      recipient.sign({
        kind: 5,
        tags: [
          ["e", gw.id],
          ["k", "1059"],
        ],
      }),
    );
    expect(ids((await r.req("after", { kinds: [1059], "#p": [recipient.pubkey] })).events)).toEqual([other.id]);
  });

  test("a NIP-62 request to vanish by the recipient deletes the gift wraps addressed to them", async () => {
    const recipient = signer();
    const p = await connect();
    const gws = [1, 2].map((i) => wrap(recipient.pubkey, { created_at: now() - i }));
    const keep = wrap(signer().pubkey);
    await publishAll(p, ...gws, keep);
    const r = await connectAs(relay.url, recipient);
    await publishAll(r, recipient.sign({ kind: 62, tags: [["relay", relay.url]] }));
    expect((await r.req("gone", { kinds: [1059], "#p": [recipient.pubkey] })).events).toEqual([]);
    const again = await p.publish(gws[0]!);
    expect(again[2]).toBe(false);
    expect(again[3]).toStartWith("blocked:");
  });
});

describe("live DMs", () => {
  test("a shared fanout group: the recipient gets a new gift wrap live, a third party and an anonymous member do not; public events reach all", async () => {
    const recipient = signer();
    const third = signer();
    const rc1 = await connectAs(relay.url, recipient);
    const tp1 = await connectAs(relay.url, third);
    const rc2 = await connectAs(relay.url, recipient);
    const anon = await connect();
    const withKinds = { kinds: [1, 1059], "#p": [recipient.pubkey] };
    const noKinds = { "#p": [recipient.pubkey] };
    const groupsBefore = relay.ctx.fanout.groupCount;
    // Same subscription id and same filters => one group (one topic) per filter set.
    for (const [c, f] of [
      [rc1, withKinds],
      [tp1, withKinds],
      [rc2, noKinds],
      [anon, noKinds],
    ] as const)
      expect((await c.req("live", f)).end).toEqual(["EOSE", "live"]);
    expect(relay.ctx.fanout.groupCount - groupsBefore).toBe(2);

    const p = await connect();
    const gw = JSON.parse(JSON.stringify(wrapEvent(signer().sk, { publicKey: recipient.pubkey }, "live secret"))) as NostrEvent;
    await publishAll(p, gw);
    expect((await rc1.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === gw.id))[2]).toEqual(gw);
    expect((await rc2.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === gw.id))[2]).toEqual(gw);
    // A public event published after it: once it arrives, the gift wrap would have arrived before it.
    const pub = signer().sign({ kind: 1, content: "public mention", tags: [["p", recipient.pubkey]] });
    await publishAll(p, pub);
    for (const c of [rc1, tp1, rc2, anon]) await c.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === pub.id);
    await Bun.sleep(50);
    expect(ids(tp1.eventsFor("live"))).toEqual([pub.id]);
    expect(ids(anon.eventsFor("live"))).toEqual([pub.id]);
    expect(ids(rc1.eventsFor("live"))).toEqual([gw.id, pub.id]);
    expect(ids(rc2.eventsFor("live"))).toEqual([gw.id, pub.id]);
  });

  test("REQs opened while gift wraps stream in (stored, catch-up and live paths): the recipient gets each once, others none", async () => {
    const recipient = signer();
    const wraps = Array.from({ length: 120 }, (_, i) => wrap(recipient.pubkey, { created_at: now() - 200 + i }));
    const p = await connect();
    const rc = await connectAs(relay.url, recipient);
    const tp = await connectAs(relay.url, signer());
    const anon = await connect();
    const f = { kinds: [1, 1059], "#p": [recipient.pubkey], limit: 1000 };
    const publishing = (async () => {
      for (let i = 0; i < wraps.length; i += 10) await Promise.all(wraps.slice(i, i + 10).map((e) => p.publish(e)));
    })();
    const subs = Array.from({ length: 8 }, (_, i) => `s${i}`);
    for (const id of subs) {
      await Bun.sleep(4);
      rc.send(["REQ", id, f]);
      tp.send(["REQ", id, f]);
      anon.send(["REQ", id, { "#p": [recipient.pubkey], limit: 1000 }]);
    }
    await publishing;
    const pub = signer().sign({ kind: 1, content: "barrier", tags: [["p", recipient.pubkey]] });
    await publishAll(p, pub);
    for (const c of [rc, tp, anon]) for (const id of subs) await c.next((x) => x[0] === "EVENT" && x[1] === id && x[2].id === pub.id);
    const want = [...ids(wraps), pub.id].sort();
    for (const id of subs) {
      expect(ids(rc.eventsFor(id)).sort()).toEqual(want);
      expect(ids(tp.eventsFor(id))).toEqual([pub.id]);
      expect(ids(anon.eventsFor(id))).toEqual([pub.id]);
    }
  });

  test("kind 21059 (ephemeral gift wrap): delivered live to the recipient only, never stored", async () => {
    const recipient = signer();
    const third = signer();
    const rc = await connectAs(relay.url, recipient);
    const tp = await connectAs(relay.url, third);
    const anon = await connect();
    const f = { kinds: [1, 21059], "#p": [recipient.pubkey] };
    await rc.req("eph", f);
    await tp.req("eph", f);
    await anon.req("eph", { "#p": [recipient.pubkey] });
    const p = await connect();
    const e = wrap(recipient.pubkey, { kind: 21059 });
    expect(await p.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect((await rc.next((x) => x[0] === "EVENT" && x[1] === "eph" && x[2].id === e.id))[2]).toEqual(e);
    const pub = signer().sign({ kind: 1, content: "barrier", tags: [["p", recipient.pubkey]] });
    await publishAll(p, pub);
    for (const c of [rc, tp, anon]) await c.next((x) => x[0] === "EVENT" && x[1] === "eph" && x[2].id === pub.id);
    expect(ids(tp.eventsFor("eph"))).toEqual([pub.id]);
    expect(ids(anon.eventsFor("eph"))).toEqual([pub.id]);
    // Never stored: not even the recipient finds it afterwards.
    expect(await rc.req("later", { ids: [e.id] })).toEqual({ events: [], end: ["EOSE", "later"] });
    expect(await rc.req("later2", { kinds: [21059], "#p": [recipient.pubkey] })).toEqual({ events: [], end: ["EOSE", "later2"] });
  });
});

describe("COUNT of DMs", () => {
  const recipient = signer();
  const third = signer();
  let wraps: NostrEvent[];
  beforeAll(async () => {
    const p = await connect();
    wraps = [1, 2, 3].map((i) => wrap(recipient.pubkey, { created_at: now() - i }));
    await publishAll(p, ...wraps, signer().sign({ kind: 1, content: "public", tags: [["p", recipient.pubkey]] }));
  });

  test("unauthenticated: CLOSED auth-required:", async () => {
    const c = await connect();
    const r = await count(c, "n", { kinds: [1059], "#p": [recipient.pubkey] });
    expect(r[0]).toBe("CLOSED");
    expect(r[2]).toStartWith("auth-required:");
    // Without kinds the DMs are not counted.
    expect((await count(c, "n2", { "#p": [recipient.pubkey] }))[2].count).toBe(1);
  });

  test("authenticated as the recipient: the right count; as a third party: 0", async () => {
    const r = await connectAs(relay.url, recipient);
    expect((await count(r, "n", { kinds: [1059], "#p": [recipient.pubkey] }))[2].count).toBe(3);
    expect((await count(r, "n2", { "#p": [recipient.pubkey] }))[2].count).toBe(4);
    expect((await count(r, "n3", { ids: ids(wraps) }))[2].count).toBe(3);
    const t = await connectAs(relay.url, third);
    const zero = await count(t, "n", { kinds: [1059], "#p": [recipient.pubkey] });
    expect(zero[0]).toBe("COUNT");
    expect(zero[2].count).toBe(0);
    expect((await count(t, "n3", { ids: ids(wraps) }))[2].count).toBe(0);
  });
});

test("restricted_read_kinds = [] makes DMs public: stored, live and counted", async () => {
  const recipient = signer();
  const gw = wrap(recipient.pubkey);
  const dm = signer().sign({ kind: 4, content: "x?iv=y", tags: [["p", recipient.pubkey]] });
  const listener = await connect(open.url);
  await listener.req("all", { kinds: [1059, 4], "#p": [recipient.pubkey] });
  const p = await connect(open.url);
  await publishAll(p, gw, dm);
  await listener.next((f) => f[0] === "EVENT" && f[1] === "all" && f[2].id === gw.id);
  await listener.next((f) => f[0] === "EVENT" && f[1] === "all" && f[2].id === dm.id);
  const c = await connect(open.url);
  const r = await c.req("q", { kinds: [1059, 4], "#p": [recipient.pubkey] });
  expect(r.end).toEqual(["EOSE", "q"]);
  expect(ids(r.events).sort()).toEqual([gw.id, dm.id].sort());
  expect((await count(c, "n", { kinds: [1059], "#p": [recipient.pubkey] }))[2].count).toBe(1);
});
