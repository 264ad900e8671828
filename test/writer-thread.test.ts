// The writer thread's failures and bounds: a writer thread that ends without an error event, and
// the writer queue's bound in bytes (store/queue.ts) when the writer is slower than the clients.
import { describe, expect, spyOn, test } from "bun:test";
import { MAX_BATCH_CHARS, WriterQueue } from "../src/store/queue.ts";
import type { PendingWrite, Store, WriteOutcome } from "../src/store/types.ts";
import { Client, now, signer, startTestRelay } from "./helpers.ts";

describe("writer thread", () => {
  test("a writer thread that ends (no error event) fails its waiting EVENTs with error:, and a new one stores the next", async () => {
    const relay = await startTestRelay();
    const c = await Client.connect(relay.url);
    const errors = spyOn(console, "error");
    try {
      const author = signer();
      expect((await c.publish(author.sign({ kind: 1, content: "before" })))[2]).toBe(true);
      // The worker is gone as after process.exit in it: Bun fires "close", not "error".
      const thread = (relay.ctx.store as unknown as { thread: { worker: Worker } }).thread;
      thread.worker.terminate();
      const during = await Promise.all(
        Array.from({ length: 5 }, (_, i) => c.publish(author.sign({ kind: 1, content: `during ${i}`, created_at: now() - i }))),
      );
      // Each got its answer (on the old code they waited for good): stored, or error: to retry.
      for (const ok of during) if (!ok[2]) expect(ok[3]).toStartWith("error:");
      // A new writer thread takes over.
      let after: unknown[] = [];
      for (let i = 0; i < 50; i++) {
        after = await c.publish(author.sign({ kind: 1, content: `after ${i}` }));
        if (after[2] === true) break;
        await Bun.sleep(100);
      }
      expect(after[2]).toBe(true);
      const got = await c.req("r", { authors: [author.pubkey] });
      expect(got.events.map((e: { content: string }) => e.content)).toContain("before");
      // What was logged: the loss once, and the queue's own lines for failed batches, not a line per event.
      const lines = errors.mock.calls.map((call: unknown[]) => call.map(String).join(" "));
      expect(lines.filter((l) => l.startsWith("writer thread exited"))).toHaveLength(1);
      for (const l of lines) expect(l).toMatch(/^writer thread exited|^writer: could not store|^writer: storing events again/);
    } finally {
      errors.mockRestore();
      c.close();
      await relay.stop();
    }
  }, 30_000);
});

describe("writer queue bounds", () => {
  const write = (chars: number, i: number): PendingWrite => ({
    event: { id: String(i).padStart(64, "0"), pubkey: "", created_at: 0, kind: 1, tags: [], content: "", sig: "" },
    json: "x".repeat(chars),
  });

  /** A store whose batches are answered only when the test says so. */
  function slowStore() {
    const batches: { size: number; chars: number; answer: () => void }[] = [];
    const store = {
      writePipeline: 1,
      writeBatch(batch: PendingWrite[]): Promise<WriteOutcome[]> {
        return new Promise((resolve) =>
          batches.push({
            size: batch.length,
            chars: batch.reduce((n, w) => n + w.json.length, 0),
            answer: () => resolve(batch.map((_, i) => ({ stored: true, seq: i + 1 }))),
          }),
        );
      },
    } as unknown as Store;
    return { store, batches };
  }

  const rules = () => ({}) as never;

  test("past its bound in bytes an EVENT is refused error: at once; what was queued is stored", async () => {
    const { store, batches } = slowStore();
    const q = new WriterQueue(store, () => {}, rules, 2000, 10_000);
    const first = Array.from({ length: 4 }, (_, i) => q.enqueue(write(2_000, i)));
    const over = await q.enqueue(write(3_000, 9));
    expect(over).toEqual({
      stored: false,
      duplicate: false,
      refusal: { prefix: "error", message: "the relay is busy storing events, try again" },
    });
    await Bun.sleep(5);
    for (const b of batches.splice(0)) b.answer();
    expect((await Promise.all(first)).every((o) => o.stored)).toBe(true);
    // Answered: the room is back.
    const again = q.enqueue(write(3_000, 10));
    await Bun.sleep(5);
    for (const b of batches.splice(0)) b.answer();
    expect((await again).stored).toBe(true);
  });

  test("a batch is cut at MAX_BATCH_CHARS of JSON as well as at its count", async () => {
    const { store, batches } = slowStore();
    const q = new WriterQueue(store, () => {}, rules, 2000, 64 * 1024 * 1024);
    const big = Math.floor(MAX_BATCH_CHARS / 3) + 1;
    const all = Array.from({ length: 6 }, (_, i) => q.enqueue(write(big, i)));
    for (let n = 0; n < 3; n++) {
      await Bun.sleep(5);
      expect(batches.length).toBe(1);
      const b = batches.shift()!;
      expect(b.size).toBe(2);
      expect(b.chars).toBeLessThanOrEqual(MAX_BATCH_CHARS);
      b.answer();
    }
    expect((await Promise.all(all)).every((o) => o.stored)).toBe(true);
  });
});
