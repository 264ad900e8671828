// `[options] auth` over a real websocket, one relay per mode:
//   "when-needed" (default): AUTH is only demanded for restricted reads (DMs) and protected events;
//   "writes": every EVENT needs AUTH first, reads do not;
//   "always": EVENT, REQ and COUNT all need AUTH first.
// NIP-42: "auth-required: " — "for when a client has not performed AUTH and the relay requires
// that to fulfill the query or write the event"; "restricted: " — AUTH done, key not allowed.
//
// This relay sends its ["AUTH", <challenge>] right as the client connects (NIP-42 allows it
// "right as the client connects or ... immediately before the CLOSED"), in every mode, so a
// client always has a stored challenge to answer an auth-required: with.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client, signer, startTestRelay, type Signer, type TestRelay, relayInfo } from "./helpers.ts";

let whenNeeded: TestRelay;
let writes: TestRelay;
let always: TestRelay;
const clients: Client[] = [];

beforeAll(async () => {
  whenNeeded = await startTestRelay();
  writes = await startTestRelay({ options: { auth: "writes" } });
  always = await startTestRelay({ options: { auth: "always" } });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([whenNeeded.stop(), writes.stop(), always.stop()]);
});

async function connect(url: string): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

const challengeOf = async (c: Client): Promise<string> => (await c.next((f) => f[0] === "AUTH"))[1];

/** Sends AUTH as `s` and returns the relay's OK frame for it. */
async function auth(c: Client, url: string, s: Signer): Promise<any[]> {
  const e = s.sign({
    kind: 22242,
    tags: [
      ["relay", url],
      ["challenge", await challengeOf(c)],
    ],
  });
  const from = c.frames.length;
  c.send(["AUTH", e]);
  return c.next((f) => f[0] === "OK" && f[1] === e.id, 5000, from);
}

async function connectAs(url: string, s: Signer): Promise<Client> {
  const c = await connect(url);
  expect((await auth(c, url, s)).slice(2)).toEqual([true, ""]);
  return c;
}

const count = (c: Client, subId: string, ...filters: object[]) => c.count(subId, filters);

const nip11 = relayInfo;

describe("the AUTH handshake", () => {
  test.each(["when-needed", "writes", "always"] as const)(
    "%s: the challenge is the first frame, sent on connect, fresh per connection",
    async (mode) => {
      const url = { "when-needed": whenNeeded, writes, always }[mode].url;
      const a = await connect(url);
      const b = await connect(url);
      // Nothing was sent by the client: the relay speaks first.
      const first = await a.next(() => true);
      expect(first[0]).toBe("AUTH");
      expect(typeof first[1]).toBe("string");
      expect(first[1].length).toBeGreaterThanOrEqual(16);
      expect(a.frames[0]).toEqual(first);
      expect(await challengeOf(b)).not.toBe(first[1]);
    },
  );

  test("AUTH is answered with OK true and an empty message", async () => {
    const c = await connect(whenNeeded.url);
    const s = signer();
    const e = s.sign({
      kind: 22242,
      tags: [
        ["relay", whenNeeded.url],
        ["challenge", await challengeOf(c)],
      ],
    });
    c.send(["AUTH", e]);
    expect(await c.next((f) => f[0] === "OK")).toEqual(["OK", e.id, true, ""]);
    // The challenge of another connection does not authenticate this one.
    const d = await connect(whenNeeded.url);
    const stolen = s.sign({
      kind: 22242,
      tags: [
        ["relay", whenNeeded.url],
        ["challenge", await challengeOf(c)],
      ],
    });
    d.send(["AUTH", stolen]);
    const ok = await d.next((f) => f[0] === "OK");
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("invalid:");
  });

  test("kind 22242 is never stored or broadcast (NIP-42: relays MUST exclude it from being broadcasted)", async () => {
    const listener = await connect(whenNeeded.url);
    await listener.req("auth-events", { kinds: [22242] });
    const s = signer();
    await listener.req("by-author", { authors: [s.pubkey] });
    const c = await connect(whenNeeded.url);
    const e = s.sign({
      kind: 22242,
      tags: [
        ["relay", whenNeeded.url],
        ["challenge", await challengeOf(c)],
      ],
    });
    c.send(["AUTH", e]);
    expect((await c.next((f) => f[0] === "OK" && f[1] === e.id))[2]).toBe(true);
    // Sent as EVENT it is refused.
    const asEvent = await c.publish(e);
    expect(asEvent[2]).toBe(false);
    expect(asEvent[3]).toStartWith("invalid:");
    // A later public event of the same author is the barrier: it arrives, the AUTH event never did.
    const note = s.sign({ kind: 1, content: "after auth" });
    await c.publish(note);
    await listener.next((f) => f[0] === "EVENT" && f[1] === "by-author" && f[2].id === note.id);
    expect(listener.eventsFor("auth-events")).toEqual([]);
    expect(listener.eventsFor("by-author").map((x) => x.id)).toEqual([note.id]);
    const q = await connect(whenNeeded.url);
    expect(await q.req("stored", { ids: [e.id] })).toEqual({ events: [], end: ["EOSE", "stored"] });
    expect(await q.req("stored2", { kinds: [22242], authors: [s.pubkey] })).toEqual({ events: [], end: ["EOSE", "stored2"] });
    expect((await count(q, "n", { kinds: [22242] }))[2]).toEqual({ count: 0 });
  });
});

describe('auth = "when-needed" (default)', () => {
  test("publishing, REQ and COUNT work without AUTH", async () => {
    const c = await connect(whenNeeded.url);
    const s = signer();
    const e = s.sign({ kind: 1, content: "no auth needed" });
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect(await c.req("r", { authors: [s.pubkey] })).toEqual({ events: [e], end: ["EOSE", "r"] });
    expect(await count(c, "n", { authors: [s.pubkey] })).toEqual(["COUNT", "n", { count: 1 }]);
    // A gift wrap may be published without AUTH (only reading it needs AUTH).
    const gw = signer().sign({ kind: 1059, content: "x", tags: [["p", s.pubkey]] });
    expect(await c.publish(gw)).toEqual(["OK", gw.id, true, ""]);
  });

  test("restricted reads demand AUTH, then work for the recipient", async () => {
    const to = signer();
    const gw = signer().sign({ kind: 1059, content: "x", tags: [["p", to.pubkey]] });
    const c = await connect(whenNeeded.url);
    await c.publish(gw);
    const refused = await c.req("dms", { kinds: [1059], "#p": [to.pubkey] });
    expect(refused.end[0]).toBe("CLOSED");
    expect(refused.end[2]).toStartWith("auth-required:");
    const n = await count(c, "n", { kinds: [1059], "#p": [to.pubkey] });
    expect(n[0]).toBe("CLOSED");
    expect(n[2]).toStartWith("auth-required:");
    expect((await auth(c, whenNeeded.url, to)).slice(2)).toEqual([true, ""]);
    expect(await c.req("dms", { kinds: [1059], "#p": [to.pubkey] })).toEqual({ events: [gw], end: ["EOSE", "dms"] });
  });

  test("protected events (NIP-70): auth-required: without AUTH, restricted: as someone else, accepted from the author", async () => {
    const author = signer();
    const e = author.sign({ kind: 1, content: "protected", tags: [["-"]] });
    const c = await connect(whenNeeded.url);
    const a = await c.publish(e);
    expect(a[2]).toBe(false);
    expect(a[3]).toStartWith("auth-required:");
    expect((await auth(c, whenNeeded.url, signer())).slice(2)).toEqual([true, ""]);
    const b = await c.publish(e);
    expect(b[2]).toBe(false);
    expect(b[3]).toStartWith("restricted:");
    expect((await auth(c, whenNeeded.url, author)).slice(2)).toEqual([true, ""]);
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
  });
});

describe('auth = "writes"', () => {
  test("EVENT without AUTH: OK false auth-required:, and nothing is stored", async () => {
    const c = await connect(writes.url);
    const s = signer();
    const e = s.sign({ kind: 1, content: "needs auth" });
    const ok = await c.publish(e);
    expect(ok[1]).toBe(e.id);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("auth-required:");
    expect(await c.req("r", { ids: [e.id] })).toEqual({ events: [], end: ["EOSE", "r"] });
  });

  test("REQ and COUNT work without AUTH; after AUTH, EVENTs are accepted, also ones signed by other keys (gift wraps)", async () => {
    const reader = await connect(writes.url);
    const writer = await connect(writes.url);
    const s = signer();
    const e = s.sign({ kind: 1, content: "written after auth" });
    expect((await auth(writer, writes.url, s)).slice(2)).toEqual([true, ""]);
    expect(await writer.publish(e)).toEqual(["OK", e.id, true, ""]);
    // NIP-42: a relay may "accept any events as long as they are published from an authenticated user".
    const gw = signer().sign({ kind: 1059, content: "x", tags: [["p", s.pubkey]] });
    expect(await writer.publish(gw)).toEqual(["OK", gw.id, true, ""]);
    expect(await reader.req("r", { authors: [s.pubkey] })).toEqual({ events: [e], end: ["EOSE", "r"] });
    expect(await count(reader, "n", { authors: [s.pubkey] })).toEqual(["COUNT", "n", { count: 1 }]);
    // Restricted reads still need AUTH.
    const dms = await reader.req("dms", { kinds: [1059] });
    expect(dms.end[0]).toBe("CLOSED");
    expect(dms.end[2]).toStartWith("auth-required:");
  });

  test("live: an unauthenticated subscriber gets events written by an authenticated client", async () => {
    const reader = await connect(writes.url);
    const s = signer();
    await reader.req("live", { authors: [s.pubkey] });
    const writer = await connectAs(writes.url, s);
    const e = s.sign({ kind: 1, content: "live" });
    await writer.publish(e);
    expect((await reader.next((f) => f[0] === "EVENT" && f[1] === "live"))[2]).toEqual(e);
  });
});

describe('auth = "always"', () => {
  test("EVENT, REQ and COUNT are refused with auth-required: until AUTH, then work", async () => {
    const c = await connect(always.url);
    const s = signer();
    const e = s.sign({ kind: 1, content: "always" });
    const ok = await c.publish(e);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("auth-required:");
    const r = await c.req("r", { kinds: [1] });
    expect(r.events).toEqual([]);
    expect(r.end[0]).toBe("CLOSED");
    expect(r.end[1]).toBe("r");
    expect(r.end[2]).toStartWith("auth-required:");
    const n = await count(c, "n", { kinds: [1] });
    expect(n[0]).toBe("CLOSED");
    expect(n[1]).toBe("n");
    expect(n[2]).toStartWith("auth-required:");
    // A refused REQ leaves no subscription behind: a live event does not reach it.
    const other = await connectAs(always.url, signer());
    const live = signer().sign({ kind: 1, content: "to nobody" });
    await other.publish(live);

    expect((await auth(c, always.url, s)).slice(2)).toEqual([true, ""]);
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect(await c.req("r2", { ids: [e.id] })).toEqual({ events: [e], end: ["EOSE", "r2"] });
    expect(await count(c, "n2", { ids: [e.id] })).toEqual(["COUNT", "n2", { count: 1 }]);
    expect(c.eventsFor("r")).toEqual([]);
  });

  test("a failed AUTH does not unlock anything", async () => {
    const c = await connect(always.url);
    const s = signer();
    const bad = s.sign({
      kind: 22242,
      tags: [
        ["relay", always.url],
        ["challenge", "wrong"],
      ],
    });
    c.send(["AUTH", bad]);
    expect((await c.next((f) => f[0] === "OK" && f[1] === bad.id))[2]).toBe(false);
    expect((await c.req("r", { kinds: [1] })).end[2]).toStartWith("auth-required:");
    expect((await c.publish(s.sign({ kind: 1 })))[3]).toStartWith("auth-required:");
  });
});

test("NIP-11 limitation.auth_required is true only for auth = always", async () => {
  expect((await nip11(whenNeeded.url)).limitation.auth_required).toBe(false);
  expect((await nip11(writes.url)).limitation.auth_required).toBe(false);
  expect((await nip11(always.url)).limitation.auth_required).toBe(true);
  for (const r of [whenNeeded, writes, always]) expect((await nip11(r.url)).supported_nips).toContain(42);
});
