// The main thread's side of the checkpointer thread (checkpoint-worker.ts).
//
// With WAL, every committed page is written twice: into the WAL by the commit, then into the
// database file by a checkpoint. SQLite runs the checkpoint in the connection whose commit took
// the WAL past wal_autocheckpoint pages, so the writer thread, the relay's serial stage for
// EVENTs, spent its time copying pages and waiting on fsync (11% of its wall time waiting for the
// disk's flush alone, bench/RESULTS.md 2026-12-05). Here another connection, in a thread of its
// own, copies what was committed, at most every CHECKPOINT_EVERY_MS while events are written.
//
// It cannot restart the WAL: SQLite starts the WAL over from its beginning only when a write
// transaction begins with every frame copied, which under a steady stream of batches it never is
// when this thread's copy ends. The writer's own checkpoint at WRITER_AUTOCHECKPOINT pages does
// that: it then copies only what came in since this thread's last pass, and the next batch
// starts the WAL over. So the WAL stays near WRITER_AUTOCHECKPOINT pages (80 MB with 4 KB pages)
// while this thread runs. Should it fail, the writer copies everything itself again, at
// SOLO_AUTOCHECKPOINT pages (40 MB) as before this thread (writer-thread.ts sets it through onLost).
import { log } from "../../log.ts";
import { workerUrl } from "../../workers.ts";

export type CheckpointRequest = { open: string; synchronous: "normal" | "full" } | "checkpoint" | "close";
export type CheckpointReply = "ready" | "done" | "closed" | { error: string; code?: string };

/** A checkpoint starts at most this often while batches are committed. Exported for tests (test/checkpointer.test.ts). */
export const CHECKPOINT_EVERY_MS = 100;
/** The writer connection's wal_autocheckpoint (pages) while a checkpointer runs beside it. */
export const WRITER_AUTOCHECKPOINT = 20_000;
/** ... and once none does: each of its checkpoints then copies the whole WAL, so half the size. */
export const SOLO_AUTOCHECKPOINT = 10_000;
/** The size of a WAL file of `frames` frames: a 32-byte header, then a 24-byte header and a page per frame. */
export const walBytes = (frames: number, pageSize: number): number => 32 + frames * (24 + pageSize);
/** How long close() waits for a checkpoint under way before it ends the thread all the same. */
const CLOSE_WAIT_MS = 10_000;

export class Checkpointer {
  private worker: Worker | undefined;
  /** A checkpoint has been asked for and not answered. */
  private running = false;
  /** Batches were committed since the checkpoint under way started. */
  private again = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastStart = Number.NEGATIVE_INFINITY;
  private loggedError = false;
  private closed?: () => void;
  /** Told once when the thread is gone for good (not at close): the writer checkpoints alone. */
  onLost?: () => void;

  constructor(path: string, synchronous: "normal" | "full") {
    const worker = new Worker(workerUrl("./store/sqlite/checkpoint-worker.ts"));
    worker.onmessage = (msg: MessageEvent) => this.onReply(msg.data as CheckpointReply);
    worker.onerror = (e) => {
      e.preventDefault?.();
      this.lost(`failed: ${e.message}`);
    };
    worker.addEventListener("close", () => this.lost("exited"));
    worker.postMessage({ open: path, synchronous } satisfies CheckpointRequest);
    this.worker = worker;
  }

  /** A batch was committed: a checkpoint soon, at most one at a time and one per CHECKPOINT_EVERY_MS. */
  committed(): void {
    if (!this.worker || this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) return;
    const wait = Math.max(0, this.lastStart + CHECKPOINT_EVERY_MS - performance.now());
    this.timer = setTimeout(() => this.start(), wait);
  }

  private start(): void {
    this.timer = undefined;
    if (!this.worker || this.closed) return;
    this.running = true;
    this.again = false;
    this.lastStart = performance.now();
    this.worker.postMessage("checkpoint" satisfies CheckpointRequest);
  }

  private onReply(r: CheckpointReply): void {
    if (r === "closed") return this.closed?.();
    // Once: the writer's own checkpoints carry on. A full disk is not said here: the writer's
    // failed batches say it (store/queue.ts, one line per kind of failure per minute).
    if (typeof r === "object" && r.code !== "SQLITE_FULL" && !this.loggedError) {
      this.loggedError = true;
      log.error(`checkpointer: ${r.error}; the writer thread's own checkpoints go on`);
    }
    if (r === "ready") return;
    this.running = false;
    if (this.again) this.committed();
  }

  /** The thread is gone: the writer's own checkpoints carry on (no new thread: see readers.ts). */
  private lost(how: string): void {
    const worker = this.worker;
    if (!worker) return;
    this.worker = undefined;
    clearTimeout(this.timer);
    // An error event can leave the thread running: end it, or it could keep the process alive.
    worker.terminate();
    if (this.closed) return this.closed(); // closing anyway
    log.error(`checkpointer thread ${how}; the writer thread checkpoints the WAL itself from now on`);
    this.onLost?.();
  }

  /** Waits for a checkpoint under way, then closes its connection and ends the thread. */
  async close(): Promise<void> {
    const worker = this.worker;
    clearTimeout(this.timer);
    if (!worker || this.closed) return;
    const done = new Promise<void>((resolve) => (this.closed = resolve));
    worker.postMessage("close" satisfies CheckpointRequest);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([done, new Promise((r) => (timer = setTimeout(r, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
    this.worker = undefined;
    worker.terminate();
  }
}
