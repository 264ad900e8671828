// The SQLite store's writer and readers on this thread (store/sqlite/inline.ts: an in-memory
// database) answer as the writer thread and the reader workers do (store/sqlite/ports.ts): the
// same rows, counts and NIP-77 replies, each read's time reported, and hasNow exact at once.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NegentropyStorage } from "../src/nips/nip77.ts";
import { NegentropyClient } from "../src/nips/nip77-client.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { allRows, type ReadContext } from "../src/store/types.ts";
import { now, signer, storeEvents } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-inline-"));
const inline = new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 1 });
const threads = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1, writerThread: true });
afterAll(async () => {
  await Promise.all([inline.close(), threads.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const author = signer();
const events = Array.from({ length: 40 }, (_, i) => author.sign({ kind: 1, content: `n ${i}`, created_at: now() - i }));
const scope = () => ({ maxSeq: Number.MAX_SAFE_INTEGER, now: 0 });

/** A read context that records the time reported and whether the read ended. */
function recorded(): ReadContext & { ends: number } {
  const ctx = { owner: {}, ends: 0, onEnd: () => void ctx.ends++ };
  return ctx;
}

/** Opens a NIP-77 session for the author's events, from a client holding the first half; its replies until done. */
async function reconcile(store: SqliteStore, ctx: ReadContext): Promise<string[]> {
  const client = new NegentropyClient(NegentropyStorage.from(events.slice(0, 20).map((e) => ({ timestamp: e.created_at, id: e.id }))));
  const first = Buffer.from(client.initiate(), "hex");
  const session = await store.negentropy.open(
    { ...scope(), filter: { authors: [author.pubkey] }, max: 1000 },
    new Uint8Array(first),
    0,
    ctx,
  );
  const replies: string[] = [];
  try {
    expect(session.overflow).toBe(false);
    if (session.overflow || session.error !== undefined) throw new Error("no session");
    let reply: string | null = session.reply;
    for (let i = 0; reply !== null && i < 10; i++) {
      replies.push(reply);
      const next = client.reconcile(
        reply,
        () => {},
        () => {},
      );
      if (next === null) break;
      const answer = await session.message(new Uint8Array(Buffer.from(next, "hex")), ctx);
      reply = answer.error === undefined ? answer.reply : null;
    }
  } finally {
    session.close();
  }
  return replies;
}

describe("the in-memory store answers as the threads do", () => {
  test("writes, duplicate checks, reads and NIP-77 sessions", async () => {
    for (const store of [inline, threads]) expect((await storeEvents(store, events)).every((o) => o.stored)).toBe(true);
    // hasNow: exact at once on this thread; the idle writer thread has no answer without being asked.
    expect(inline.hasNow(events[0]!.id)).toBe(true);
    expect(inline.hasNow("00".repeat(32))).toBe(false);
    expect(threads.hasNow(events[0]!.id)).toBeUndefined();
    for (const store of [inline, threads]) {
      expect(await store.has(events[1]!.id)).toBe(true);
      expect(await store.has("00".repeat(32))).toBe(false);
    }
    const job = { ...scope(), filters: [{ authors: [author.pubkey] }], limits: [100] };
    const rows = async (store: SqliteStore) => (await allRows(store.query(job))).sort();
    expect(await rows(inline)).toEqual(await rows(threads));
    expect((await rows(inline)).length).toBe(40);
    const counted = { inline: recorded(), threads: recorded() };
    expect(await inline.count(job, counted.inline)).toEqual(await threads.count(job, counted.threads));
    expect([counted.inline.ends, counted.threads.ends]).toEqual([1, 1]);
    const neg = { inline: recorded(), threads: recorded() };
    const replies = await reconcile(inline, neg.inline);
    expect(replies.length).toBeGreaterThan(0);
    expect(replies).toEqual(await reconcile(threads, neg.threads));
    // Each NIP-77 read (the open, every message) ended once, on this thread as in the workers.
    expect(neg.inline.ends).toBeGreaterThan(0);
    expect(neg.inline.ends).toBe(neg.threads.ends);
  });
});
