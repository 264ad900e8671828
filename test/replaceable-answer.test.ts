// Replaceable events by author and kind (a profile, a relay list) answered from memory without a
// database read (relay/answers/replaceable.ts), through a real relay on its SQLite store (writer
// thread, reader workers): each answer is compared with the store's own answer to the same
// filter, read through the store after it, and the relay's counter says whether memory gave it.
// The fanout's ring would answer some of these itself (relay/answers/feeds.ts): another process
// stores an event dated far ahead first, so that every answer here is older than the ring's floor.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { nowSeconds, type NostrEvent } from "../src/protocol/event.ts";
import type { Filter } from "../src/protocol/filter.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { accepted, Client, failOnRelayErrors, now, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";
import {
  expectAnswer as expectFrom,
  once,
  duringNextRead,
  relayWithoutRingAnswers,
  RULES,
  settled as settledOn,
  storedElsewhere,
} from "./memory-answers.ts";

failOnRelayErrors();

let relay: TestRelay;
let c: Client;

beforeAll(async () => {
  ({ relay, c } = await relayWithoutRingAnswers({ authorization: { restricted_read_kinds: [4, 1059, 10050] } }));
});
afterAll(async () => {
  c?.close();
  await relay?.stop();
});

const settled = () => settledOn(relay);
/** REQs the filter and checks the answer is the store's, from memory or not as `fromMemory`. */
const expectAnswer = (filter: Filter, fromMemory: boolean) => expectFrom(relay, c, filter, fromMemory ? "replaceable" : "store");

const profile = (s: Signer, name: string, created_at = now(), tags: string[][] = []) =>
  s.sign({ kind: 0, content: JSON.stringify({ name }), created_at, tags });

describe("answered from memory", () => {
  test("a profile stored since start: the fanned-out version, replaced by a newer one", async () => {
    const a = signer();
    const v1 = profile(a, "one", now() - 1);
    await accepted(c, v1);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([v1.id]);
    const v2 = profile(a, "two");
    await accepted(c, v2);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([v2.id]);
    // An older version is refused and changes nothing.
    expect((await c.publish(profile(a, "old", now() - 5)))[2]).toBe(false);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0], limit: 1 }, true)).toEqual([v2.id]);
  });

  test("an author without one: the store's answer the first two times, then memory's, until one comes", async () => {
    const a = signer();
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false); // asked once (relay/answers/keep.ts SecondAsk)
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false)).toEqual([]);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([]);
    const v1 = profile(a, "late");
    await accepted(c, v1);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([v1.id]);
  });

  test("several authors and kinds: known only once every pair is, cut by the limit in NIP-01 order", async () => {
    const [a, b, d] = [signer(), signer(), signer()];
    const t = now();
    const events = [
      profile(a, "a", t - 2),
      profile(b, "b", t - 1),
      b.sign({ kind: 10002, tags: [["r", "wss://x.example"]], created_at: t - 1 }),
    ];
    for (const e of events) await accepted(c, e);
    const filter = { authors: [a.pubkey, b.pubkey, d.pubkey], kinds: [0, 10002] };
    // d, and a's relay list, are not known yet.
    await expectAnswer(filter, false); // asked once (relay/answers/keep.ts SecondAsk)
    await expectAnswer(filter, false);
    expect(await expectAnswer(filter, true)).toHaveLength(3);
    // b's two share a second: the lower id first.
    expect(await expectAnswer({ ...filter, limit: 2 }, true)).toEqual([events[1]!, events[2]!].map((e) => e.id).sort());
    // Time bounds are checked on the known events.
    expect(await expectAnswer({ ...filter, since: t - 1 }, true)).toHaveLength(2);
    expect(await expectAnswer({ ...filter, until: t - 2 }, true)).toEqual([events[0]!.id]);
  });

  test("NIP-09: a deleted profile is not served, nor one deleted by the batch that stored it", async () => {
    const a = signer();
    const v1 = profile(a, "gone soon", now() - 1);
    await accepted(c, v1);
    await accepted(c, a.sign({ kind: 5, tags: [["e", v1.id]] }));
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false); // asked once (relay/answers/keep.ts SecondAsk)
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false)).toEqual([]);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([]);
    // Sent at once, profiles and their deletions share write batches.
    const authors = Array.from({ length: 8 }, () => signer());
    const oks = await Promise.all(
      authors.flatMap((s) => {
        const p = profile(s, "batch");
        return [c.publish(p), c.publish(s.sign({ kind: 5, tags: [["e", p.id]] }))];
      }),
    );
    for (const ok of oks) expect(ok[2]).toBe(true);
    for (const s of authors) {
      await expectAnswer({ authors: [s.pubkey], kinds: [0] }, false); // asked once (relay/answers/keep.ts SecondAsk)
      await expectAnswer({ authors: [s.pubkey], kinds: [0] }, false);
      expect(await expectAnswer({ authors: [s.pubkey], kinds: [0] }, true)).toEqual([]);
    }
  });

  test("NIP-62 and NIP-86: an author who vanished, a banned event, a banned author", async () => {
    const [a, b, d] = [signer(), signer(), signer()];
    const pb = profile(b, "b");
    for (const e of [profile(a, "a"), pb, profile(d, "d")]) await accepted(c, e);
    for (const s of [a, b, d]) expect(await expectAnswer({ authors: [s.pubkey], kinds: [0] }, true)).toHaveLength(1);
    await accepted(c, a.sign({ kind: 62, content: "bye", tags: [["relay", relay.url]] }));
    expect(await relay.ctx.store.admin.deleteEvent(pb.id)).toBe(true);
    expect(await relay.ctx.store.admin.deleteAuthor(d.pubkey)).toBe(1);
    for (const s of [a, b, d]) expect(await expectAnswer({ authors: [s.pubkey], kinds: [0] }, false)).toEqual([]);
  });

  test("NIP-40: an expired profile is not served", async () => {
    const a = signer();
    const t = now();
    await accepted(c, profile(a, "brief", t, [["expiration", String(t + 2)]]));
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toHaveLength(1);
    while (nowSeconds() < t + 2) await Bun.sleep(100);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([]);
  });
});

describe("what memory cannot know", () => {
  test("another process replaces a profile: the store's answer, then memory's again", async () => {
    const a = signer();
    await accepted(c, profile(a, "here", now() - 2));
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true);
    const there = profile(a, "there", now() - 1);
    await storedElsewhere(relay, c, there);
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false); // asked once (relay/answers/keep.ts SecondAsk)
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false)).toEqual([there.id]);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([there.id]);
    // An answer cut by time bounds does not tell what the store holds.
    const b = signer();
    const old = profile(b, "old", now() - 10);
    await storedElsewhere(relay, c, old);
    expect(await expectAnswer({ authors: [b.pubkey], kinds: [0], since: now() - 5 }, false)).toEqual([]);
    expect(await expectAnswer({ authors: [b.pubkey], kinds: [0], until: now() - 20 }, false)).toEqual([]);
    expect(await expectAnswer({ authors: [b.pubkey], kinds: [0] }, false)).toEqual([old.id]);
  });

  test("a read while anything may be committed does not fill (Store.changes.mark)", async () => {
    const store = relay.ctx.store;
    await settled();
    const mark = store.changes!.mark();
    expect(mark).toBeDefined();
    expect(store.changes!.unchangedSince(mark!)).toBe(true);
    // Another process commits.
    const other = profile(signer(), "x");
    const db = new Database(relay.dbPath);
    new SqliteWriter(db).writeBatchImmediate([{ event: other, json: JSON.stringify(other) }], RULES);
    db.close();
    expect(store.changes!.unchangedSince(mark!)).toBe(false);
    await settled();
    // Our writer has a call in flight: no mark; one answered since the mark: changed.
    const mark2 = store.changes!.mark()!;
    const ok = c.publish(profile(signer(), "y"));
    const thread = (store as unknown as { writer: { busy: boolean } }).writer;
    while (!thread.busy) await Bun.sleep(0);
    expect(store.changes!.mark()).toBeUndefined();
    expect(store.changes!.unchangedSince(mark2)).toBe(false);
    expect((await ok)[2]).toBe(true);
    await settled();
    expect(store.changes!.unchangedSince(mark2)).toBe(false);
  });

  test("a REQ read while our writer's batch is in flight fills nothing", async () => {
    const a = signer();
    const db = new Database(relay.dbPath);
    try {
      // Another process holds the write lock: our batch waits in the writer thread.
      db.exec("BEGIN IMMEDIATE");
      const ok = c.publish(profile(signer(), "waits for the lock"));
      const thread = (relay.ctx.store as unknown as { writer: { busy: boolean } }).writer;
      while (!thread.busy) await Bun.sleep(1);
      const before = relay.ctx.metrics.memoryAnswers.replaceable;
      expect((await once(c, { authors: [a.pubkey], kinds: [0] })).events).toEqual([]);
      expect(relay.ctx.metrics.memoryAnswers.replaceable).toBe(before);
      db.exec("COMMIT");
      expect((await ok)[2]).toBe(true);
    } finally {
      if (db.inTransaction) db.exec("ROLLBACK");
      db.close();
    }
    // Not filled by that read: the store's answer, which fills.
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false); // asked once (relay/answers/keep.ts SecondAsk)
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, false);
    await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true);
  });

  test("a REQ read while our writer committed fills nothing", async () => {
    const a = signer();
    const p = profile(a, "stored during the read");
    await settled();
    await once(c, { authors: [a.pubkey], kinds: [0] }); // asked once (relay/answers/keep.ts SecondAsk)
    duringNextRead(relay, () => accepted(c, p));
    // Committed after the REQ's snapshot: it comes with the catch-up, before EOSE.
    expect((await once(c, { authors: [a.pubkey], kinds: [0] })).events).toEqual([p]);
    expect(await expectAnswer({ authors: [a.pubkey], kinds: [0] }, true)).toEqual([p.id]);
  });

  test("restricted kinds and other shapes go to the store", async () => {
    const a = signer();
    await accepted(c, a.sign({ kind: 10050, tags: [["relay", "wss://dm.example"]] }));
    await accepted(c, profile(a, "a"));
    // Hidden from anonymous readers by the store: never from memory, also not the pair beside it.
    const refused = await once(c, { authors: [a.pubkey], kinds: [0, 10050] });
    expect(refused.end[0]).toBe("CLOSED");
    expect(refused.end[2]).toStartWith("auth-required:");
    // Nor to one authenticated as someone else, whom the store does not show it either.
    const other = await Client.connect(relay.url);
    try {
      expect((await other.auth(signer(), relay.url))[2]).toBe(true);
      for (let i = 0; i < 2; i++) {
        const before = relay.ctx.metrics.memoryAnswers.replaceable;
        expect((await once(other, { authors: [a.pubkey], kinds: [10050] })).events).toEqual([]);
        expect(relay.ctx.metrics.memoryAnswers.replaceable).toBe(before);
      }
      expect((await once(c, { authors: [a.pubkey], kinds: [10050] })).end[0]).toBe("CLOSED");
    } finally {
      other.close();
    }
    await expectAnswer({ authors: [a.pubkey], kinds: [0], "#p": [a.pubkey] }, false);
    await expectAnswer({ authors: [a.pubkey], kinds: [0, 1] }, false);
    await expectAnswer({ authors: [a.pubkey] }, false);
    const { replaceable: replaceableAnswers } = relay.ctx.metrics.memoryAnswers;
    await once(c, { authors: [a.pubkey], kinds: [0] }, { kinds: [0], authors: [signer().pubkey] });
    expect(relay.ctx.metrics.memoryAnswers.replaceable).toBe(replaceableAnswers);
  });

  test("a restart: the store's answer first, memory's after", async () => {
    const first = await startTestRelay();
    const c1 = await Client.connect(first.url);
    const a = signer();
    const p = profile(a, "before the restart");
    await accepted(c1, p);
    c1.close();
    await first.close();
    const again = await startTestRelay({}, { dir: first.dir });
    const c2 = await Client.connect(again.url);
    try {
      const ask = async () => {
        await Bun.sleep(12);
        again.ctx.store.lastSeq();
        while (!again.ctx.store.changes!.known() || !again.ctx.store.changes!.mark()) await Bun.sleep(1);
        const before = again.ctx.metrics.memoryAnswers.replaceable;
        const got = (await once(c2, { authors: [a.pubkey], kinds: [0] })).events.map((e: NostrEvent) => e.id);
        return { got, fromMemory: again.ctx.metrics.memoryAnswers.replaceable - before };
      };
      expect(await ask()).toEqual({ got: [p.id], fromMemory: 0 });
      expect(await ask()).toEqual({ got: [p.id], fromMemory: 0 }); // kept the second time (relay/answers/keep.ts SecondAsk)
      expect(await ask()).toEqual({ got: [p.id], fromMemory: 1 });
    } finally {
      c2.close();
      await again.stop();
    }
  });
});
