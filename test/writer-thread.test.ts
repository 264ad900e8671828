// The writer thread's failures and bounds: a writer thread that ends without an error event, and
// the writer queue's bound in bytes (store/queue.ts) when the writer is slower than the clients.
import { describe, expect, spyOn, test } from "bun:test";
import { MAX_BATCH_CHARS, MAX_BATCH_COST, WriterQueue } from "../src/store/queue.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { PendingWrite, PurgeWatch, Store, WriteOutcome } from "../src/store/types.ts";
import { Client, now, rowsWithId, signer, startTestRelay, type TestRelay } from "./helpers.ts";

describe("writer thread", () => {
  test("a writer thread that ends (no error event) fails its waiting EVENTs with error:, and a new one stores the next", async () => {
    const relay = await startTestRelay();
    const c = await Client.connect(relay.url);
    const errors = spyOn(console, "error");
    try {
      const author = signer();
      expect((await c.publish(author.sign({ kind: 1, content: "before" })))[2]).toBe(true);
      // The worker is gone as after process.exit in it: Bun fires "close", not "error".
      const thread = (relay.ctx.store as unknown as { writer: { worker: Worker } }).writer;
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
      expect(lines.filter((l) => l.startsWith("error: writer thread exited"))).toHaveLength(1);
      for (const l of lines)
        expect(l).toMatch(/^(error: (writer thread exited|writer: could not store)|warning: writer: storing events again)/);
    } finally {
      errors.mockRestore();
      c.close();
      await relay.stop();
    }
  }, 30_000);
});

/** The store's writer thread, as the test reaches into it (no production hooks). */
interface ThreadInside {
  worker: Worker;
}
const threadOf = (relay: TestRelay) => (relay.ctx.store as unknown as { writer: ThreadInside }).writer;

/**
 * The next batch's reply never arrives: the worker ends as it comes, after its COMMIT, without an
 * error event ("close", as after process.exit in it) or with one (an uncaught error in it).
 */
function loseNextBatchReply(thread: ThreadInside, how: "close" | "error"): { lost: Promise<number> } {
  const worker = thread.worker;
  const original = worker.onmessage!;
  let told: (n: number) => void;
  const lost = new Promise<number>((r) => (told = r));
  worker.onmessage = (msg: MessageEvent) => {
    const r = msg.data as { seqs?: Float64Array };
    if (!r.seqs) return original.call(worker, msg);
    worker.onmessage = original;
    if (how === "close") worker.terminate();
    else worker.onerror!(new ErrorEvent("error", { message: "simulated" }));
    told(r.seqs.length);
  };
  return { lost };
}

/** The next batch is never delivered: the worker is ended as it is posted, before any COMMIT. */
function loseNextBatchUnsent(thread: ThreadInside): { lost: Promise<number> } {
  const worker = thread.worker;
  let told: (n: number) => void;
  const lost = new Promise<number>((r) => (told = r));
  worker.postMessage = ((m: unknown) => {
    if (typeof m !== "string" || m.startsWith("?")) return Worker.prototype.postMessage.call(worker, m);
    worker.postMessage = Worker.prototype.postMessage;
    worker.terminate();
    told(JSON.parse(m.slice(0, m.indexOf("\n"))).lengths.length);
  }) as Worker["postMessage"];
  return { lost };
}

describe("a writer thread lost with a batch in flight", () => {
  /** Publishes `n` events at once (one batch as far as the queue gathers them) and their OKs. */
  async function publishAll(c: Client, events: NostrEvent[]) {
    const from = c.frames.length;
    for (const e of events) c.send(["EVENT", e]);
    return Promise.all(events.map((e) => c.next((f) => f[0] === "OK" && f[1] === e.id, 15_000, from)));
  }

  /** OK true, retried while the new writer thread starts (an EVENT meanwhile is answered error:). */
  async function publishRetrying(c: Client, e: NostrEvent): Promise<void> {
    let ok = await c.publish(e);
    for (let i = 0; i < 50 && !ok[2]; i++) {
      expect(ok[3]).toStartWith("error:");
      await Bun.sleep(100);
      ok = await c.publish(e);
    }
    expect(ok.slice(2)).toEqual([true, ""]);
  }

  test.each(["close", "error"] as const)(
    "after its COMMIT (%s): each EVENT is OK true, fanned out once, stored once; a retry is duplicate:",
    async (how) => {
      const relay = await startTestRelay();
      const pub = await Client.connect(relay.url);
      const sub = await Client.connect(relay.url);
      const errors = spyOn(console, "error");
      try {
        const author = signer();
        expect((await pub.publish(author.sign({ kind: 1, content: "before" })))[2]).toBe(true);
        expect((await sub.req("live", { authors: [author.pubkey] })).end).toEqual(["EOSE", "live"]);
        const { lost } = loseNextBatchReply(threadOf(relay), how);
        const events = Array.from({ length: 6 }, (_, i) => author.sign({ kind: 1, content: `during ${i}`, created_at: now() - i }));
        const oks = await publishAll(pub, events);
        expect(await lost).toBeGreaterThan(0);
        for (const ok of oks) expect(ok.slice(2)).toEqual([true, ""]);
        // The subscriber got each exactly once (a fence: an event published after them arrives after them).
        const after = author.sign({ kind: 1, content: "after" });
        await publishRetrying(pub, after);
        await sub.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === after.id);
        const live = sub.eventsFor("live").map((e) => e.id);
        for (const e of events) expect(live.filter((id) => id === e.id)).toHaveLength(1);
        const got = await sub.req("later", { authors: [author.pubkey] });
        for (const e of events) expect(got.events.filter((g) => g.id === e.id)).toHaveLength(1);
        for (const e of events) expect(await rowsWithId(relay, e.id)).toBe(1);
        for (const e of events) expect((await pub.publish(e)).slice(2)).toEqual([true, "duplicate: already have this event"]);
        const lines = errors.mock.calls.map((call: unknown[]) => call.map(String).join(" "));
        const loss = how === "close" ? "writer thread exited" : "writer thread failed: simulated";
        expect(lines.filter((l) => l.startsWith(`error: ${loss}`))).toHaveLength(1);
        // The lost batch is not counted failed (only EVENTs sent while the new thread starts are).
        expect(lines.filter((l) => l.includes(`the ${loss.slice(7)} (`))).toEqual([]);
      } finally {
        errors.mockRestore();
        pub.close();
        sub.close();
        await relay.stop();
      }
    },
    30_000,
  );

  test("before its COMMIT: each EVENT is error:, nothing is fanned out; a retry stores it once", async () => {
    const relay = await startTestRelay();
    const pub = await Client.connect(relay.url);
    const sub = await Client.connect(relay.url);
    const errors = spyOn(console, "error");
    try {
      const author = signer();
      expect((await pub.publish(author.sign({ kind: 1, content: "before" })))[2]).toBe(true);
      expect((await sub.req("live", { authors: [author.pubkey] })).end).toEqual(["EOSE", "live"]);
      const { lost } = loseNextBatchUnsent(threadOf(relay));
      const events = Array.from({ length: 6 }, (_, i) => author.sign({ kind: 1, content: `during ${i}`, created_at: now() - i }));
      const oks = await publishAll(pub, events);
      const dropped = await lost;
      expect(dropped).toBeGreaterThan(0);
      const failed = events.filter((_, i) => oks[i]![2] === false);
      expect(failed.length).toBeGreaterThanOrEqual(dropped);
      for (const e of failed) expect(oks[events.indexOf(e)]![3]).toStartWith("error:");
      for (const e of failed) expect(await rowsWithId(relay, e.id)).toBe(0);
      // Retried: stored once, fanned out once.
      for (const e of failed) await publishRetrying(pub, e);
      const after = author.sign({ kind: 1, content: "after" });
      await publishRetrying(pub, after);
      await sub.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === after.id);
      const live = sub.eventsFor("live").map((e) => e.id);
      for (const e of events) expect(live.filter((id) => id === e.id)).toHaveLength(1);
      const got = await sub.req("later", { authors: [author.pubkey] });
      for (const e of events) expect(got.events.filter((g) => g.id === e.id)).toHaveLength(1);
      for (const e of events) expect(await rowsWithId(relay, e.id)).toBe(1);
    } finally {
      errors.mockRestore();
      pub.close();
      sub.close();
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
    const batches: { size: number; groups: string[]; chars: number; answer: () => void }[] = [];
    const store = {
      writePipeline: 1,
      writeBatch(batch: PendingWrite[]): Promise<WriteOutcome[]> {
        return new Promise((resolve) =>
          batches.push({
            size: batch.length,
            groups: batch.map((w) => w.group ?? ""),
            chars: batch.reduce((n, w) => n + w.json.length, 0),
            answer: () => resolve(batch.map((_, i) => ({ stored: true, seq: i + 1 }))),
          }),
        );
      },
      // No purge work.
      purgeStep: async () => false,
      watchPurges: () => {},
    } as unknown as Store;
    return { store, batches };
  }

  const rules = () => ({}) as never;

  test("past its bound in bytes an EVENT is refused error: at once; what was queued is stored", async () => {
    const { store, batches } = slowStore();
    const q = new WriterQueue(store, rules, 2000, 10_000);
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
    const q = new WriterQueue(store, rules, 2000, 64 * 1024 * 1024);
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

  const from = (group: string, i: number, chars = 100, cost = 1): PendingWrite => ({ ...write(chars, i), group, cost });
  const bounds = (maxChars: number, maxGroupChars: number) => () => ({ maxChars, maxGroupChars });

  test("batches are taken round-robin by address group, by cost: one address's backlog does not delay another's events", async () => {
    const { store, batches } = slowStore();
    const q = new WriterQueue(store, rules, 2000, bounds(1 << 30, 0));
    // The first batch goes at once; then "a" queues 100 heavy writes (50 units each: 5,000 in
    // all, more than two batches), "b" and "c" a light one each, and an import ("") two.
    const first = q.enqueue(from("a", 0, 100, 50));
    await Bun.sleep(5);
    const all = [first, ...Array.from({ length: 100 }, (_, i) => q.enqueue(from("a", i + 1, 100, 50)))];
    all.push(q.enqueue(from("b", 200)), q.enqueue(from("c", 201)), q.enqueue(write(100, 202)), q.enqueue(write(100, 203)));
    batches.shift()!.answer();
    await Bun.sleep(5);
    const next = batches.shift()!;
    // Everyone else's writes in the next batch; "a" takes TURN_COST a turn, so most of its wait.
    expect(next.groups.filter((g) => g !== "a").sort()).toEqual(["", "", "b", "c"]);
    expect(next.groups.filter((g) => g === "a").length).toBeLessThanOrEqual(MAX_BATCH_COST / 50);
    expect(next.groups.filter((g) => g === "a").length).toBeGreaterThan(0);
    next.answer();
    for (let n = 0; n < 10 && q.depth > 0; n++) {
      await Bun.sleep(5);
      batches.shift()?.answer();
    }
    await Bun.sleep(5);
    batches.shift()?.answer();
    expect((await Promise.all(all)).every((o) => o.stored)).toBe(true);
  });

  test("an address group past its share is refused rate-limited:, others are still taken; the whole queue full is error:", async () => {
    const { store, batches } = slowStore();
    const q = new WriterQueue(store, rules, 2000, bounds(10_000, 4_000));
    const a = [q.enqueue(from("a", 0, 2_000)), q.enqueue(from("a", 1, 2_000))];
    expect(await q.enqueue(from("a", 2, 500))).toEqual({
      stored: false,
      duplicate: false,
      refusal: { prefix: "rate-limited", message: "too many of your events are waiting to be stored, try again shortly" },
    });
    const b = [q.enqueue(from("b", 3, 3_000)), q.enqueue(write(2_500, 4))];
    // 9,500 held: 600 more is past the whole queue's bound, from a group under its share too.
    expect(await q.enqueue(from("c", 5, 600))).toMatchObject({ stored: false, refusal: { prefix: "error" } });
    // Without a group (import, sync, stream, an exempt address) there is no share, only the whole bound.
    expect(await q.enqueue(write(600, 6))).toMatchObject({ stored: false, refusal: { prefix: "error" } });
    await Bun.sleep(5);
    for (const x of batches.splice(0)) x.answer();
    expect((await Promise.all([...a, ...b])).every((o) => o.stored)).toBe(true);
    // Answered: the group's room is back.
    const again = q.enqueue(from("a", 7, 4_000));
    await Bun.sleep(5);
    for (const x of batches.splice(0)) x.answer();
    expect((await again).stored).toBe(true);
  });

  test("a batch is cut at MAX_BATCH_COST of write cost as well", async () => {
    const { store, batches } = slowStore();
    const q = new WriterQueue(store, rules, 2000, bounds(1 << 30, 0));
    const heavy = Math.floor(MAX_BATCH_COST / 4) + 1;
    const all = Array.from({ length: 9 }, (_, i) => q.enqueue(from(`g${i % 2}`, i, 100, heavy)));
    for (let n = 0; n < 3; n++) {
      await Bun.sleep(5);
      const b = batches.shift()!;
      expect(b.size).toBe(3);
      b.answer();
    }
    expect((await Promise.all(all)).every((o) => o.stored)).toBe(true);
  });

  test("a purge step that saw nothing to purge does not answer a deletion held while it ran (its purge not done)", async () => {
    // Postgres: a purge step runs beside the batches; one finding nothing awaited answers early.
    const steps: ((more: boolean) => void)[] = [];
    let purges: PurgeWatch | undefined;
    const store = {
      writePipeline: 1,
      writeBatch: (batch: PendingWrite[]): WriteOutcome[] => batch.map((_, i) => ({ stored: true, seq: i + 1, purge: 7 })),
      purgeStep: () => new Promise<boolean>((resolve) => steps.push(resolve)),
      watchPurges: (watch: PurgeWatch) => (purges = watch),
    } as unknown as Store;
    const q = new WriterQueue(store, rules, 2000, 1 << 20);
    // The step of what a previous run left undone is under way...
    while (steps.length === 0) await Bun.sleep(1);
    // ...when a deletion's batch commits and holds its OK for purge 7.
    let answered = false;
    const deletion = q.enqueue(write(100, 1)).then((o) => {
      answered = true;
      return o;
    });
    while (q.holding === 0) await Bun.sleep(1);
    // The step that began before it reports nothing left: purge 7 is not done for that.
    steps.shift()!(false);
    await Bun.sleep(20);
    expect(answered).toBe(false);
    expect(q.holding).toBe(1);
    // Its own step finishes it: then it is answered.
    while (steps.length === 0) await Bun.sleep(1);
    purges!.done([7]);
    steps.shift()!(false);
    expect((await deletion).stored).toBe(true);
    expect(q.holding).toBe(0);
  });
});
