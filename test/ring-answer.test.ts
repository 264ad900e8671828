// Feeds answered from the fanout's ring without a database read (relay/answers/feeds.ts), through a
// real relay on its SQLite store (writer thread, reader workers): each answer is compared with
// the store's own answer to the same filter, read through the store after it, and the relay's
// counter says whether the ring gave it. Deletions of every kind, another process writing, a
// restart on a database that already holds events, and NIP-40 expiry.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { nowSeconds, type NostrEvent } from "../src/protocol/event.ts";
import type { Filter } from "../src/protocol/filter.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRelay } from "../src/relay/server.ts";
import {
  accepted,
  Client,
  failOnRelayErrors,
  now,
  openTestStore,
  signer,
  startTestRelay,
  testConfig,
  type Signer,
  type TestRelay,
} from "./helpers.ts";
import { RULES, settled, storeIds } from "./memory-answers.ts";

failOnRelayErrors();

let relay: TestRelay;
let c: Client;
beforeAll(async () => {
  relay = await startTestRelay();
  c = await Client.connect(relay.url);
});
afterAll(async () => {
  c?.close();
  await relay?.stop();
});

let n = 0;
/** REQs the filter and checks the answer is the store's, given by the ring or not as `fromRing`. */
async function expectAnswer(filter: Filter, fromRing: boolean, r = relay, client = c): Promise<string[]> {
  await settled(r);
  const before = r.ctx.metrics.memoryAnswers.ring;
  const got = (await client.req(`q${n++}`, filter)).events.map((e: NostrEvent) => e.id);
  expect({ filter, got }).toEqual({ filter, got: await storeIds(r, filter) });
  expect(r.ctx.metrics.memoryAnswers.ring - before).toBe(fromRing ? 1 : 0);
  return got;
}

/** Notes by `s`, one per second back from `t` (t, t-1, ...), published in order oldest first. */
async function notes(s: Signer, count: number, t = now()): Promise<NostrEvent[]> {
  const out = Array.from({ length: count }, (_, i) => s.sign({ kind: 1, content: `note ${i}`, created_at: t - i }));
  for (const e of [...out].reverse()) await accepted(c, e);
  return out;
}

describe("answered from the ring", () => {
  test("a feed: the same events in the same order as the store's, ties on created_at by id", async () => {
    const a = signer();
    const b = signer();
    const t = now();
    await notes(a, 5, t);
    // b's notes share a's seconds: the order within a second is by id.
    await notes(b, 5, t);
    const got = await expectAnswer({ authors: [a.pubkey, b.pubkey], kinds: [1], limit: 7 }, true);
    expect(got).toHaveLength(7);
    // Fewer than the limit: everything since start is in the ring (the database was empty).
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [1, 6], limit: 50 }, true)).toHaveLength(5);
    await expectAnswer({ authors: [a.pubkey, b.pubkey], kinds: [1], since: t - 1, limit: 50 }, true);
    await expectAnswer({ authors: [a.pubkey, b.pubkey], kinds: [1], until: t - 2, limit: 3 }, true);
  });

  test("hashtags, with authors and kinds or without", async () => {
    const a = signer();
    const b = signer();
    const tag = `tag${Math.random().toString(36).slice(2)}`;
    const t = now();
    for (const [s, i] of [
      [a, 0],
      [b, 1],
      [a, 2],
      [b, 3],
      [a, 4],
    ] as const)
      await accepted(
        c,
        s.sign({
          kind: i === 3 ? 6 : 1,
          content: `#${tag} ${i}`,
          created_at: t - i,
          tags: [
            ["t", tag],
            ["t", "other"],
          ],
        }),
      );
    expect(await expectAnswer({ "#t": [tag], limit: 3 }, true)).toHaveLength(3);
    expect(await expectAnswer({ "#t": [tag, "nothing-else"], kinds: [1], limit: 10 }, true)).toHaveLength(4);
    expect(await expectAnswer({ authors: [b.pubkey], "#t": [tag] }, true)).toHaveLength(2);
  });

  test("a hashtag with a lone surrogate: the store does not tell it from U+FFFD, nor does the ring", async () => {
    const a = signer();
    const t = now();
    const lone = a.sign({ kind: 1, content: "lone", created_at: t - 1, tags: [["t", "\ud800"]] });
    const fffd = a.sign({ kind: 1, content: "fffd", created_at: t, tags: [["t", "\uFFFD"]] });
    await accepted(c, lone);
    await accepted(c, fffd);
    for (const value of ["\uFFFD", "\ud800"])
      expect(await expectAnswer({ "#t": [value], authors: [a.pubkey], limit: 10 }, true)).toEqual([fffd.id, lone.id]);
    expect(await expectAnswer({ "#t": ["\ud800"], limit: 10 }, true)).toEqual([fffd.id, lone.id]);
  });

  test("a newer version of a replaceable event: only it is served", async () => {
    const a = signer();
    await accepted(c, a.sign({ kind: 0, content: "{}", created_at: now() - 1 }));
    const v2 = a.sign({ kind: 0, content: '{"name":"a"}', created_at: now() });
    await accepted(c, v2);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([v2.id]);
  });

  test("other shapes go to the store: other tags, several filters, no author or hashtag, a DM in the answer", async () => {
    const a = signer();
    const [note] = await notes(a, 2);
    await expectAnswer({ authors: [a.pubkey], kinds: [1], "#e": [note!.id] }, false);
    await expectAnswer({ kinds: [1], limit: 1 }, false);
    const before = relay.ctx.metrics.memoryAnswers.ring;
    await c.req(`two${n++}`, { authors: [a.pubkey] }, { kinds: [0], limit: 1 });
    expect(relay.ctx.metrics.memoryAnswers.ring).toBe(before);
    // A DM (restricted kind) among the author's newest: anonymous readers do not see it, and the
    // ring leaves the answer to the store, which hides it.
    await accepted(c, a.sign({ kind: 4, content: "secret", tags: [["p", signer().pubkey]], created_at: now() + 1 }));
    expect(await expectAnswer({ authors: [a.pubkey], limit: 5 }, false)).toHaveLength(2);
  });

  test("NIP-09: a deleted note is not served", async () => {
    const a = signer();
    const [newest, middle] = await notes(a, 3);
    await accepted(c, a.sign({ kind: 5, tags: [["e", middle!.id]] }));
    const got = await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 10 }, true);
    expect(got).toEqual([newest!.id, expect.any(String)]);
    expect(got).not.toContain(middle!.id);
  });

  test("NIP-09: notes deleted by the batch that stored them are not served", async () => {
    const a = signer();
    const [keep] = await notes(a, 1, now() - 1);
    // Sent at once, the notes and their deletions share write batches: the store names each
    // deletion before the batch's events are fanned out (relay/answers/feeds.ts unseen).
    const gone = Array.from({ length: 10 }, (_, i) => a.sign({ kind: 1, content: `gone ${i}`, created_at: now() }));
    const oks = await Promise.all(gone.flatMap((e) => [c.publish(e), c.publish(a.sign({ kind: 5, tags: [["e", e.id]] }))]));
    for (const ok of oks) expect(ok[2]).toBe(true);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 20 }, true)).toEqual([keep!.id]);
  });

  test("NIP-62: nothing of an author who vanished", async () => {
    const a = signer();
    await notes(a, 3, now() - 1);
    await accepted(c, a.sign({ kind: 62, content: "bye", tags: [["relay", relay.url]] }));
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 10 }, true)).toEqual([]);
  });

  test("NIP-86 deletions (banevent, banpubkey), carried out by the store's admin", async () => {
    const a = signer();
    const b = signer();
    const [first] = await notes(a, 2);
    await notes(b, 2);
    expect(await relay.ctx.store.admin.deleteEvent(first!.id)).toBe(true);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [1] }, true)).not.toContain(first!.id);
    expect(await relay.ctx.store.admin.deleteAuthor(b.pubkey)).toBe(2);
    expect(await expectAnswer({ authors: [b.pubkey], kinds: [1] }, true)).toEqual([]);
  });

  test("NIP-40: an expired note is not served", async () => {
    const a = signer();
    const t = now();
    const soon = a.sign({ kind: 1, content: "soon gone", created_at: t, tags: [["expiration", String(t + 2)]] });
    await accepted(c, a.sign({ kind: 1, content: "stays", created_at: t - 1 }));
    await accepted(c, soon);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [1] }, true)).toContain(soon.id);
    while (nowSeconds() < t + 2) await Bun.sleep(100);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [1] }, true)).not.toContain(soon.id);
  });
});

describe("what the ring cannot know", () => {
  test("another process deletes and stores events: the store's answer", async () => {
    const a = signer();
    const [newest] = await notes(a, 3);
    await expectAnswer({ authors: [a.pubkey], kinds: [1] }, true);
    // bunstr on the same file in another process (a CLI, the other relay of a restart).
    const db = new Database(relay.dbPath);
    const other = new SqliteWriter(db);
    try {
      expect(other.removeById(newest!.id)).toBe(true);
      const later = a.sign({ kind: 1, content: "from elsewhere", created_at: now() + 1 });
      expect(other.writeBatchImmediate([{ event: later, json: JSON.stringify(later) }], RULES)[0]!.stored).toBe(true);
      // The relay looks for others' commits at most every 10 ms (store/sqlite/store.ts lastSeq).
      await Bun.sleep(30);
      await c.req(`wake${n++}`, { ids: [later.id] });
      const got = await expectAnswer({ authors: [a.pubkey], kinds: [1] }, false);
      expect(got).toContain(later.id);
      expect(got).not.toContain(newest!.id);
      // What the relay stores from now on (newer than all of that) is answered from the ring again.
      const [fresh] = await notes(a, 1, now() + 2);
      expect(await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 1 }, true)).toEqual([fresh!.id]);
    } finally {
      db.close();
    }
  });

  test("another process deletes while the relay's batch waits for its write lock: the store's answer", async () => {
    const a = signer();
    // Newer than what the test before had another process write (the ring's floor).
    const [newest, ...rest] = await notes(a, 3, now() + 5);
    // As many as there are: a full answer, which the ring gives while nothing else is known.
    const filter: Filter = { authors: [a.pubkey], kinds: [1], limit: 3 };
    await expectAnswer(filter, true);
    const db = new Database(relay.dbPath);
    const c2 = await Client.connect(relay.url);
    try {
      // It deletes a note and commits, then begins its next transaction (an import's next chunk).
      expect(new SqliteWriter(db).removeById(newest!.id)).toBe(true);
      db.exec("BEGIN IMMEDIATE");
      const ok = c.publish(signer().sign({ kind: 1, content: "waits for the lock" }));
      const thread = (relay.ctx.store as unknown as { writer: { busy: boolean } }).writer;
      while (!thread.busy) await Bun.sleep(1);
      await Bun.sleep(30);
      const before = relay.ctx.metrics.memoryAnswers.ring;
      const got = (await c2.req(`locked${n++}`, filter)).events.map((e: NostrEvent) => e.id);
      expect(relay.ctx.metrics.memoryAnswers.ring).toBe(before);
      expect(got).toEqual(rest.map((e) => e.id));
      db.exec("COMMIT");
      expect((await ok)[2]).toBe(true);
    } finally {
      if (db.inTransaction) db.exec("ROLLBACK");
      db.close();
      c2.close();
    }
  });

  test("another process commits while the relay's writer thread opens: the store's answer", async () => {
    // The other process holds the write lock as the relay starts (the writer thread waits for it
    // to open) and commits once the relay watches for changes. Racy by nature: tried 5 times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const dir = mkdtempSync(join(tmpdir(), "bunstr-ring-open-"));
      const config = testConfig();
      const store = await openTestStore(dir, config);
      const a = signer();
      const note = a.sign({ kind: 1, content: "written elsewhere", created_at: now() });
      const db = new Database(join(dir, "bunstr.sqlite"));
      db.exec("PRAGMA busy_timeout = 5000");
      db.exec("BEGIN IMMEDIATE");
      expect(new SqliteWriter(db).writeBatch([{ event: note, json: JSON.stringify(note) }], RULES)[0]!.stored).toBe(true);
      const changes = store.changes!;
      const watch = changes.watch;
      changes.watch = (w) => {
        watch(w);
        db.exec("COMMIT");
        db.close();
      };
      const r = startRelay({ config, store });
      const client = await Client.connect(`ws://127.0.0.1:${r.server.port}`);
      try {
        // Once the writer thread is open and every check has had its chance.
        await r.ctx.store.ready();
        for (let i = 0; i < 3; i++) await settled(r as TestRelay);
        const got = (await client.req("q", { authors: [a.pubkey], kinds: [1], limit: 10 })).events.map((e: NostrEvent) => e.id);
        expect({ attempt, got }).toEqual({ attempt, got: [note.id] });
      } finally {
        client.close();
        await r.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  test("a restart on a database that holds events: those come from the store until newer ones fill the answer", async () => {
    const first = await startTestRelay();
    const client = await Client.connect(first.url);
    const a = signer();
    const t = now();
    const old = Array.from({ length: 3 }, (_, i) => a.sign({ kind: 1, content: `old ${i}`, created_at: t - 10 - i }));
    for (const e of old) await accepted(client, e);
    client.close();
    await first.close();
    const again = await startTestRelay({}, { dir: first.dir });
    const c2 = await Client.connect(again.url);
    try {
      await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 2 }, false, again, c2);
      const fresh = [a.sign({ kind: 1, content: "new 1", created_at: t }), a.sign({ kind: 1, content: "new 0", created_at: t + 1 })];
      for (const e of fresh) await accepted(c2, e);
      expect(await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 2 }, true, again, c2)).toEqual([fresh[1]!.id, fresh[0]!.id]);
      // One more than the ring holds of them: the store's.
      expect(await expectAnswer({ authors: [a.pubkey], kinds: [1], limit: 3 }, false, again, c2)).toEqual([
        fresh[1]!.id,
        fresh[0]!.id,
        old[0]!.id,
      ]);
    } finally {
      c2.close();
      await again.stop();
    }
  });
});
