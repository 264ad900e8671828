// NIP-40 over a real websocket: expired events are refused, hidden from REQ and COUNT as soon
// as they expire (swept or not), physically deleted by the sweeper, and all of it off with nip40.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client, now, rowsWithId, signer, startTestRelay, type TestRelay, relayInfo } from "./helpers.ts";

let lazy: TestRelay; // the sweeper never runs during the tests
let sweeping: TestRelay; // sweeps every second
let off: TestRelay; // nips.nip40 = false
const clients: Client[] = [];

beforeAll(async () => {
  [lazy, sweeping, off] = await Promise.all([
    startTestRelay({ options: { expiration_sweep_seconds: 3600 } }),
    startTestRelay({ options: { expiration_sweep_seconds: 1 } }),
    startTestRelay({ nips: { nip40: false }, options: { expiration_sweep_seconds: 1 } }),
  ]);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([lazy, sweeping, off].filter(Boolean).map((r) => r.stop()));
});

async function connect(r: TestRelay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

let n = 0;
const ids = async (c: Client, filter: object) => (await c.req(`q${n++}`, filter)).events.map((e) => e.id);

async function count(c: Client, filter: object): Promise<number> {
  const sub = `c${n++}`;
  const from = c.frames.length;
  c.send(["COUNT", sub, filter]);
  const f = await c.next((f) => (f[0] === "COUNT" || f[0] === "CLOSED") && f[1] === sub, 5000, from);
  expect(f[0]).toBe("COUNT");
  return f[2].count;
}

const rowsInDb = rowsWithId;

/** Sleeps until the wall clock is past `exp` (unix seconds). */
const untilAfter = (exp: number) => Bun.sleep(Math.max(0, (exp + 1) * 1000 - Date.now() + 50));

const info = (r: TestRelay) => relayInfo(r.url);

describe("NIP-40 on", () => {
  test("an event that has already expired is refused with invalid: and not stored", async () => {
    const c = await connect(lazy);
    const s = signer();
    for (const exp of [now() - 3600, now() - 1, 1]) {
      const e = s.sign({ kind: 1, content: `expired ${exp}`, tags: [["expiration", String(exp)]] });
      const ok = await c.publish(e);
      expect(ok[2]).toBe(false);
      expect(ok[3]).toStartWith("invalid:");
      expect(await rowsInDb(lazy, e.id)).toBe(0);
    }
    expect(await ids(c, { authors: [s.pubkey] })).toEqual([]);
  });

  test("an event is served until it expires, then hidden from REQ and COUNT before any sweep", async () => {
    const c = await connect(lazy);
    const s = signer();
    const exp = now() + 2;
    const e = s.sign({
      kind: 1,
      content: "soon gone",
      tags: [
        ["expiration", String(exp)],
        ["t", "nip40-lazy"],
      ],
    });
    const stays = s.sign({ kind: 1, content: "no expiration", tags: [["t", "nip40-lazy"]] });
    const later = s.sign({
      kind: 1,
      content: "expires in an hour",
      tags: [
        ["expiration", String(now() + 3600)],
        ["t", "nip40-lazy"],
      ],
    });
    for (const x of [e, stays, later]) expect(await c.publish(x)).toEqual(["OK", x.id, true, ""]);

    expect(await ids(c, { ids: [e.id] })).toEqual([e.id]);
    expect(await count(c, { authors: [s.pubkey] })).toBe(3);
    expect(await count(c, { "#t": ["nip40-lazy"] })).toBe(3);

    await untilAfter(exp);
    expect(await ids(c, { ids: [e.id] })).toEqual([]);
    expect((await ids(c, { authors: [s.pubkey] })).sort()).toEqual([stays.id, later.id].sort());
    expect((await ids(c, { "#t": ["nip40-lazy"] })).sort()).toEqual([stays.id, later.id].sort());
    expect(await count(c, { authors: [s.pubkey] })).toBe(2);
    expect(await count(c, { "#t": ["nip40-lazy"] })).toBe(2);
    // Hidden, not swept: the row is still in the database.
    expect(await rowsInDb(lazy, e.id)).toBe(1);
    // A fresh connection sees the same.
    const fresh = await connect(lazy);
    expect(await ids(fresh, { ids: [e.id] })).toEqual([]);
  });

  test("with a 1 s sweep the expired row is deleted from the database", async () => {
    const c = await connect(sweeping);
    const s = signer();
    const exp = now() + 2;
    const e = s.sign({
      kind: 1,
      content: "swept",
      tags: [
        ["expiration", String(exp)],
        ["t", "nip40-swept"],
      ],
    });
    const stays = s.sign({ kind: 1, content: "kept", tags: [["expiration", String(now() + 3600)]] });
    for (const x of [e, stays]) expect((await c.publish(x))[2]).toBe(true);
    expect(await rowsInDb(sweeping, e.id)).toBe(1);
    await untilAfter(exp);
    const deadline = Date.now() + 3000;
    while ((await rowsInDb(sweeping, e.id)) > 0 && Date.now() < deadline) await Bun.sleep(100);
    expect(await rowsInDb(sweeping, e.id)).toBe(0);
    expect(await rowsInDb(sweeping, stays.id)).toBe(1);
    expect(await ids(c, { "#t": ["nip40-swept"] })).toEqual([]);
    expect(await ids(c, { authors: [s.pubkey] })).toEqual([stays.id]);
  });

  test("malformed expiration tags are ignored", async () => {
    const c = await connect(lazy);
    const s = signer();
    const bad = [
      ["expiration"],
      ["expiration", ""],
      ["expiration", "soon"],
      ["expiration", "-5"],
      ["expiration", "1.5"],
      ["expiration", "1e3"],
      ["expiration", "0x10"],
    ];
    const events = bad.map((tag) => s.sign({ kind: 1, content: JSON.stringify(tag), tags: [tag] }));
    for (const e of events) expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect((await ids(c, { authors: [s.pubkey] })).sort()).toEqual(events.map((e) => e.id).sort());
    expect(await count(c, { authors: [s.pubkey] })).toBe(events.length);
  });

  test("NIP-11 lists 40 when on, not when off", async () => {
    expect((await info(lazy)).supported_nips).toContain(40);
    expect((await info(off)).supported_nips).not.toContain(40);
  });
});

describe("nips.nip40 = false", () => {
  test("expired events are accepted, served and counted, and not swept", async () => {
    const c = await connect(off);
    const s = signer();
    const e = s.sign({ kind: 1, content: "expired long ago", tags: [["expiration", String(now() - 3600)]] });
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect(await ids(c, { ids: [e.id] })).toEqual([e.id]);
    expect(await count(c, { authors: [s.pubkey] })).toBe(1);
    // The 1 s sweeper is configured but NIP-40 is off: it never asks the store to sweep, and the
    // row stays. The relay runs in this process, whose timers fire in the order they are due
    // (however late a loaded box runs them), so by the end of this 1.2 s wait a sweeper tick
    // due within 1 s has run; the store's sweep is watched too, since on Postgres a sweep's
    // DELETE could still be on its way when the row is counted.
    const store = off.ctx.store;
    const sweep = store.sweepExpired;
    const sweeps: number[] = [];
    store.sweepExpired = (at) => (sweeps.push(at), sweep.call(store, at));
    try {
      await Bun.sleep(1200);
    } finally {
      store.sweepExpired = sweep;
    }
    expect(sweeps).toEqual([]);
    expect(await rowsInDb(off, e.id)).toBe(1);
    expect(await ids(c, { ids: [e.id] })).toEqual([e.id]);
  });
});
