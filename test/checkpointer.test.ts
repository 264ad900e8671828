// The checkpointer thread (store/sqlite/checkpointer.ts): the WAL's committed pages reach the
// database file without the writer thread copying them, and shutdown still folds the WAL in.
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHECKPOINT_EVERY_MS, SOLO_AUTOCHECKPOINT, WRITER_AUTOCHECKPOINT } from "../src/store/sqlite/checkpointer.ts";
import type { WriterThread } from "../src/store/sqlite/writer-thread.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { now, signer, storeEvents } from "./helpers.ts";

/** The WAL's frames and how many of them are in the database file, as another connection sees them (no copying: busy_timeout 0 and a lock it cannot get leave it be). */
function walState(path: string): { log: number; checkpointed: number } {
  const db = new Database(path, { readonly: true });
  try {
    // A read of the WAL index header: log = frames in the WAL, checkpointed = frames copied.
    const r = db.query("PRAGMA wal_checkpoint(NOOP)").get() as { log: number; checkpointed: number } | null;
    return { log: r?.log ?? -1, checkpointed: r?.checkpointed ?? -1 };
  } finally {
    db.close();
  }
}

test("committed batches are copied into the database file by the checkpointer, not left in the WAL", async () => {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-ckpt-"));
  const path = join(dir, "bunstr.sqlite");
  const store = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1, writerThread: true });
  try {
    const author = signer();
    for (let b = 0; b < 5; b++)
      await storeEvents(
        store,
        Array.from({ length: 200 }, (_, i) =>
          author.sign({ kind: 1, content: `batch ${b} event ${i} ${"x".repeat(200)}`, created_at: now() - i }),
        ),
      );
    // Far below the writer's own threshold: only another connection copies these pages.
    let state = walState(path);
    for (let i = 0; i < 50 && !(state.log > 0 && state.checkpointed === state.log); i++) {
      await Bun.sleep(CHECKPOINT_EVERY_MS);
      state = walState(path);
    }
    expect(state.log).toBeGreaterThan(100);
    expect(state.checkpointed).toBe(state.log);
  } finally {
    await store.close();
  }
  // Shutdown folds the WAL in and truncates it, with the checkpointer closed first.
  expect(!existsSync(`${path}-wal`) || statSync(`${path}-wal`).size === 0).toBe(true);
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

test("when the checkpointer thread is lost, the writer checkpoints alone at SOLO_AUTOCHECKPOINT pages, also in a writer thread started after", async () => {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-ckpt-"));
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1, writerThread: true });
  const thread = (store as unknown as { writer: WriterThread }).writer;
  const inner = { thread, checkpointer: (thread as unknown as { checkpointer: { worker?: Worker } }).checkpointer };
  const walPages = () => inner.thread.call<number>({ call: "walPages" });
  try {
    await store.ready();
    expect(await walPages()).toBe(WRITER_AUTOCHECKPOINT);
    inner.checkpointer.worker!.terminate(); // as if it had died: its close event is the loss
    for (let i = 0; i < 100 && (await walPages()) !== SOLO_AUTOCHECKPOINT; i++) await Bun.sleep(20);
    expect(await walPages()).toBe(SOLO_AUTOCHECKPOINT);
    // A writer thread that replaces a lost one opens with the same threshold.
    (inner.thread as unknown as { worker: Worker }).worker.terminate();
    for (let i = 0; i < 100; i++) {
      const pages = await walPages().catch(() => undefined); // refused while it restarts
      if (pages !== undefined) break;
      await Bun.sleep(20);
    }
    await inner.thread.ready();
    expect(await walPages()).toBe(SOLO_AUTOCHECKPOINT);
    // And it still stores.
    const author = signer();
    const [outcome] = await storeEvents(store, [author.sign({ kind: 1, content: "after both losses", created_at: now() })]);
    expect(outcome?.stored).toBe(true);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
