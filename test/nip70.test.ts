// NIP-70 over a real websocket: an event with ["-"] is accepted only from its authenticated
// author; reposts must not embed one; with nip70 off every protected event is refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { refusedWith, Client, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";

let relay: TestRelay;
let off: TestRelay; // nips.nip70 = false
const clients: Client[] = [];

beforeAll(async () => {
  [relay, off] = await Promise.all([startTestRelay(), startTestRelay({ nips: { nip70: false } })]);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([relay, off].filter(Boolean).map((r) => r.stop()));
});

async function connectAs(r: TestRelay, ...who: Signer[]): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  for (const s of who) expect((await c.auth(s, r.url)).slice(2)).toEqual([true, ""]);
  return c;
}

let n = 0;
const ids = async (c: Client, filter: object) => (await c.req(`q${n++}`, filter)).events.map((e) => e.id);

const protectedNote = (s: Signer, content = "members only") => s.sign({ kind: 1, content, tags: [["-"]] });

describe("protected events", () => {
  test("refused with auth-required: when not authenticated, and not stored", async () => {
    const c = await connectAs(relay);
    const author = signer();
    const e = protectedNote(author);
    await refusedWith(c, e, "auth-required:");
    // ["-"] anywhere among the tags counts.
    await refusedWith(c, author.sign({ kind: 1, tags: [["t", "x"], ["-"], ["p", "a".repeat(64)]] }), "auth-required:");
    expect(await ids(c, { authors: [author.pubkey] })).toEqual([]);
  });

  test("accepted after AUTH as its author, and served", async () => {
    const author = signer();
    const e = protectedNote(author);
    const c = await connectAs(relay, author);
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    const reader = await connectAs(relay);
    expect((await reader.req("r", { ids: [e.id] })).events).toEqual([e]);
  });

  test("the NIP's flow: refused, AUTH, the same event accepted on the same connection", async () => {
    const author = signer();
    const e = protectedNote(author);
    const c = await connectAs(relay);
    await refusedWith(c, e, "auth-required:");
    const [, challenge] = c.frames.find((f) => f[0] === "AUTH");
    const auth = author.sign({
      kind: 22242,
      tags: [
        ["relay", relay.url],
        ["challenge", challenge],
      ],
    });
    c.send(["AUTH", auth]);
    expect((await c.next((f) => f[0] === "OK" && f[1] === auth.id))[2]).toBe(true);
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
  });

  test("refused with restricted: when authenticated as someone else", async () => {
    const author = signer();
    const someoneElse = signer();
    const e = protectedNote(author);
    const c = await connectAs(relay, someoneElse);
    await refusedWith(c, e, "restricted:");
    expect(await ids(c, { ids: [e.id] })).toEqual([]);
    // Authenticating as the author too (several pubkeys on one connection) lets it in.
    const both = await connectAs(relay, someoneElse, author);
    expect(await both.publish(e)).toEqual(["OK", e.id, true, ""]);
  });

  test("with nips.nip70 = false every protected event is refused with blocked:, even from its author", async () => {
    const author = signer();
    const anon = await connectAs(off);
    await refusedWith(anon, protectedNote(author), "blocked:");
    const authed = await connectAs(off, author);
    const e = protectedNote(author, "still no");
    await refusedWith(authed, e, "blocked:");
    expect(await ids(authed, { authors: [author.pubkey] })).toEqual([]);
    // Unprotected events are unaffected.
    const plain = author.sign({ kind: 1, content: "public" });
    expect(await authed.publish(plain)).toEqual(["OK", plain.id, true, ""]);
  });
});

describe("reposts", () => {
  test("a kind 6 embedding a protected event is refused with blocked:; one embedding a normal event is accepted", async () => {
    const author = signer();
    const reposter = signer();
    const secret = protectedNote(author);
    const open = author.sign({ kind: 1, content: "public" });
    const c = await connectAs(relay, author, reposter);
    expect((await c.publish(secret))[2]).toBe(true);
    expect((await c.publish(open))[2]).toBe(true);

    const badRepost = reposter.sign({
      kind: 6,
      content: JSON.stringify(secret),
      tags: [
        ["e", secret.id],
        ["p", author.pubkey],
      ],
    });
    await refusedWith(c, badRepost, "blocked:");
    // Even the author may not embed it in a repost.
    await refusedWith(c, author.sign({ kind: 6, content: JSON.stringify(secret), tags: [["e", secret.id]] }), "blocked:");
    // Kind 16 generic reposts too.
    await refusedWith(
      c,
      reposter.sign({
        kind: 16,
        content: JSON.stringify(secret),
        tags: [
          ["e", secret.id],
          ["k", "1"],
        ],
      }),
      "blocked:",
    );

    // Pretty-printed JSON embeds it just the same.
    await refusedWith(c, reposter.sign({ kind: 6, content: JSON.stringify(secret, null, 2), tags: [["e", secret.id]] }), "blocked:");

    const goodRepost = reposter.sign({
      kind: 6,
      content: JSON.stringify(open),
      tags: [
        ["e", open.id],
        ["p", author.pubkey],
      ],
    });
    expect(await c.publish(goodRepost)).toEqual(["OK", goodRepost.id, true, ""]);
    // A repost of the protected event that does not embed it is fine.
    const bareRepost = reposter.sign({
      kind: 6,
      content: "",
      tags: [
        ["e", secret.id],
        ["p", author.pubkey],
      ],
    });
    expect(await c.publish(bareRepost)).toEqual(["OK", bareRepost.id, true, ""]);
    expect((await ids(c, { authors: [reposter.pubkey] })).sort()).toEqual([goodRepost.id, bareRepost.id].sort());
  });

  test("an embedded protected event is recognised however its JSON is escaped", async () => {
    const author = signer();
    const reposter = signer();
    const secret = protectedNote(author);
    const c = await connectAs(relay, author, reposter);
    expect((await c.publish(secret))[2]).toBe(true);
    // "\u002d" is the same "-" once the content is parsed: still an embedded protected event.
    const escaped = JSON.stringify(secret).replace('["-"]', '["\\u002d"]');
    expect(escaped).not.toContain('"-"');
    expect(JSON.parse(escaped)).toEqual(secret);
    const repost = reposter.sign({
      kind: 6,
      content: escaped,
      tags: [
        ["e", secret.id],
        ["p", author.pubkey],
      ],
    });
    await refusedWith(c, repost, "blocked:");
    expect(await ids(c, { ids: [repost.id] })).toEqual([]);
  });
});
