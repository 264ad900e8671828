// limits.created_at_upper_limit / created_at_lower_limit over a real websocket: events too far
// in the future or the past are refused with invalid:, 0 turns a check off, and NIP-11
// advertises a limit only while it is on.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { NostrEvent } from "../src/protocol/event.ts";
import { accepted, Client, now, signer, startTestRelay, type TestRelay, relayInfo } from "./helpers.ts";

const UPPER = 60;
const LOWER = 3600;

let windowed: TestRelay; // upper 60 s, lower 1 h
let unlimited: TestRelay; // both 0
let plain: TestRelay; // defaults (upper 900, lower 0)
const clients: Client[] = [];

beforeAll(async () => {
  [windowed, unlimited, plain] = await Promise.all([
    startTestRelay({ limits: { created_at_upper_limit: UPPER, created_at_lower_limit: LOWER } }),
    startTestRelay({ limits: { created_at_upper_limit: 0, created_at_lower_limit: 0 } }),
    startTestRelay(),
  ]);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([windowed, unlimited, plain].filter(Boolean).map((r) => r.stop()));
});

async function connect(r: TestRelay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

async function refusedInvalid(c: Client, e: NostrEvent): Promise<void> {
  const ok = await c.publish(e);
  expect(ok[1]).toBe(e.id);
  expect(ok[2]).toBe(false);
  expect(ok[3]).toStartWith("invalid:");
  expect((await c.req(`r-${e.id.slice(0, 8)}`, { ids: [e.id] })).events).toEqual([]);
}

const limitation = async (r: TestRelay) => (await relayInfo(r.url)).limitation;

describe("a window of 60 s ahead and 1 h back", () => {
  test("events too far in the future are refused with invalid:", async () => {
    const c = await connect(windowed);
    const s = signer();
    for (const ahead of [UPPER + 30, 3600, 10 ** 9])
      await refusedInvalid(c, s.sign({ kind: 1, content: `+${ahead}`, created_at: now() + ahead }));
  });

  test("events too far in the past are refused with invalid:", async () => {
    const c = await connect(windowed);
    const s = signer();
    for (const back of [LOWER + 60, 86400]) await refusedInvalid(c, s.sign({ kind: 1, content: `-${back}`, created_at: now() - back }));
    await refusedInvalid(c, s.sign({ kind: 1, content: "epoch", created_at: 0 }));
  });

  test("events inside the window are accepted and served", async () => {
    const c = await connect(windowed);
    const s = signer();
    const events = [now() + UPPER - 30, now(), now() - LOWER + 60].map((t) => s.sign({ kind: 1, content: String(t), created_at: t }));
    for (const e of events) await accepted(c, e);
    expect((await c.req("in", { authors: [s.pubkey] })).events.map((e) => e.id).sort()).toEqual(events.map((e) => e.id).sort());
  });

  test("NIP-11 limitation advertises both", async () => {
    const l = await limitation(windowed);
    expect(l.created_at_upper_limit).toBe(UPPER);
    expect(l.created_at_lower_limit).toBe(LOWER);
  });
});

describe("0 disables a check", () => {
  test("with both 0, far future and far past events are accepted", async () => {
    const c = await connect(unlimited);
    const s = signer();
    const events = [now() + 10 ** 8, now() - 10 ** 8, 0].map((t) => s.sign({ kind: 1, content: String(t), created_at: t }));
    for (const e of events) await accepted(c, e);
    expect((await c.req("all", { authors: [s.pubkey] })).events.map((e) => e.id).sort()).toEqual(events.map((e) => e.id).sort());
  });

  test("NIP-11 omits a limit that is 0", async () => {
    const l = await limitation(unlimited);
    expect(l).not.toHaveProperty("created_at_upper_limit");
    expect(l).not.toHaveProperty("created_at_lower_limit");
  });

  test("defaults: 900 s ahead is enforced and advertised, no lower limit", async () => {
    const c = await connect(plain);
    const s = signer();
    await refusedInvalid(c, s.sign({ kind: 1, created_at: now() + 1000 }));
    await accepted(c, s.sign({ kind: 1, created_at: now() + 800 }));
    await accepted(c, s.sign({ kind: 1, created_at: now() - 10 ** 8 }));
    const l = await limitation(plain);
    expect(l.created_at_upper_limit).toBe(900);
    expect(l).not.toHaveProperty("created_at_lower_limit");
  });
});
