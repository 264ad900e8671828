// Issue 34, item 5: a ban hides what it takes away for [admin] ban_retention, so an unban brings
// it all back; the purge after the retention deletes it. On a real relay (both backends: listed in
// test/postgres-suite.ts): REQ, COUNT, NIP-77, search and live see nothing of a hidden author or
// event, an unban serves exactly what was there, a restart keeps the state, and the purge runs
// from the stored ban time.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nip77 } from "nostr-tools";
import { PostgresBulk } from "../src/store/postgres/bulk.ts";
import { PostgresStore } from "../src/store/postgres/store.ts";
import { SqliteBulk } from "../src/store/sqlite/bulk.ts";
import { openExisting } from "../src/store/sqlite/maintenance.ts";
import {
  accepted,
  adminCall,
  Client,
  failOnRelayErrors,
  refusedWith,
  rowsWithId,
  signer,
  startTestRelay,
  type TestRelay,
} from "./helpers.ts";

failOnRelayErrors();

const admin = signer();
const dir = mkdtempSync(join(tmpdir(), "bunstr-ban-retention-"));
let relay: TestRelay;
let logSpy: ReturnType<typeof spyOn>;

const start = (retention: string) =>
  startTestRelay({ admin: { pubkeys: [admin.pubkey], ban_retention: retention }, nips: { nip50: true } }, { dir });

async function ok(method: string, params: unknown[] = []): Promise<any> {
  const r = await adminCall(relay.url, admin, method, params);
  expect(r.body.error).toBeUndefined();
  expect(r.status).toBe(200);
  return r.body.result;
}

const ids = (events: { id: string }[]) => events.map((e) => e.id).sort();

/** The ids the relay holds for `filter`, by NIP-77 from an empty client set. */
async function negIds(c: Client, filter: object): Promise<string[]> {
  const storage = new nip77.NegentropyStorageVector();
  storage.seal();
  const neg = new nip77.Negentropy(storage);
  const sub = `neg-${Math.random()}`;
  const from = c.frames.length;
  c.send(["NEG-OPEN", sub, filter, neg.initiate()]);
  const reply = await c.next((f) => (f[0] === "NEG-MSG" || f[0] === "NEG-ERR") && f[1] === sub, 5000, from);
  expect(reply[0]).toBe("NEG-MSG");
  const need: string[] = [];
  neg.reconcile(
    reply[2],
    () => {},
    (id: string) => need.push(id),
  );
  c.send(["NEG-CLOSE", sub]);
  return need.sort();
}

/** What the operator commands see of `author`: `bunstr export`'s pages, and the set `bunstr sync` offers (NIP-77 items). */
async function commands(author: string): Promise<{ exported: string[]; synced: number }> {
  const store = relay.ctx.store;
  const bulk =
    store instanceof PostgresStore ? new PostgresBulk(store, "") : new SqliteBulk(openExisting(relay.dbPath, "readonly"), relay.dbPath);
  try {
    const { max } = await bulk.seqRange();
    const rows = await bulk.exportPager({ authors: [author], now: 0 })(0, max, 1000);
    const items = await bulk.negItems({ authors: [author] }, 0);
    return { exported: ids(rows.map((r) => JSON.parse(r.json))), synced: items.timestamps.length };
  } finally {
    // The Postgres bulk is the relay's own store: left open.
    if (bulk instanceof SqliteBulk) await bulk.close();
  }
}

/** What every read path sees of `author` (and of the word only its notes hold). */
async function seen(c: Client, author: string, word: string) {
  return {
    req: ids((await c.req(`r-${Math.random()}`, { authors: [author] })).events),
    // A feed's REQ, which SQLite may answer from memory (the catch-up ring): a ban starts it over.
    feed: ids((await c.req(`f-${Math.random()}`, { authors: [author], limit: 10 })).events),
    count: (await c.count(`c-${Math.random()}`, [{ authors: [author] }]))[2].count as number,
    search: ids((await c.req(`s-${Math.random()}`, { search: word })).events),
    neg: await negIds(c, { authors: [author] }),
  };
}

async function waitFor(what: () => Promise<boolean>, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await what())) {
    if (Date.now() > end) throw new Error("timed out");
    await Bun.sleep(100);
  }
}

beforeAll(async () => {
  logSpy = spyOn(console, "log").mockImplementation(() => {});
  relay = await start("1 hour");
});
afterAll(async () => {
  await relay.stop();
  rmSync(dir, { recursive: true, force: true });
  logSpy.mockRestore();
});

describe("banpubkey hides, unbanpubkey restores", () => {
  test("hidden from REQ, COUNT, search, NIP-77 and live; refused; kept over a restart; all back after the unban", async () => {
    const a = signer();
    const b = signer();
    const c = await Client.connect(relay.url);
    const notes = [1, 2, 3].map((i) => a.sign({ kind: 1, content: `zebracorn note ${i}`, created_at: 1_700_000_000 + i }));
    for (const e of notes) await accepted(c, e);
    await accepted(c, b.sign({ kind: 1, content: "someone else" }));
    const before = await seen(c, a.pubkey, "zebracorn");
    expect(before).toEqual({ req: ids(notes), feed: ids(notes), count: 3, search: ids(notes), neg: ids(notes) });
    expect(await commands(a.pubkey)).toEqual({ exported: ids(notes), synced: 3 });

    // Asked first: what the ban takes away, and for how long it can come back.
    expect(await ok("previewbanpubkey", [a.pubkey])).toEqual({ events: 3, action: "hide", retention: "1 hour", retention_seconds: 3600 });
    const live = await Client.connect(relay.url);
    await live.req("live", { authors: [a.pubkey] });
    const liveFrom = live.frames.length;
    const t0 = Math.floor(Date.now() / 1000);
    expect(await ok("banpubkey", [a.pubkey, "spam"])).toBe(true);
    const empty = { req: [], feed: [], count: 0, search: [], neg: [] };
    expect(await seen(c, a.pubkey, "zebracorn")).toEqual(empty);
    expect(await commands(a.pubkey)).toEqual({ exported: [], synced: 0 });
    // Nothing of it counted in a count of everything either, and a new event is refused (so none goes out live).
    expect((await c.count("all", [{ kinds: [1] }]))[2].count).toBe(
      (await c.req("all-req", { kinds: [1] })).events.filter((e) => e.pubkey !== a.pubkey).length,
    );
    const late = a.sign({ kind: 1, content: "zebracorn after the ban" });
    await refusedWith(c, late, "blocked:");
    expect(live.frames.slice(liveFrom).filter((f) => f[0] === "EVENT")).toEqual([]);
    // The list says when it goes.
    const listed = (await ok("listbannedpubkeys")).find((e: { pubkey: string }) => e.pubkey === a.pubkey);
    expect(listed.reason).toBe("spam");
    expect(listed.purge_at).toBeGreaterThanOrEqual(t0 + 3600);
    expect(listed.purge_at).toBeLessThanOrEqual(t0 + 3601);
    // Still stored, only hidden.
    for (const e of notes) expect(await rowsWithId(relay, e.id)).toBe(1);
    c.close();
    live.close();

    await relay.stop();
    relay = await start("1 hour");
    const again = await Client.connect(relay.url);
    expect(await seen(again, a.pubkey, "zebracorn")).toEqual(empty);
    expect((await ok("listbannedpubkeys")).find((e: { pubkey: string }) => e.pubkey === a.pubkey).purge_at).toBe(listed.purge_at);

    expect(await ok("unbanpubkey", [a.pubkey])).toBe(true);
    expect(await seen(again, a.pubkey, "zebracorn")).toEqual(before);
    expect(await commands(a.pubkey)).toEqual({ exported: ids(notes), synced: 3 });
    expect((await again.req("ids", { ids: ids(notes) })).events.map((e) => e.id).sort()).toEqual(ids(notes));
    await accepted(again, a.sign({ kind: 1, content: "welcome back" }));
    again.close();
  });

  test("banevent hides one event until allowevent", async () => {
    const a = signer();
    const c = await Client.connect(relay.url);
    const bad = a.sign({ kind: 1, content: "quokkaword bad" });
    const fine = a.sign({ kind: 1, content: "quokkaword fine" });
    await accepted(c, bad);
    await accepted(c, fine);
    expect(await ok("previewbanevent", [bad.id])).toMatchObject({ events: 1, action: "hide" });
    expect(await ok("banevent", [bad.id, "spam"])).toBe(true);
    expect(await seen(c, a.pubkey, "quokkaword")).toEqual({ req: [fine.id], feed: [fine.id], count: 1, search: [fine.id], neg: [fine.id] });
    expect((await c.req("by-id", { ids: [bad.id] })).events).toEqual([]);
    await refusedWith(c, bad, "blocked:");
    expect((await ok("listbannedevents")).find((e: { id: string }) => e.id === bad.id).purge_at).toBeGreaterThan(0);
    expect(await ok("allowevent", [bad.id, "on appeal"])).toBe(true);
    const both = ids([bad, fine]);
    expect(await seen(c, a.pubkey, "quokkaword")).toEqual({ req: both, feed: both, count: 2, search: both, neg: both });
    c.close();
  });
});

describe("after the retention", () => {
  test("the purge deletes what was hidden, even over a restart; an unban then restores nothing", async () => {
    const a = signer();
    const other = signer();
    const c = await Client.connect(relay.url);
    const notes = [1, 2].map((i) => a.sign({ kind: 1, content: `purgeword ${i}` }));
    for (const e of notes) await accepted(c, e);
    const bad = other.sign({ kind: 1, content: "purgeword banned event" });
    await accepted(c, bad);
    c.close();
    await relay.stop();
    relay = await start("2s");
    expect(await ok("previewbanpubkey", [a.pubkey])).toMatchObject({ events: 2, action: "hide", retention_seconds: 2 });
    expect(await ok("banpubkey", [a.pubkey, "spam"])).toBe(true);
    expect(await ok("banevent", [bad.id, "spam"])).toBe(true);
    // Stopped before the retention ends: the ban's time is stored, the next start purges.
    await relay.stop();
    await Bun.sleep(2100);
    relay = await start("2s");
    await waitFor(
      async () =>
        (await rowsWithId(relay, notes[0]!.id)) + (await rowsWithId(relay, notes[1]!.id)) + (await rowsWithId(relay, bad.id)) === 0,
    );
    await waitFor(async () => relay.ctx.admin.hiding === undefined);
    expect((await ok("listbannedpubkeys")).find((e: { pubkey: string }) => e.pubkey === a.pubkey)).toEqual({
      pubkey: a.pubkey,
      reason: "spam",
    });
    expect(await ok("unbanpubkey", [a.pubkey])).toBe(true);
    expect(await ok("allowevent", [bad.id, ""])).toBe(true);
    const again = await Client.connect(relay.url);
    expect(await seen(again, a.pubkey, "purgeword")).toEqual({ req: [], feed: [], count: 0, search: [], neg: [] });
    expect((await again.req("bad", { ids: [bad.id] })).events).toEqual([]);
    again.close();
  });

  test("0s deletes at once, as before", async () => {
    await relay.stop();
    relay = await start("0s");
    const a = signer();
    const c = await Client.connect(relay.url);
    const e = a.sign({ kind: 1, content: "gone at once" });
    await accepted(c, e);
    expect(await ok("previewbanpubkey", [a.pubkey])).toMatchObject({ events: 1, action: "delete" });
    expect(await ok("banpubkey", [a.pubkey, ""])).toBe(true);
    await waitFor(async () => (await rowsWithId(relay, e.id)) === 0);
    expect(relay.ctx.admin.hiding).toBeUndefined();
    c.close();
  });
});
