// The duplicate check before the signature (admit/admit.ts, Store.hasNow): while the writer
// thread commits a batch it answers "not known" at once rather than wait behind the commit, and
// the write itself then finds the stored event. These tests pin that the early answer changes
// nothing a client or an operator sees: a stored event sent again is a duplicate whichever way
// its check answered, a stored request to vanish is not carried out again (which would delete
// the kept request itself), and the write-policy plugin sees only new events (admit.test.ts).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { refuse } from "../src/protocol/reasons.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import type { PendingWrite, WriteRules } from "../src/store/types.ts";
import { accepted, Client, now, signer, startTestRelay, storeEvents, type TestRelay } from "./helpers.ts";

const RULES: WriteRules = { deletion: true, vanish: true, search: false, searchSkipKinds: new Set() };
const dirs: string[] = [];
const relays: TestRelay[] = [];
afterAll(async () => {
  await Promise.all(relays.map((r) => r.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function threadStore(): SqliteStore {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-dupcheck-"));
  dirs.push(dir);
  return new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1, writerThread: true });
}
const write = (e: NostrEvent, vanishOnly?: PendingWrite["vanishOnly"]): PendingWrite => ({ event: e, json: JSON.stringify(e), vanishOnly });

describe("the SQLite store's hasNow", () => {
  test("answers 'not known' at once while the writer thread commits; has waits and knows", async () => {
    const store = threadStore();
    try {
      const author = signer();
      const first = author.sign({ kind: 1, content: "first" });
      await storeEvents(store, [first]);
      // Idle writer: no answer without asking it; has is exact.
      expect(store.hasNow(first.id)).toBeUndefined();
      expect(await store.has(first.id)).toBe(true);
      const batch = Array.from({ length: 300 }, (_, i) => author.sign({ kind: 1, content: `n ${i}`, created_at: now() - i }));
      const committing = storeEvents(store, batch);
      // Committing: no wait behind the batch, "not known" even for what is stored.
      expect(store.hasNow(first.id)).toBe(false);
      expect(store.hasNow(batch[0]!.id)).toBe(false);
      // has is exact: it waits behind the batch and finds its events.
      const known = store.has(batch[0]!.id);
      await committing;
      expect(await known).toBe(true);
      expect(store.hasNow(batch[1]!.id)).toBeUndefined();
      expect(await store.has(batch[1]!.id)).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe("a stored event that reaches the writer again is a duplicate", () => {
  test("a request to vanish, inside its own tombstone: duplicate, not blocked:", async () => {
    const store = threadStore();
    try {
      const v = signer();
      const vanish = v.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]], created_at: now() - 10 });
      const note = v.sign({ kind: 1, content: "after vanishing", created_at: now() - 5 });
      const deletion = v.sign({ kind: 5, tags: [["e", note.id]], created_at: now() - 3 });
      expect(await store.writeBatch([write(vanish), write(note), write(deletion)], RULES)).toEqual([
        { stored: true, seq: expect.any(Number) },
        { stored: true, seq: expect.any(Number) },
        { stored: true, seq: expect.any(Number) },
      ]);
      expect(await store.writeBatch([write(vanish), write(note), write(deletion)], RULES)).toEqual([
        { stored: false, duplicate: true },
        { stored: false, duplicate: false, refusal: { prefix: "blocked", message: "this event was deleted by its author" } },
        { stored: false, duplicate: true },
      ]);
      // Not stored, an event inside the tombstone is still refused.
      const before = v.sign({ kind: 1, content: "before vanishing", created_at: now() - 20 });
      expect(await store.writeBatch([write(before)], RULES)).toEqual([
        { stored: false, duplicate: false, refusal: { prefix: "blocked", message: "this pubkey asked to vanish from this relay" } },
      ]);
    } finally {
      await store.close();
    }
  });

  test("a stored request to vanish sent again as a vanish-only write (its sender refused): not carried out again, the kept request stays", async () => {
    const store = threadStore();
    try {
      const v = signer();
      const vanish = v.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]], created_at: now() - 10 });
      expect((await store.writeBatch([write(vanish)], RULES))[0]!.stored).toBe(true);
      const refusal = refuse("auth-required", "this relay only accepts events from authenticated users");
      expect(await store.writeBatch([write(vanish, refusal)], RULES)).toEqual([{ stored: false, duplicate: true }]);
      expect(await store.has(vanish.id)).toBe(true);
      // A request not stored is carried out and not stored, as before.
      const other = signer().sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]], created_at: now() - 5 });
      const [o] = await store.writeBatch([write(other, refusal)], RULES);
      expect(o).toMatchObject({ stored: false, duplicate: false, refusal: { prefix: "auth-required" } });
      expect(o!.stored || o!.duplicate ? "" : o!.refusal.message).toContain("the request to vanish was carried out");
      expect(await store.has(other.id)).toBe(false);
    } finally {
      await store.close();
    }
  });
});

describe("over a websocket, while batches commit", () => {
  test("an event sent again while its batch commits is answered duplicate: and stored once", async () => {
    const relay = await startTestRelay();
    relays.push(relay);
    const c = await Client.connect(relay.url);
    try {
      const author = signer();
      const events = Array.from({ length: 200 }, (_, i) => author.sign({ kind: 1, content: `twice ${i}`, created_at: now() - i }));
      const from = c.frames.length;
      for (const e of events) c.send(["EVENT", e]);
      for (const e of events) c.send(["EVENT", e]);
      await c.next(() => c.frames.slice(from).filter((f) => f[0] === "OK").length >= 400, 20_000, from);
      const oks = c.frames.slice(from).filter((f) => f[0] === "OK");
      for (const e of events) {
        const mine = oks.filter((f) => f[1] === e.id);
        expect(mine.map((f) => f[2])).toEqual([true, true]);
        expect(mine.map((f) => (f[3] === "" ? "" : String(f[3]).split(":")[0])).sort()).toEqual(["", "duplicate"]);
      }
      expect((await c.req("r", { authors: [author.pubkey], limit: 500 })).events).toHaveLength(200);
    } finally {
      c.close();
    }
  }, 30_000);

  test("a kept request to vanish, resent without AUTH while others' batches commit: refused, and still served", async () => {
    const relay = await startTestRelay({ options: { auth: "writes" } });
    relays.push(relay);
    const v = signer();
    const busy = signer();
    const own = await Client.connect(relay.url);
    const flooder = await Client.connect(relay.url);
    const anon = await Client.connect(relay.url);
    try {
      await own.auth(v, relay.url);
      await flooder.auth(busy, relay.url);
      const vanish = v.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]], created_at: now() - 10 });
      await accepted(own, vanish);
      // Batches of the flooder's events commit while the anonymous resends arrive.
      const from = anon.frames.length;
      const floodFrom = flooder.frames.length;
      for (let round = 0; round < 8; round++) {
        for (let i = 0; i < 60; i++) flooder.send(["EVENT", busy.sign({ kind: 1, content: `busy ${round} ${i}` })]);
        anon.send(["EVENT", vanish]);
        await Bun.sleep(5);
      }
      await flooder.next(() => flooder.frames.slice(floodFrom).filter((f) => f[0] === "OK").length >= 480, 20_000, floodFrom);
      await anon.next(() => anon.frames.slice(from).filter((f) => f[0] === "OK").length >= 8, 20_000, from);
      for (const f of anon.frames.slice(from).filter((f) => f[0] === "OK")) {
        expect(f[2]).toBe(false);
        expect(String(f[3])).toStartWith("auth-required:");
        expect(String(f[3])).not.toContain("carried out");
      }
      expect((await own.req("k", { kinds: [62], authors: [v.pubkey] })).events.map((e) => e.id)).toEqual([vanish.id]);
    } finally {
      own.close();
      flooder.close();
      anon.close();
    }
  }, 30_000);
});
