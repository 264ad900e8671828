// NIP-62 over a real websocket: a request to vanish naming this relay (or ALL_RELAYS) deletes
// every event of the pubkey up to its created_at, and the gift wraps addressed to it; nothing
// deleted may come back; allow lists do not stand in the way of the deletion (but the request is
// then not stored: test/vanish-policy.test.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { refusedWith, accepted, Client, now, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";

const EXAMPLE_URL = "wss://relay.example.com/nostr";

let relay: TestRelay; // defaults: its URL is ws://127.0.0.1:<port>/
let named: TestRelay; // info.relay_url = EXAMPLE_URL
let off: TestRelay; // nips.nip62 = false
const clients: Client[] = [];

beforeAll(async () => {
  [relay, named, off] = await Promise.all([
    startTestRelay(),
    startTestRelay({ info: { relay_url: EXAMPLE_URL } }),
    startTestRelay({ nips: { nip62: false } }),
  ]);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([relay, named, off].filter(Boolean).map((r) => r.stop()));
});

async function connect(r: TestRelay = relay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

/** A connection authenticated (NIP-42) as each of `who`. */
async function connectAs(r: TestRelay, ...who: Signer[]): Promise<Client> {
  const c = await connect(r);
  for (const s of who) expect((await c.auth(s, r.url)).slice(2)).toEqual([true, ""]);
  return c;
}

let n = 0;
const ids = async (c: Client, ...filters: object[]) => (await c.req(`q${n++}`, ...filters)).events.map((e) => e.id).sort();
const sorted = (...es: NostrEvent[]) => es.map((e) => e.id).sort();

/** A NIP-59-shaped gift wrap: kind 1059 from a throwaway key, p-tagged to the recipient. */
const giftWrap = (to: string, created_at: number) => signer().sign({ kind: 1059, content: "sealed", created_at, tags: [["p", to]] });

/** Everything a pubkey might have stored, all before `t`. */
function history(v: Signer, t: number): NostrEvent[] {
  return [
    v.sign({ kind: 1, content: "note", created_at: t - 50 }),
    v.sign({ kind: 0, content: '{"name":"v"}', created_at: t - 40 }),
    v.sign({ kind: 10002, tags: [["r", "wss://a.example.com"]], created_at: t - 40 }),
    v.sign({ kind: 30023, content: "article", tags: [["d", "post"]], created_at: t - 30 }),
    v.sign({ kind: 5, tags: [["e", "f".repeat(64)]], created_at: t - 20 }),
    v.sign({ kind: 7, content: "+", tags: [["e", "e".repeat(64)]], created_at: t - 10 }),
  ];
}

describe("a request to vanish naming this relay", () => {
  test("deletes everything of the pubkey up to created_at, gift wraps to it, and keeps it all out", async () => {
    const c = await connect();
    const v = signer();
    const other = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    const wrapToV = giftWrap(v.pubkey, t - 5);
    const wrapToOther = giftWrap(other.pubkey, t - 5);
    const otherNote = other.sign({ kind: 1, content: "mentions v", tags: [["p", v.pubkey]], created_at: t - 5 });
    const afterRequest = v.sign({ kind: 1, content: "created after the request, stored before it", created_at: t + 100 });
    for (const e of [...mine, wrapToV, wrapToOther, otherNote, afterRequest]) await accepted(c, e);

    const reader = await connectAs(relay, v, other);
    expect(await ids(reader, { authors: [v.pubkey] })).toEqual(sorted(...mine, afterRequest));
    expect(await ids(reader, { kinds: [1059], "#p": [v.pubkey] })).toEqual([wrapToV.id]);

    const vanish = v.sign({ kind: 62, content: "bye", created_at: t, tags: [["relay", relay.url]] });
    await accepted(c, vanish);

    // The pubkey's events up to the request are gone; the request itself and later events stay.
    expect(await ids(reader, { authors: [v.pubkey] })).toEqual(sorted(vanish, afterRequest));
    expect(await ids(reader, { ids: mine.map((e) => e.id) })).toEqual([]);
    // Gift wraps p-tagged to it are gone; others' events (even ones tagging it) stay.
    expect(await ids(reader, { kinds: [1059], "#p": [v.pubkey] })).toEqual([]);
    expect(await ids(reader, { ids: [wrapToV.id] })).toEqual([]);
    expect(await ids(reader, { kinds: [1059], "#p": [other.pubkey] })).toEqual([wrapToOther.id]);
    expect(await ids(reader, { authors: [other.pubkey] })).toEqual([otherNote.id]);

    // Nothing deleted may be re-broadcast into the relay, from any connection.
    const again = await connect();
    for (const e of [...mine, wrapToV]) await refusedWith(again, e, "blocked:");
    // Nor any other event of the pubkey created up to the request.
    await refusedWith(again, v.sign({ kind: 1, content: "backdated", created_at: t - 1 }), "blocked:");
    await refusedWith(again, v.sign({ kind: 1, content: "same second", created_at: t }), "blocked:");
    await refusedWith(again, giftWrap(v.pubkey, t - 1), "blocked:");
    expect(await ids(reader, { authors: [v.pubkey] })).toEqual(sorted(vanish, afterRequest));

    // An event created after the request is accepted.
    const fresh = v.sign({ kind: 1, content: "hello again", created_at: t + 200 });
    await accepted(again, fresh);
    expect(await ids(reader, { ids: [fresh.id] })).toEqual([fresh.id]);
  });

  test.each([
    ["ALL_RELAYS", () => "ALL_RELAYS"],
    ["the relay's URL", () => relay.url],
    ["the relay's URL without the trailing slash", () => relay.url.replace(/\/$/, "")],
    ["the relay's URL with wss:", () => relay.url.replace(/^ws:/, "wss:")],
  ])("relay tag %s is honoured", async (_name, tag) => {
    const c = await connect();
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    for (const e of mine) await accepted(c, e);
    const vanish = v.sign({
      kind: 62,
      created_at: t,
      tags: [
        ["relay", "wss://elsewhere.example.com"],
        ["relay", tag()],
      ],
    });
    await accepted(c, vanish);
    expect(await ids(c, { authors: [v.pubkey] })).toEqual([vanish.id]);
    await refusedWith(c, mine[0]!, "blocked:");
  });

  test.each([
    ["the configured URL, different case", "wss://RELAY.Example.COM/nostr"],
    ["the configured URL, trailing slash", "wss://relay.example.com/nostr/"],
    ["the configured URL, exact", EXAMPLE_URL],
  ])("with info.relay_url: %s is honoured", async (_name, tag) => {
    const c = await connect(named);
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    for (const e of mine) await accepted(c, e);
    const vanish = v.sign({ kind: 62, created_at: t, tags: [["relay", tag]] });
    await accepted(c, vanish);
    expect(await ids(c, { authors: [v.pubkey] })).toEqual([vanish.id]);
    await refusedWith(c, mine[3]!, "blocked:");
  });

  test("a kind 5 against the request to vanish has no effect", async () => {
    const c = await connect();
    const v = signer();
    const t = now() - 1000;
    const note = v.sign({ kind: 1, created_at: t - 10 });
    await accepted(c, note);
    const vanish = v.sign({ kind: 62, created_at: t, tags: [["relay", "ALL_RELAYS"]] });
    await accepted(c, vanish);
    await accepted(
      c,
      v.sign({
        kind: 5,
        created_at: t + 10,
        tags: [
          ["e", vanish.id],
          ["k", "62"],
        ],
      }),
    );
    expect((await c.req("v", { ids: [vanish.id] })).events).toEqual([vanish]);
    // Still vanished: what it deleted stays out.
    await refusedWith(c, note, "blocked:");
  });
});

describe("a request to vanish not for this relay", () => {
  test.each([
    ["another relay", [["relay", "wss://other.example.com"]]],
    ["another port", [["relay", "ws://127.0.0.1:1/"]]],
    ["lowercase all_relays", [["relay", "all_relays"]]],
    ["no relay tag", [["p", "a".repeat(64)]]],
  ])("naming %s is refused with invalid: and deletes nothing", async (_name, tags) => {
    const c = await connect();
    const v = signer();
    const t = now() - 1000;
    const note = v.sign({ kind: 1, created_at: t - 10 });
    await accepted(c, note);
    await refusedWith(c, v.sign({ kind: 62, created_at: t, tags }), "invalid:");
    expect(await ids(c, { authors: [v.pubkey] })).toEqual([note.id]);
    // And the pubkey may still publish older events.
    await accepted(c, v.sign({ kind: 1, content: "older", created_at: t - 20 }));
  });

  test("with info.relay_url set, a request naming another host is refused", async () => {
    const c = await connect(named);
    const v = signer();
    await refusedWith(c, v.sign({ kind: 62, tags: [["relay", "wss://relay.example.org/nostr"]] }), "invalid:");
  });
});

describe("restricted writes", () => {
  test("a request to vanish is carried out, not stored, for a pubkey not on a non-empty pubkey_allowlist (and on the denylist)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bunstr-nip62-"));
    const v = signer();
    const member = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    let r: TestRelay | undefined;
    try {
      // First without an allow list: v's history gets stored.
      r = await startTestRelay({}, { dir });
      let c = await Client.connect(r.url);
      for (const e of mine) await accepted(c, e);
      c.close();
      await r.stop();
      // Then the operator restricts writes to someone else.
      r = await startTestRelay({ authorization: { pubkey_allowlist: [member.pubkey], pubkey_denylist: [v.pubkey] } }, { dir });
      c = await Client.connect(r.url);
      try {
        expect((await c.publish(v.sign({ kind: 1, content: "not a member", created_at: t + 1 })))[2]).toBe(false);
        expect(await ids(c, { authors: [v.pubkey] })).toEqual(sorted(...mine));
        const vanish = v.sign({ kind: 62, created_at: t, tags: [["relay", r.url]] });
        const ok = await c.publish(vanish);
        expect(ok[2]).toBe(false);
        expect(ok[3]).toStartWith("blocked: this pubkey may not publish here; the request to vanish was carried out");
        expect(await ids(c, { ids: mine.map((e) => e.id) })).toEqual([]);
        expect(await ids(c, { ids: [vanish.id] })).toEqual([]);
        // Still refused (the lists answer first here), and still gone.
        expect((await c.publish(mine[0]!))[2]).toBe(false);
        expect(await ids(c, { ids: [mine[0]!.id] })).toEqual([]);
      } finally {
        c.close();
      }
    } finally {
      await r?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("nips.nip62 = false", () => {
  test("kind 62 is stored as a plain event, deletes nothing, and NIP-11 does not list 62", async () => {
    const c = await connect(off);
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    for (const e of mine) await accepted(c, e);
    const vanish = v.sign({ kind: 62, created_at: t, tags: [["relay", "ALL_RELAYS"]] });
    await accepted(c, vanish);
    expect(await ids(c, { authors: [v.pubkey] })).toEqual(sorted(...mine, vanish));
    await accepted(c, v.sign({ kind: 1, content: "backdated", created_at: t - 1 }));
    const nips = async (r: TestRelay) =>
      ((await (await fetch(r.url.replace(/^ws/, "http"), { headers: { Accept: "application/nostr+json" } })).json()) as any).supported_nips;
    expect(await nips(relay)).toContain(62);
    expect(await nips(off)).not.toContain(62);
  });
});
