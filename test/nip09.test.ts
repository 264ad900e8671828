// NIP-09 over a real websocket: kind 5 deletion requests delete the author's own referenced
// events (by id and by address), keep them deleted, and are themselves stored and served.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { refusedWith, accepted, Client, now, signer, startTestRelay, type TestRelay, relayInfo } from "./helpers.ts";

let relay: TestRelay;
let off: TestRelay; // nips.nip09 = false
const clients: Client[] = [];

beforeAll(async () => {
  [relay, off] = await Promise.all([startTestRelay(), startTestRelay({ nips: { nip09: false } })]);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([relay, off].filter(Boolean).map((r) => r.stop()));
});

async function connect(r: TestRelay = relay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

let n = 0;
const ids = async (c: Client, filter: object) => (await c.req(`q${n++}`, filter)).events.map((e) => e.id).sort();

const info = (r: TestRelay) => relayInfo(r.url);

describe("e tags", () => {
  test("deletes the author's referenced events; other authors' events in the same request stay", async () => {
    const c = await connect();
    const a = signer();
    const b = signer();
    const a1 = a.sign({ kind: 1, content: "a1" });
    const a2 = a.sign({ kind: 1, content: "a2" });
    const keep = a.sign({ kind: 1, content: "not referenced" });
    const b1 = b.sign({ kind: 1, content: "b1" });
    for (const e of [a1, a2, keep, b1]) await accepted(c, e);

    const del = a.sign({
      kind: 5,
      content: "oops",
      tags: [
        ["e", a1.id],
        ["e", a2.id],
        ["e", b1.id],
        ["k", "1"],
      ],
    });
    await accepted(c, del);

    expect(await ids(c, { ids: [a1.id, a2.id, keep.id, b1.id] })).toEqual([keep.id, b1.id].sort());
    expect(await ids(c, { authors: [a.pubkey], kinds: [1] })).toEqual([keep.id]);
    // b1 is still served to anyone asking for it, and b may still publish normally.
    expect((await c.req("b", { authors: [b.pubkey] })).events).toEqual([b1]);
    c.close();
  });

  test("the deletion request itself is stored and served (REQ kinds [5])", async () => {
    const c = await connect();
    const a = signer();
    const target = a.sign({ kind: 1 });
    await accepted(c, target);
    const del = a.sign({
      kind: 5,
      tags: [
        ["e", target.id],
        ["k", "1"],
      ],
    });
    await accepted(c, del);
    expect((await c.req("d", { kinds: [5], authors: [a.pubkey] })).events).toEqual([del]);
    expect((await c.req("d2", { "#e": [target.id] })).events).toEqual([del]);
    c.close();
  });

  test("re-publishing a deleted event is refused with blocked: and it stays deleted", async () => {
    const c = await connect();
    const a = signer();
    const target = a.sign({ kind: 1, content: "regret" });
    await accepted(c, target);
    await accepted(c, a.sign({ kind: 5, tags: [["e", target.id]] }));
    expect(await ids(c, { ids: [target.id] })).toEqual([]);
    await refusedWith(c, target, "blocked:");
    // From another connection too.
    const other = await connect();
    await refusedWith(other, target, "blocked:");
    expect(await ids(other, { ids: [target.id] })).toEqual([]);
    c.close();
    other.close();
  });

  test("a deletion request arriving before its target keeps the target out", async () => {
    const c = await connect();
    const a = signer();
    const target = a.sign({ kind: 1, content: "published later", created_at: now() - 10 });
    await accepted(c, a.sign({ kind: 5, tags: [["e", target.id]] }));
    await refusedWith(c, target, "blocked:");
    expect(await ids(c, { ids: [target.id] })).toEqual([]);
    c.close();
  });

  test("another author's request for an id does not block the real author's event", async () => {
    const c = await connect();
    const a = signer();
    const mallory = signer();
    const target = a.sign({ kind: 1, content: "mine" });
    // Mallory asks first, before the event ever reached the relay: it must still be accepted.
    await accepted(c, mallory.sign({ kind: 5, tags: [["e", target.id]] }));
    await accepted(c, target);
    // And again once it is stored: nothing happens to it.
    await accepted(c, mallory.sign({ kind: 5, content: "again", tags: [["e", target.id]] }));
    expect(await ids(c, { ids: [target.id] })).toEqual([target.id]);
    c.close();
  });

  test("the author's own deletion sticks even after another author requested the same id", async () => {
    const c = await connect();
    const a = signer();
    const mallory = signer();
    const target = a.sign({ kind: 1, content: "mine, to delete" });
    await accepted(c, target);
    await accepted(c, mallory.sign({ kind: 5, tags: [["e", target.id]] }));
    expect(await ids(c, { ids: [target.id] })).toEqual([target.id]);
    await accepted(c, a.sign({ kind: 5, tags: [["e", target.id]] }));
    expect(await ids(c, { ids: [target.id] })).toEqual([]);
    // NIP-09: deleted events stay deleted; Mallory's earlier request must not weaken that.
    await refusedWith(c, target, "blocked:");
    expect(await ids(c, { ids: [target.id] })).toEqual([]);
    c.close();
  });
});

describe("a tags", () => {
  test("addressable: every version up to the request's created_at is deleted; a newer one is accepted", async () => {
    const c = await connect();
    const a = signer();
    const b = signer();
    const t = now() - 1000;
    const v1 = a.sign({ kind: 30023, content: "v1", tags: [["d", "post"]], created_at: t });
    const v2 = a.sign({ kind: 30023, content: "v2", tags: [["d", "post"]], created_at: t + 10 });
    const other = a.sign({ kind: 30023, content: "other d", tags: [["d", "other"]], created_at: t });
    const bPost = b.sign({ kind: 30023, content: "b's post", tags: [["d", "post"]], created_at: t });
    for (const e of [v1, v2, other, bPost]) await accepted(c, e);

    const del = a.sign({
      kind: 5,
      created_at: t + 20,
      tags: [
        ["a", `30023:${a.pubkey}:post`],
        ["a", `30023:${b.pubkey}:post`],
        ["k", "30023"],
      ],
    });
    await accepted(c, del);

    expect(await ids(c, { kinds: [30023], authors: [a.pubkey] })).toEqual([other.id]);
    expect(await ids(c, { kinds: [30023], authors: [b.pubkey] })).toEqual([bPost.id]);
    // Versions up to the request: refused, whether seen before or not.
    await refusedWith(c, v1, "blocked:");
    await refusedWith(c, v2, "blocked:");
    await refusedWith(c, a.sign({ kind: 30023, content: "v1.5", tags: [["d", "post"]], created_at: t + 15 }), "blocked:");
    await refusedWith(c, a.sign({ kind: 30023, content: "same second", tags: [["d", "post"]], created_at: t + 20 }), "blocked:");
    expect(await ids(c, { kinds: [30023], authors: [a.pubkey], "#d": ["post"] })).toEqual([]);
    // A version created after the request is accepted and served.
    const v3 = a.sign({ kind: 30023, content: "v3", tags: [["d", "post"]], created_at: t + 30 });
    await accepted(c, v3);
    expect((await c.req("v3", { kinds: [30023], authors: [a.pubkey], "#d": ["post"] })).events).toEqual([v3]);
    c.close();
  });

  test.each([0, 10002])("replaceable kind %d via kind:pubkey: — deleted up to created_at, newer accepted", async (kind) => {
    const c = await connect();
    const a = signer();
    const t = now() - 1000;
    const v1 = a.sign({ kind, content: "v1", created_at: t });
    const v2 = a.sign({ kind, content: "v2", created_at: t + 10 });
    await accepted(c, v1);
    await accepted(c, v2);
    expect(await ids(c, { kinds: [kind], authors: [a.pubkey] })).toEqual([v2.id]);

    await accepted(
      c,
      a.sign({
        kind: 5,
        created_at: t + 20,
        tags: [
          ["a", `${kind}:${a.pubkey}:`],
          ["k", String(kind)],
        ],
      }),
    );
    expect(await ids(c, { kinds: [kind], authors: [a.pubkey] })).toEqual([]);
    await refusedWith(c, v2, "blocked:");
    await refusedWith(c, a.sign({ kind, content: "v1.5", created_at: t + 15 }), "blocked:");
    expect(await ids(c, { kinds: [kind], authors: [a.pubkey] })).toEqual([]);

    const v3 = a.sign({ kind, content: "v3", created_at: t + 30 });
    await accepted(c, v3);
    expect((await c.req("v3", { kinds: [kind], authors: [a.pubkey] })).events).toEqual([v3]);
    c.close();
  });
  test("an addressable event without a d tag is the address with an empty d", async () => {
    const c = await connect();
    const a = signer();
    const t = now() - 1000;
    const noD = a.sign({ kind: 30023, content: "no d tag", created_at: t });
    const named = a.sign({ kind: 30023, content: "d=x", tags: [["d", "x"]], created_at: t });
    await accepted(c, noD);
    await accepted(c, named);
    await accepted(c, a.sign({ kind: 5, created_at: t + 10, tags: [["a", `30023:${a.pubkey}:`]] }));
    expect(await ids(c, { kinds: [30023], authors: [a.pubkey] })).toEqual([named.id]);
    await refusedWith(c, a.sign({ kind: 30023, content: "empty d", tags: [["d", ""]], created_at: t + 5 }), "blocked:");
    c.close();
  });

  test("a version newer than the request, already stored, is kept", async () => {
    const c = await connect();
    const a = signer();
    const t = now() - 1000;
    const article = a.sign({ kind: 30023, content: "newer", tags: [["d", "kept"]], created_at: t + 30 });
    const profile = a.sign({ kind: 0, content: "newer", created_at: t + 30 });
    await accepted(c, article);
    await accepted(c, profile);
    await accepted(
      c,
      a.sign({
        kind: 5,
        created_at: t + 20,
        tags: [
          ["a", `30023:${a.pubkey}:kept`],
          ["a", `0:${a.pubkey}:`],
        ],
      }),
    );
    expect(await ids(c, { kinds: [0, 30023], authors: [a.pubkey] })).toEqual([article.id, profile.id].sort());
    c.close();
  });
});

describe("what a deletion request cannot delete", () => {
  test("deleting a deletion request has no effect", async () => {
    const c = await connect();
    const a = signer();
    const t = now() - 100;
    const target = a.sign({ kind: 1, created_at: t });
    await accepted(c, target);
    const del1 = a.sign({ kind: 5, created_at: t + 1, tags: [["e", target.id]] });
    await accepted(c, del1);
    await accepted(
      c,
      a.sign({
        kind: 5,
        created_at: t + 2,
        tags: [
          ["e", del1.id],
          ["k", "5"],
        ],
      }),
    );
    // The first request is still served, and what it deleted stays deleted.
    expect(await ids(c, { ids: [del1.id] })).toEqual([del1.id]);
    expect(await ids(c, { ids: [target.id] })).toEqual([]);
    await refusedWith(c, target, "blocked:");

    // The same when the "undelete" arrives first: the deletion request is still accepted.
    const x = a.sign({ kind: 1, content: "x", created_at: t });
    await accepted(c, x);
    const del2 = a.sign({ kind: 5, created_at: t + 5, tags: [["e", x.id]] });
    await accepted(c, a.sign({ kind: 5, created_at: t + 6, tags: [["e", del2.id]] }));
    await accepted(c, del2);
    expect(await ids(c, { ids: [del2.id, x.id] })).toEqual([del2.id]);
    c.close();
  });

  test("a kind 5 against a kind 62 request to vanish has no effect", async () => {
    const c = await connect();
    const a = signer();
    const t = now() - 100;
    const vanish = a.sign({ kind: 62, created_at: t, tags: [["relay", relay.url]] });
    await accepted(c, vanish);
    await accepted(
      c,
      a.sign({
        kind: 5,
        created_at: t + 10,
        tags: [
          ["e", vanish.id],
          ["k", "62"],
        ],
      }),
    );
    expect((await c.req("v", { ids: [vanish.id] })).events).toEqual([vanish]);
    c.close();
  });
});

describe("nips.nip09 = false", () => {
  test("kind 5 is stored but deletes nothing", async () => {
    const c = await connect(off);
    const a = signer();
    const t = now() - 100;
    const target = a.sign({ kind: 1, created_at: t });
    const addr = a.sign({ kind: 30023, tags: [["d", "x"]], created_at: t });
    await accepted(c, target);
    await accepted(c, addr);
    const del = a.sign({
      kind: 5,
      created_at: t + 10,
      tags: [
        ["e", target.id],
        ["a", `30023:${a.pubkey}:x`],
      ],
    });
    await accepted(c, del);
    expect(await ids(c, { authors: [a.pubkey] })).toEqual([target.id, addr.id, del.id].sort());
    expect((await c.req("d", { kinds: [5], authors: [a.pubkey] })).events).toEqual([del]);
    c.close();
  });

  test("NIP-11 supported_nips lists 9 only when on", async () => {
    expect((await info(relay)).supported_nips).toContain(9);
    expect((await info(off)).supported_nips).not.toContain(9);
  });
});
