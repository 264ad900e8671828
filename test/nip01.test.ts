// NIP-01 over a real websocket: every rule of the core relay, including the easy-to-forget ones.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { schnorr } from "@noble/curves/secp256k1.js";
import { canonicalForm, type NostrEvent } from "../src/protocol/event.ts";
import { Client, fence, now, signer, startTestRelay, type TestRelay } from "./helpers.ts";

let relay: TestRelay;
beforeAll(
  async () => (relay = await startTestRelay({ limits: { max_subscriptions: 150, max_message_bytes: 64 * 1024, max_event_tags: 100 } })),
);
afterAll(() => relay.stop());

const connect = () => Client.connect(relay.url);
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/** Signs with the NIP-01 canonical form computed by our own serializer (not JSON.stringify). */
function signCanonical(sk: Uint8Array, t: Omit<NostrEvent, "id" | "sig" | "pubkey">): NostrEvent {
  const pubkey = hex(schnorr.getPublicKey(sk));
  const e = { ...t, pubkey, id: "", sig: "" };
  e.id = createHash("sha256").update(canonicalForm(e), "utf8").digest("hex");
  e.sig = hex(schnorr.sign(Buffer.from(e.id, "hex"), sk));
  return e;
}

describe("EVENT validation and OK", () => {
  test("valid event: OK true with empty message, then duplicate: OK true", async () => {
    const c = await connect();
    const e = signer().sign({ kind: 1, content: "hello" });
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    const again = await c.publish(e);
    expect(again[2]).toBe(true);
    expect(again[3]).toStartWith("duplicate:");
    c.close();
  });

  test("bad signature: invalid:", async () => {
    const c = await connect();
    const e = signer().sign({ kind: 1, content: "x" });
    const forged = { ...e, sig: e.sig.slice(0, 127) + (e.sig[127] === "0" ? "1" : "0") };
    const ok = await c.publish(forged);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("invalid:");
    c.close();
  });

  test("id that is not the hash: invalid:", async () => {
    const c = await connect();
    const e = signer().sign({ kind: 1, content: "x" });
    const ok = await c.publish({ ...e, content: "changed" });
    expect(ok.slice(2)).toEqual([false, "invalid: event id does not match the event"]);
    c.close();
  });

  test.each([
    ["uppercase id", (e: any) => ({ ...e, id: e.id.toUpperCase() })],
    ["short pubkey", (e: any) => ({ ...e, pubkey: e.pubkey.slice(2) })],
    ["sig not hex", (e: any) => ({ ...e, sig: "z".repeat(128) })],
    ["created_at string", (e: any) => ({ ...e, created_at: String(e.created_at) })],
    ["created_at float", (e: any) => ({ ...e, created_at: e.created_at + 0.5 })],
    ["kind too large", (e: any) => ({ ...e, kind: 70000 })],
    ["tags not arrays", (e: any) => ({ ...e, tags: ["e"] })],
    ["tag value number", (e: any) => ({ ...e, tags: [["t", 1]] })],
    ["content missing", (e: any) => ({ ...e, content: undefined })],
  ])("malformed event (%s): OK false invalid:", async (_name, mutate) => {
    const c = await connect();
    const e = mutate(signer().sign({ kind: 1, content: "x" }));
    c.send(["EVENT", e]);
    const ok = await c.next((f) => f[0] === "OK");
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("invalid:");
    c.close();
  });

  test("event not an object gets OK false with an empty id", async () => {
    const c = await connect();
    c.send(["EVENT", "nope"]);
    expect(await c.next((f) => f[0] === "OK")).toEqual(["OK", "", false, "invalid: event must be a JSON object"]);
    c.close();
  });

  test("created_at too far in the future and too many tags are refused with invalid:", async () => {
    const c = await connect();
    const s = signer();
    const future = await c.publish(s.sign({ kind: 1, created_at: now() + 3600 }));
    expect(future[2]).toBe(false);
    expect(future[3]).toStartWith("invalid:");
    const tags = await c.publish(s.sign({ kind: 1, tags: Array.from({ length: 101 }, (_, i) => ["t", String(i)]) }));
    expect(tags[3]).toStartWith("invalid: too many tags");
    c.close();
  });

  test("escaping: control characters, U+007F and non-ASCII are hashed verbatim (NIP-01)", async () => {
    const c = await connect();
    const sk = signer().sk;
    const content = 'line\nquote" back\\ cr\r tab\t bs\b ff\f ctl\u0001\u001f del\u007f é 日本 🎉';
    const e = signCanonical(sk, { kind: 1, created_at: now(), tags: [["t", "a\u0002b"]], content });
    // The canonical form keeps U+0001, U+001F, U+0002 and U+007F as raw characters.
    const form = canonicalForm(e);
    expect(form).toContain("\u0001\u001f del\u007f é 日本 🎉");
    expect(form).toContain('line\\nquote\\" back\\\\ cr\\r tab\\t bs\\b ff\\f');
    expect(form).not.toContain("\\u0001");
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    const { events } = await c.req("esc", { ids: [e.id] });
    expect(events).toEqual([e]);
    // The JSON.stringify form that nostr-tools signs is accepted too (interop).
    const s = signer();
    const lib = s.sign({ kind: 1, content: "ctl\u0001" });
    expect((await c.publish(lib))[2]).toBe(true);
    c.close();
  });

  test("ephemeral events are delivered live and never stored", async () => {
    const a = await connect();
    const b = await connect();
    const s = signer();
    await b.req("eph", { authors: [s.pubkey] });
    const e = s.sign({ kind: 20001, content: "now" });
    expect(await a.publish(e)).toEqual(["OK", e.id, true, ""]);
    await b.next((f) => f[0] === "EVENT" && f[1] === "eph" && f[2].id === e.id);
    const { events } = await a.req("later", { ids: [e.id] });
    expect(events).toEqual([]);
    a.close();
    b.close();
  });
});

describe("replaceable and addressable events", () => {
  test("replaceable: newest kept, older arriving later refused, ties keep the lowest id", async () => {
    const c = await connect();
    const s = signer();
    const t = now() - 100;
    const v1 = s.sign({ kind: 0, content: "v1", created_at: t });
    const v2 = s.sign({ kind: 0, content: "v2", created_at: t + 10 });
    expect((await c.publish(v1))[2]).toBe(true);
    expect((await c.publish(v2))[2]).toBe(true);
    const late = await c.publish(s.sign({ kind: 0, content: "old", created_at: t + 5 }));
    expect(late[2]).toBe(false);
    expect(late[3]).toContain("newer version");
    expect((await c.req("r1", { kinds: [0], authors: [s.pubkey] })).events.map((e) => e.id)).toEqual([v2.id]);
    // Same timestamp: the lowest id wins, whichever arrives first.
    const ties = [1, 2, 3, 4].map((i) => s.sign({ kind: 10002, content: `tie ${i}`, created_at: t }));
    const lowest = ties.map((e) => e.id).sort()[0]!;
    for (const e of ties) await c.publish(e);
    expect((await c.req("r2", { kinds: [10002], authors: [s.pubkey] })).events.map((e) => e.id)).toEqual([lowest]);
    c.close();
  });

  test("addressable: one per (kind, pubkey, d) for any kind in 30000-39999", async () => {
    const c = await connect();
    const s = signer();
    const t = now() - 100;
    for (const kind of [30000, 30023, 39999]) {
      await c.publish(s.sign({ kind, tags: [["d", "a"]], content: "a1", created_at: t }));
      const a2 = s.sign({ kind, tags: [["d", "a"]], content: "a2", created_at: t + 1 });
      await c.publish(a2);
      const b = s.sign({ kind, tags: [["d", "b"]], content: "b", created_at: t });
      await c.publish(b);
      const nod = s.sign({ kind, content: "no d", created_at: t });
      await c.publish(nod);
      const got = (await c.req(`a${kind}`, { kinds: [kind], authors: [s.pubkey] })).events.map((e) => e.id);
      expect(got.sort()).toEqual([a2.id, b.id, nod.id].sort());
    }
    c.close();
  });

  test("race: versions published concurrently on many connections leave exactly one winner", async () => {
    const s = signer();
    const t = now() - 50;
    const versions = Array.from({ length: 24 }, (_, i) => s.sign({ kind: 3, content: `v${i}`, created_at: t + (i % 6) }));
    const newestTs = t + 5;
    const expected = versions
      .filter((v) => v.created_at === newestTs)
      .map((v) => v.id)
      .sort()[0];
    const clients = await Promise.all(Array.from({ length: 6 }, connect));
    // Every client sends every version (also the same event several times at once).
    await Promise.all(clients.map((c, ci) => Promise.all([...versions].sort(() => (ci % 2 ? 1 : -1)).map((v) => c.publish(v)))));
    const got = (await clients[0]!.req("race", { kinds: [3], authors: [s.pubkey] })).events.map((e) => e.id);
    expect(got).toEqual([expected!]);
    for (const c of clients) c.close();
  });
});

describe("REQ", () => {
  let s: ReturnType<typeof signer>;
  let evs: NostrEvent[];
  const base = now() - 10_000;
  beforeAll(async () => {
    s = signer();
    const c = await connect();
    // Ten events, two per timestamp, so ordering ties happen.
    evs = Array.from({ length: 10 }, (_, i) =>
      s.sign({
        kind: i % 2 ? 7 : 1,
        created_at: base + Math.floor(i / 2),
        content: `n${i}`,
        tags: [
          ["t", i % 3 ? "odd" : "three"],
          ["e", "f".repeat(64)],
        ],
      }),
    );
    for (const e of evs) expect((await c.publish(e))[2]).toBe(true);
    c.close();
  });
  const expectedOrder = () => [...evs].sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? -1 : 1)).map((e) => e.id);

  test("newest first, ties by lowest id, limit per filter", async () => {
    const c = await connect();
    expect((await c.req("o", { authors: [s.pubkey] })).events.map((e) => e.id)).toEqual(expectedOrder());
    expect((await c.req("l", { authors: [s.pubkey], limit: 3 })).events.map((e) => e.id)).toEqual(expectedOrder().slice(0, 3));
    c.close();
  });

  test("filters: kinds, tags AND across names / OR within, since/until, OR across filters", async () => {
    const c = await connect();
    const ids = async (...f: object[]) => (await c.req("f" + Math.random(), ...f)).events.map((e) => e.id).sort();
    const want = (p: (e: NostrEvent) => boolean) =>
      evs
        .filter(p)
        .map((e) => e.id)
        .sort();
    expect(await ids({ authors: [s.pubkey], kinds: [7] })).toEqual(want((e) => e.kind === 7));
    expect(await ids({ "#t": ["three"], authors: [s.pubkey] })).toEqual(want((e) => e.tags[0]![1] === "three"));
    expect(await ids({ "#t": ["three", "odd"], "#e": ["f".repeat(64)], kinds: [1] })).toEqual(want((e) => e.kind === 1));
    expect(await ids({ "#t": ["three"], "#e": ["0".repeat(64)] })).toEqual([]);
    expect(await ids({ authors: [s.pubkey], since: base + 2, until: base + 3 })).toEqual(
      want((e) => e.created_at >= base + 2 && e.created_at <= base + 3),
    );
    expect(await ids({ authors: [s.pubkey], kinds: [1], limit: 1 }, { authors: [s.pubkey], kinds: [7], limit: 1 })).toEqual(
      [evs[8]!.id, evs[9]!.id].sort(),
    );
    c.close();
  });

  test("limit 0: no stored events, EOSE, and the subscription stays live", async () => {
    const c = await connect();
    const r = await c.req("z", { authors: [s.pubkey], limit: 0 });
    expect(r.events).toEqual([]);
    expect(r.end).toEqual(["EOSE", "z"]);
    const e = s.sign({ kind: 1, content: "after limit 0" });
    const p = await connect();
    await p.publish(e);
    expect((await c.next((f) => f[0] === "EVENT" && f[1] === "z"))[2]).toEqual(e);
    c.close();
    p.close();
  });

  test("live events after EOSE arrive once per subscription even if several filters match", async () => {
    const c = await connect();
    await c.req("live", { authors: [s.pubkey] }, { kinds: [1] }, { "#t": ["live"] });
    const p = await connect();
    const e = s.sign({ kind: 1, content: "live one", tags: [["t", "live"]] });
    await p.publish(e);
    await c.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === e.id);
    await Bun.sleep(50);
    expect(c.eventsFor("live").filter((x) => x.id === e.id)).toHaveLength(1);
    c.close();
    p.close();
  });

  test("REQs opened while events stream in see every event exactly once (stored or live)", async () => {
    const w = signer();
    const p = await connect();
    const all = Array.from({ length: 400 }, (_, i) => w.sign({ kind: 1, content: `stream ${i}`, created_at: now() - 400 + i }));
    const subs = await Promise.all(Array.from({ length: 10 }, connect));
    const publishing = (async () => {
      for (let i = 0; i < all.length; i += 20) await Promise.all(all.slice(i, i + 20).map((e) => p.publish(e)));
    })();
    // Open the subscriptions at staggered points of the stream.
    for (const c of subs) {
      await Bun.sleep(8);
      c.send(["REQ", "stream", { authors: [w.pubkey], limit: 1000 }]);
    }
    await publishing;
    for (const c of subs) {
      await c.next((f) => f[0] === "EOSE");
      const deadline = Date.now() + 3000;
      while (c.eventsFor("stream").length < all.length && Date.now() < deadline) await Bun.sleep(10);
      const ids = c.eventsFor("stream").map((e) => e.id);
      expect(ids.length).toBe(all.length);
      expect(new Set(ids).size).toBe(all.length);
      c.close();
    }
    p.close();
  });

  test("same subscription id replaces the old one; CLOSE ends it", async () => {
    const c = await connect();
    const p = await connect();
    const other = signer();
    await c.req("same", { authors: [s.pubkey] });
    await c.req("same", { authors: [other.pubkey], limit: 0 });
    const old = s.sign({ kind: 1, content: "to the old filter" });
    await p.publish(old);
    const mine = other.sign({ kind: 1, content: "to the new filter" });
    await p.publish(mine);
    await c.next((f) => f[0] === "EVENT" && f[2].id === mine.id);
    const got = c.eventsFor("same").map((e) => e.id);
    expect(got).toContain(mine.id);
    expect(got).not.toContain(old.id);
    c.send(["CLOSE", "same"]);
    const pass = await fence(c, p); // the CLOSE has been handled
    const after = other.sign({ kind: 1, content: "after close" });
    await p.publish(after);
    await pass(); // anything sent to c for `after` has arrived
    expect(c.eventsFor("same").map((e) => e.id)).not.toContain(after.id);
    c.close();
    p.close();
  });

  test.each([
    ["non-hex id", { ids: ["xyz"] }],
    ["uppercase author", { authors: ["A".repeat(64)] }],
    ["short #e", { "#e": ["abc"] }],
    ["multi-letter tag key", { "#emoji": ["x"] }],
    ["unknown key", { foo: 1 }],
    ["kinds not integers", { kinds: ["1"] }],
    ["negative limit", { limit: -1 }],
    ["filter not an object", [1, 2]],
  ])("invalid filter (%s) gets CLOSED invalid:, never a silent EOSE", async (_n, filter) => {
    const c = await connect();
    const r = await c.req("bad", filter);
    expect(r.end[0]).toBe("CLOSED");
    expect(r.end[2]).toStartWith("invalid:");
    c.close();
  });

  test("REQ without filters, empty or overlong subscription ids are refused", async () => {
    const c = await connect();
    expect((await c.req("nofilter")).end).toEqual(["CLOSED", "nofilter", "invalid: REQ needs at least one filter"]);
    c.send(["REQ", "", {}]);
    expect((await c.next((f) => f[0] === "NOTICE"))[1]).toStartWith("invalid:");
    c.send(["REQ", "x".repeat(65), {}]);
    expect((await c.next((f) => f[0] === "NOTICE" && f[1].includes("longer")))[1]).toStartWith("invalid:");
    c.close();
  });

  test("long tag values are found by REQ as they are by live matching", async () => {
    const c = await connect();
    // Up to max_filter_value_length (1024); longer filter values are refused (test/hostile-reads.test.ts).
    const long = "v".repeat(1024);
    const e = s.sign({ kind: 1, content: "long tag", tags: [["t", long]] });
    await c.publish(e);
    expect((await c.req("long", { "#t": [long] })).events.map((x) => x.id)).toEqual([e.id]);
    c.close();
  });

  test("empty lists match nothing (EOSE, no events)", async () => {
    const c = await connect();
    const r = await c.req("empty", { authors: [] });
    expect(r).toEqual({ events: [], end: ["EOSE", "empty"] });
    c.close();
  });

  test("100+ subscriptions on one connection, and one more than the limit gets CLOSED", async () => {
    const c = await connect();
    const p = await connect();
    await Promise.all(Array.from({ length: 150 }, (_, i) => c.req(`s${i}`, { kinds: [1], "#t": [`sub${i}`], limit: 1 })));
    const over = await c.req("s150", { kinds: [1] });
    expect(over.end[0]).toBe("CLOSED");
    expect(over.end[2]).toStartWith("rate-limited:");
    // Replacing an existing id is not a new subscription.
    expect((await c.req("s0", { kinds: [1], "#t": ["sub0"], limit: 0 })).end[0]).toBe("EOSE");
    const e = s.sign({ kind: 1, content: "to 42", tags: [["t", "sub42"]] });
    await p.publish(e);
    expect((await c.next((f) => f[0] === "EVENT" && f[1] === "s42" && f[2].id === e.id))[2]).toEqual(e);
    c.close();
    p.close();
  });
});

describe("hostile frames", () => {
  test("malformed JSON and unknown verbs get NOTICE and the connection stays open", async () => {
    const c = await connect();
    c.send("{not json");
    expect((await c.next((f) => f[0] === "NOTICE"))[1]).toStartWith("invalid:");
    c.send(["HELLO"]);
    await c.next((f) => f[0] === "NOTICE" && f[1].includes("unknown message type"));
    c.send({ not: "an array" });
    await c.next((f) => f[0] === "NOTICE" && f[1].includes("JSON array"));
    expect((await c.req("still", { limit: 1 })).end[0]).toBe("EOSE");
    c.close();
  });

  test("a binary frame gets a NOTICE", async () => {
    const c = await connect();
    c.ws.send(new Uint8Array([1, 2, 3]));
    expect((await c.next((f) => f[0] === "NOTICE"))[1]).toContain("binary");
    c.close();
  });

  test("oversize EVENT gets OK false invalid:, oversize REQ gets CLOSED, huge frame is closed with 1009", async () => {
    const c = await connect();
    const e = signer().sign({ kind: 1, content: "x".repeat(70 * 1024) });
    const ok = await c.publish(e);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("invalid: message is larger than");
    c.send(["REQ", "big", { authors: Array.from({ length: 1200 }, () => "a".repeat(64)) }]);
    expect((await c.next((f) => f[0] === "CLOSED" && f[1] === "big"))[2]).toStartWith("invalid: message is larger than");
    expect((await c.req("alive", { limit: 1 })).end[0]).toBe("EOSE");
    c.send(JSON.stringify(["EVENT", { content: "y".repeat(2 * 1024 * 1024) }]));
    for (let i = 0; i < 100 && !c.closed; i++) await Bun.sleep(20);
    expect(c.closed).toBe(true);
    expect(c.closeCode).toBe(1009);
    const other = await connect();
    expect((await other.req("after", { limit: 1 })).end[0]).toBe("EOSE");
    other.close();
  });
});
