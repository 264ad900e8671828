// NIP-45 COUNT over a real websocket: ["COUNT", id, {"count": n}] over the same filters as REQ,
// OR-ed and de-duplicated, limit ignored, CLOSED for refusals, and HyperLogLog registers checked
// against an independent implementation of the NIP-45 text.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now, signer, startTestRelay, type Signer, type TestRelay, relayInfo } from "./helpers.ts";

let relay: TestRelay;
let off: TestRelay;
const clients: Client[] = [];

// A small default_limit: COUNT must not be capped by it (nor by max_limit).
beforeAll(async () => {
  relay = await startTestRelay({ limits: { default_limit: 5, max_limit: 10 } });
  off = await startTestRelay({ nips: { nip45: false } });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await relay.stop();
  await off.stop();
});

async function connect(url = relay.url): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

const count = (c: Client, subId: string, ...filters: unknown[]) => c.count(subId, filters);

async function publishAll(c: Client, evs: NostrEvent[], batch = 50): Promise<void> {
  for (let i = 0; i < evs.length; i += batch) {
    const oks = await Promise.all(evs.slice(i, i + batch).map((e) => c.publish(e)));
    for (const ok of oks) expect(ok[2]).toBe(true);
  }
}

/**
 * NIP-45 "offset computation", written from the text: the first tag attribute's first item; a
 * 64-hex id/pubkey as is, an address `<kind>:<pubkey>:<d-tag>` by its pubkey, anything else
 * sha256; the character at position 32, read as base 16, plus 8.
 */
function nip45Offset(firstValue: string): number {
  let hex: string;
  const address = /^\d+:([0-9a-f]{64}):/.exec(firstValue);
  if (/^[0-9a-f]{64}$/.test(firstValue)) hex = firstValue;
  else if (address) hex = address[1]!;
  else hex = createHash("sha256").update(firstValue, "utf8").digest("hex");
  return Number.parseInt(hex.charAt(32), 16) + 8;
}

/**
 * NIP-45 "Algorithm": 256 registers; for each counted event, register index = the pubkey byte at
 * `offset`, value = leading zero bits from position offset+1 of the pubkey, plus 1; keep the max.
 * Computed over a bit string, unlike the relay's byte-wise code.
 */
function nip45Hll(firstValue: string, pubkeys: string[]): string {
  const offset = nip45Offset(firstValue);
  const registers = new Array<number>(256).fill(0);
  for (const pk of pubkeys) {
    const bits = [...Buffer.from(pk, "hex")].map((b) => b.toString(2).padStart(8, "0")).join("");
    const ri = Number.parseInt(bits.slice(offset * 8, offset * 8 + 8), 2);
    const rest = bits.slice((offset + 1) * 8);
    const zeros = rest.indexOf("1") === -1 ? rest.length : rest.indexOf("1");
    registers[ri] = Math.max(registers[ri]!, zeros + 1);
  }
  return registers.map((r) => r.toString(16).padStart(2, "0")).join("");
}

test("the independent HLL helper agrees with the NIP-45 example's shape and a hand-computed register", () => {
  // Pubkey with byte[8] = 0x05 and bytes 9.. = 0x00, 0x1f: 8 + 3 zero bits, register value 12.
  const pk = "00".repeat(8) + "05" + "00" + "1f" + "ff".repeat(21);
  const target = "0".repeat(32) + "0" + "0".repeat(31); // char 32 = '0' -> offset 8
  const hll = nip45Hll(target, [pk]);
  expect(hll).toHaveLength(512);
  expect(hll.slice(10, 12)).toBe("0c");
  expect(hll.replace(/^(.{10})0c/, "$1")).toBe("0".repeat(510));
  expect(nip45Offset("30023:" + "f".repeat(32) + "a" + "0".repeat(31) + ":x")).toBe(18);
});

describe("COUNT over REQ filters", () => {
  const a = signer();
  const b = signer();
  const base = now() - 1000;
  let notes: NostrEvent[];
  let reactions: NostrEvent[];
  let bNotes: NostrEvent[];

  beforeAll(async () => {
    const c = await connect();
    notes = Array.from({ length: 8 }, (_, i) =>
      a.sign({ kind: 1, content: `note ${i}`, created_at: base + i, tags: [["t", i % 2 ? "odd" : "even"]] }),
    );
    reactions = Array.from({ length: 4 }, (_, i) =>
      a.sign({
        kind: 7,
        content: "+",
        created_at: base + 10 + i,
        tags: [
          ["e", notes[i]!.id],
          ["t", "odd"],
        ],
      }),
    );
    bNotes = Array.from({ length: 3 }, (_, i) => b.sign({ kind: 1, content: `b ${i}`, created_at: base + i, tags: [["t", "odd"]] }));
    await publishAll(c, [...notes, ...reactions, ...bNotes]);
  });

  test('the response is exactly ["COUNT", id, {"count": n}] for filters without a tag', async () => {
    const c = await connect();
    expect(await count(c, "q1", { kinds: [1, 7], authors: [a.pubkey] })).toEqual(["COUNT", "q1", { count: 12 }]);
    expect(await count(c, "q2", { kinds: [1], authors: [a.pubkey, b.pubkey] })).toEqual(["COUNT", "q2", { count: 11 }]);
    expect(await count(c, "q3", { authors: [signer().pubkey] })).toEqual(["COUNT", "q3", { count: 0 }]);
  });

  test("kinds, authors, tags, since/until, ids", async () => {
    const c = await connect();
    const n = async (...f: object[]) => (await count(c, "n" + Math.random(), ...f))[2].count;
    expect(await n({ authors: [a.pubkey], kinds: [7] })).toBe(4);
    expect(await n({ authors: [a.pubkey], "#t": ["odd"] })).toBe(4 + 4);
    expect(await n({ "#t": ["odd"], authors: [a.pubkey, b.pubkey], kinds: [1] })).toBe(4 + 3);
    expect(await n({ "#t": ["odd", "even"], authors: [a.pubkey], kinds: [1] })).toBe(8);
    expect(await n({ "#t": ["odd"], "#e": [notes[0]!.id, notes[1]!.id] })).toBe(2);
    expect(await n({ authors: [a.pubkey], since: base + 2, until: base + 5 })).toBe(4);
    expect(await n({ authors: [a.pubkey], since: base + 11 })).toBe(3);
    expect(await n({ ids: [notes[0]!.id, bNotes[0]!.id, "0".repeat(64)] })).toBe(2);
    expect(await n({ authors: [a.pubkey], since: base + 5, until: base + 2 })).toBe(0);
    expect(await n({ authors: [] })).toBe(0);
  });

  test("multiple filters are OR-ed and de-duplicated: an event matching two filters counts once", async () => {
    const c = await connect();
    const r = await count(c, "or", { authors: [a.pubkey] }, { kinds: [1], authors: [a.pubkey, b.pubkey] });
    expect(r).toEqual(["COUNT", "or", { count: 12 + 3 }]);
    expect(
      (await count(c, "or2", { "#t": ["odd"], authors: [a.pubkey, b.pubkey] }, { authors: [b.pubkey] }, { ids: [bNotes[0]!.id] }))[2].count,
    ).toBe(4 + 4 + 3);
    // One event, several values of one tag: still one event.
    const multi = signer().sign({
      kind: 1,
      content: "two tags",
      tags: [
        ["t", "dupe-a"],
        ["t", "dupe-b"],
      ],
    });
    await c.publish(multi);
    expect((await count(c, "dupe", { "#t": ["dupe-a", "dupe-b"] }))[2].count).toBe(1);
    expect((await count(c, "dupe2", { "#t": ["dupe-a"] }, { "#t": ["dupe-b"] }))[2].count).toBe(1);
  });

  test("COUNT ignores limit (and default_limit / max_limit)", async () => {
    const c = await connect();
    expect((await count(c, "l1", { authors: [a.pubkey], limit: 1 }))[2].count).toBe(12);
    expect((await count(c, "l2", { authors: [a.pubkey] }))[2].count).toBe(12); // default_limit is 5
    expect((await count(c, "l3", { authors: [a.pubkey], limit: 2 }, { authors: [b.pubkey], limit: 1 }))[2].count).toBe(15);
    // The REQ with the same filter is capped: COUNT is not just counting a REQ's answer.
    expect((await c.req("r", { authors: [a.pubkey] })).events).toHaveLength(5);
  });

  test.each([
    ["non-hex id", { ids: ["xyz"] }],
    ["kinds not integers", { kinds: ["1"] }],
    ["short #p", { "#p": ["abc"] }],
    ["unknown key", { foo: 1 }],
    ["negative since", { since: -1 }],
    ["filter not an object", "nope"],
  ])("invalid filter (%s): CLOSED invalid:", async (_n, f) => {
    const c = await connect();
    const r = await count(c, "bad", f);
    expect(r[0]).toBe("CLOSED");
    expect(r[1]).toBe("bad");
    expect(r[2]).toStartWith("invalid:");
    // The connection keeps working.
    expect((await count(c, "good", { authors: [a.pubkey] }))[0]).toBe("COUNT");
  });

  test("COUNT with the id of an open REQ leaves that subscription alone", async () => {
    const c = await connect();
    const s = signer();
    await c.req("same", { authors: [s.pubkey] });
    expect(await count(c, "same", { authors: [a.pubkey] })).toEqual(["COUNT", "same", { count: 12 }]);
    const e = s.sign({ kind: 1, content: "still subscribed" });
    await c.publish(e);
    expect((await c.next((f) => f[0] === "EVENT" && f[1] === "same"))[2]).toEqual(e);
  });

  test("COUNT without filters: CLOSED invalid:", async () => {
    const c = await connect();
    const r = await count(c, "none");
    expect(r[0]).toBe("CLOSED");
    expect(r[2]).toStartWith("invalid:");
  });
});

describe("HyperLogLog", () => {
  let target: NostrEvent;
  let reactors: Signer[];
  const followed = signer();
  let followers: Signer[];

  beforeAll(async () => {
    const c = await connect();
    target = signer().sign({ kind: 1, content: "react to me" });
    reactors = Array.from({ length: 300 }, () => signer());
    const reactions = reactors.map((s) =>
      s.sign({
        kind: 7,
        content: "+",
        tags: [
          ["e", target.id],
          ["p", target.pubkey],
        ],
      }),
    );
    // Five reactors react twice: 305 events, still 300 pubkeys.
    const twice = reactors.slice(0, 5).map((s) => s.sign({ kind: 7, content: "🤙", tags: [["e", target.id]], created_at: now() - 5 }));
    // Noise: other kinds referencing the target, and reactions to something else.
    const noise = [
      signer().sign({ kind: 1, content: "reply", tags: [["e", target.id]] }),
      signer().sign({ kind: 6, content: "", tags: [["e", target.id]] }),
      signer().sign({ kind: 7, content: "+", tags: [["e", "e".repeat(64)]] }),
    ];
    followers = Array.from({ length: 40 }, () => signer());
    const follows = followers.map((s) => s.sign({ kind: 3, content: "", tags: [["p", followed.pubkey]], created_at: now() - 60 }));
    await publishAll(c, [target, ...reactions, ...twice, ...noise, ...follows]);
    // Two followers replace their contact list with one that no longer follows: they no longer count.
    await publishAll(
      c,
      followers.slice(0, 2).map((s) => s.sign({ kind: 3, content: "", tags: [["p", "f".repeat(64)]] })),
    );
  });

  test('reaction count {"#e":[id],"kinds":[7]}: count and hll registers as NIP-45 computes them', async () => {
    const c = await connect();
    const [verb, id, body] = await count(c, "reactions", { "#e": [target.id], kinds: [7] });
    expect([verb, id]).toEqual(["COUNT", "reactions"]);
    expect(body.count).toBe(305);
    expect(body.hll).toMatch(/^[0-9a-f]{512}$/);
    expect(body.hll).toBe(
      nip45Hll(
        target.id,
        reactors.map((s) => s.pubkey),
      ),
    );
    // Sanity: 300 pubkeys fill many registers.
    expect(body.hll.match(/../g).filter((x: string) => x !== "00").length).toBeGreaterThan(150);
  });

  test('follower count {"#p":[pk],"kinds":[3]}: replaced contact lists are not counted', async () => {
    const c = await connect();
    const [, , body] = await count(c, "followers", { "#p": [followed.pubkey], kinds: [3] });
    expect(body.count).toBe(38);
    expect(body.hll).toBe(
      nip45Hll(
        followed.pubkey,
        followers.slice(2).map((s) => s.pubkey),
      ),
    );
    // Key order in the filter does not matter when there is one tag attribute.
    expect((await count(c, "followers2", { kinds: [3], "#p": [followed.pubkey] }))[2]).toEqual(body);
  });

  test("offset from an address (its pubkey part) and from any other string (sha256), first tag attribute only", async () => {
    const c = await connect();
    // Pick an author whose address gives a different offset than hashing the address would,
    // so using the wrong rule shows.
    let author: Signer;
    let addr: string;
    do {
      author = signer();
      addr = `30023:${author.pubkey}:my-article`;
    } while (nip45Offset(addr) === nip45Offset(createHash("sha256").update(addr).digest("hex")));
    let topic: string;
    let i = 0;
    do topic = `topic-${i++}-${Math.random()}`;
    while (nip45Offset(topic) === nip45Offset(addr));
    const commenters = Array.from({ length: 60 }, () => signer());
    const comments = commenters.map((s) =>
      s.sign({
        kind: 1,
        content: "nice",
        tags: [
          ["t", topic],
          ["a", addr],
        ],
      }),
    );
    await publishAll(c, comments);
    const pubkeys = commenters.map((s) => s.pubkey);

    const byAddr = (await count(c, "a", { "#a": [addr], kinds: [1] }))[2];
    expect(byAddr.count).toBe(60);
    expect(byAddr.hll).toBe(nip45Hll(addr, pubkeys));
    const byTopic = (await count(c, "t", { "#t": [topic] }))[2];
    expect(byTopic.count).toBe(60);
    expect(byTopic.hll).toBe(nip45Hll(topic, pubkeys));
    // Two tag attributes: the first one (in the filter's key order) sets the offset.
    expect((await count(c, "ta", { "#t": [topic], "#a": [addr] }))[2].hll).toBe(nip45Hll(topic, pubkeys));
    expect((await count(c, "at", { "#a": [addr], "#t": [topic] }))[2].hll).toBe(nip45Hll(addr, pubkeys));
    // Several values: the first item sets the offset.
    expect((await count(c, "two", { "#t": [topic, "zzz-unused"] }))[2].hll).toBe(nip45Hll(topic, pubkeys));
    expect(nip45Hll(topic, pubkeys)).not.toBe(nip45Hll(addr, pubkeys));
  });

  test("an eligible filter that matches nothing: count 0 and all-zero registers", async () => {
    const c = await connect();
    const r = await count(c, "zero", { "#e": ["0".repeat(64)], kinds: [7] });
    expect(r).toEqual(["COUNT", "zero", { count: 0, hll: "00".repeat(256) }]);
  });

  test("no hll for a filter without a tag attribute, nor for several filters", async () => {
    const c = await connect();
    const noTag = await count(c, "nt", { kinds: [7], authors: reactors.slice(0, 3).map((s) => s.pubkey) });
    expect(noTag).toEqual(["COUNT", "nt", { count: 3 + 3 }]);
    const several = await count(c, "sev", { "#e": [target.id], kinds: [7] }, { "#p": [followed.pubkey], kinds: [3] });
    expect(several).toEqual(["COUNT", "sev", { count: 305 + 38 }]);
  });
});

test("with nips.nip45 = false: COUNT gets CLOSED, and NIP-11 does not list 45", async () => {
  const c = await connect(off.url);
  const r = await count(c, "x", { kinds: [1] });
  expect(r[0]).toBe("CLOSED");
  expect(r[1]).toBe("x");
  expect(r[2]).toMatch(/^[a-z-]+: /);
  expect(c.frames.some((f) => f[0] === "COUNT")).toBe(false);
  expect((await relayInfo(relay.url)).supported_nips).toContain(45);
  expect((await relayInfo(off.url)).supported_nips).not.toContain(45);
});
