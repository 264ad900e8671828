// Issue 13 item 6 over a real websocket: a request to vanish (kind 62) is honoured for the pubkey
// it names whatever that pubkey's status (NIP-62: "relays that have restrictions on who can post
// MUST also follow the request regardless of the user's status"), but whether the event itself
// is STORED and SERVED obeys AUTH, bans, allow lists and kind lists like any other event. A
// refused request deletes, and adds nothing: OK false with the policy's prefix, nothing served to
// {"kinds":[62]}, nothing fanned out.
import { afterAll, describe, expect, test } from "bun:test";
import type { NostrEvent } from "../src/protocol/event.ts";
import {
  accepted,
  adminCall,
  Client,
  failOnRelayErrors,
  now,
  refusedWith,
  rowsWithId,
  signer,
  startTestRelay,
  type Signer,
  type TestRelay,
} from "./helpers.ts";

failOnRelayErrors();

const admin = signer();
/** 60 KB of content: under max_content_length (64 KiB), what an attacker would park on the relay. */
const BIG = "x".repeat(60 * 1024);
const relays: TestRelay[] = [];
const clients: Client[] = [];

afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all(relays.map((r) => r.stop()));
});

async function start(patch: Parameters<typeof startTestRelay>[0] = {}): Promise<TestRelay> {
  const r = await startTestRelay({ ...patch, admin: { pubkeys: [admin.pubkey], ban_deletes_events: false, ...(patch.admin ?? {}) } });
  relays.push(r);
  return r;
}

async function connect(r: TestRelay, as?: Signer): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  if (as) expect((await c.auth(as, r.url)).slice(2)).toEqual([true, ""]);
  return c;
}

/** A NIP-86 call over HTTP with a NIP-98 token of the admin. */
async function nip86(r: TestRelay, method: string, params: unknown[]): Promise<void> {
  expect((await adminCall(r.url, admin, method, params)).body).toEqual({ result: true });
}

let n = 0;
const ids = async (c: Client, ...filters: object[]) => (await c.req(`q${n++}`, ...filters)).events.map((e) => e.id).sort();

function history(v: Signer, t: number): NostrEvent[] {
  return [
    v.sign({ kind: 1, content: "note", created_at: t - 50 }),
    v.sign({ kind: 10002, tags: [["r", "wss://a.example.com"]], created_at: t - 40 }),
    v.sign({ kind: 30023, content: "article", tags: [["d", "post"]], created_at: t - 30 }),
  ];
}

interface Variant {
  /** Config of the relay. */
  patch: Parameters<typeof startTestRelay>[0];
  /** Who may publish and read on it (an authenticated connection when AUTH is required). */
  as?: (v: Signer) => Signer | undefined;
  /** After v's history is stored: what makes v's kind 62 refused. */
  restrict?: (r: TestRelay, v: Signer) => Promise<void>;
  /** The prefix the kind 62 is refused with. */
  prefix: string;
}

const member = signer();
const variants: [string, Variant][] = [
  // --auth is auth = "always"; "writes" asks it of every EVENT only.
  ['unauthenticated, auth = "always" (--auth)', { patch: { options: { auth: "always" } }, as: () => member, prefix: "auth-required:" }],
  ['unauthenticated, auth = "writes"', { patch: { options: { auth: "writes" } }, as: () => member, prefix: "auth-required:" }],
  [
    "from a banned pubkey (NIP-86 banpubkey)",
    { patch: {}, restrict: (r, v) => nip86(r, "banpubkey", [v.pubkey, "spam"]), prefix: "blocked:" },
  ],
  [
    "on an allow-only relay (NIP-86 allowpubkey of someone else)",
    { patch: {}, restrict: (r) => nip86(r, "allowpubkey", [member.pubkey, "member"]), prefix: "restricted:" },
  ],
  ["after disallowkind 62 (NIP-86)", { patch: {}, restrict: (r) => nip86(r, "disallowkind", [62]), prefix: "blocked:" }],
];

describe("a refused request to vanish: deletes, but is neither stored nor served", () => {
  test.each(variants)("%s", async (_name, o) => {
    const r = await start(o.patch);
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    // v's history, stored while v could publish (authenticated as v where AUTH is required).
    const own = await connect(r, o.as ? v : undefined);
    for (const e of mine) await accepted(own, e);
    own.close();
    await o.restrict?.(r, v);

    // A reader that may read (authenticated as a member where AUTH is required), subscribed to
    // every kind 62 before the request is sent: nothing may be fanned out to it either.
    const reader = await connect(r, o.as?.(v));
    expect(await ids(reader, { authors: [v.pubkey] })).toEqual(mine.map((e) => e.id).sort());
    reader.send(["REQ", "live62", { kinds: [62] }]);
    await reader.next((f) => f[0] === "EOSE" && f[1] === "live62");

    const attacker = await connect(r); // never authenticated
    const vanish = v.sign({ kind: 62, content: BIG, created_at: t, tags: [["relay", "ALL_RELAYS"]] });
    const ok = await attacker.publish(vanish);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith(o.prefix);
    expect(ok[3]).toContain("vanish"); // and says that the deletion itself was carried out

    // Not stored, not served, not fanned out.
    expect(await rowsWithId(r, vanish.id)).toBe(0);
    expect(await ids(reader, { kinds: [62] })).toEqual([]);
    expect(await ids(reader, { ids: [vanish.id] })).toEqual([]);
    // NIP-62: followed regardless of the user's status, so v's history is gone ...
    expect(await ids(reader, { authors: [v.pubkey] })).toEqual([]);
    for (const e of mine) expect(await rowsWithId(r, e.id)).toBe(0);
    // ... and stays out, even from a connection that may publish.
    const writer = await connect(r, o.as ? v : undefined);
    if (!o.restrict) await refusedWith(writer, mine[0]!, "blocked:");
    // A fanned-out kind 62 would have arrived before this event, committed after it.
    const marker = member.sign({ kind: 1, content: "after the request to vanish" });
    const mw = await connect(r, o.as ? member : undefined);
    reader.send(["REQ", "marker", { ids: [marker.id] }]);
    await reader.next((f) => f[0] === "EOSE" && f[1] === "marker");
    await accepted(mw, marker);
    await reader.next((f) => f[0] === "EVENT" && f[1] === "marker");
    expect(reader.eventsFor("live62")).toEqual([]);
  });

  test('an authenticated request to vanish under auth = "writes" is stored, deletes, and is served like any event', async () => {
    const r = await start({ options: { auth: "writes" } });
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    const c = await connect(r, v);
    for (const e of mine) await accepted(c, e);
    const vanish = v.sign({ kind: 62, content: "bye", created_at: t, tags: [["relay", "ALL_RELAYS"]] });
    await accepted(c, vanish);
    expect(await ids(c, { authors: [v.pubkey] })).toEqual([vanish.id]);
    expect(await ids(c, { kinds: [62], authors: [v.pubkey] })).toEqual([vanish.id]);
  });

  test("a refused request to vanish that does not name this relay deletes nothing", async () => {
    const r = await start({ options: { auth: "writes" } });
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    const c = await connect(r, v);
    for (const e of mine) await accepted(c, e);
    const attacker = await connect(r);
    await refusedWith(attacker, v.sign({ kind: 62, created_at: t, tags: [["relay", "wss://elsewhere.example.com"]] }), "auth-required:");
    expect(await ids(c, { authors: [v.pubkey] })).toEqual(mine.map((e) => e.id).sort());
  });

  test("a refused request to vanish with a bad signature deletes nothing", async () => {
    const r = await start({ options: { auth: "writes" } });
    const v = signer();
    const t = now() - 1000;
    const mine = history(v, t);
    const c = await connect(r, v);
    for (const e of mine) await accepted(c, e);
    const forged = v.sign({ kind: 62, created_at: t, tags: [["relay", "ALL_RELAYS"]] });
    forged.sig = forged.sig.slice(0, -2) + (forged.sig.endsWith("00") ? "11" : "00");
    const attacker = await connect(r);
    const ok = await attacker.publish(forged);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("invalid:");
    expect(await ids(c, { authors: [v.pubkey] })).toEqual(mine.map((e) => e.id).sort());
  });
});
