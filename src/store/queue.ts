// Group commit: every write accepted in the same tick goes into one transaction, and each
// caller learns its outcome only after that transaction has committed.
import type { PendingWrite, Store, WriteOutcome, WriteRules } from "./types.ts";

/** One step of deferred deletion between batches: short enough that nobody waits long behind it. */
export const PURGE_STEP_MS = 5;

interface Queued extends PendingWrite {
  resolve: (o: WriteOutcome) => void;
  reject: (e: Error) => void;
}

export class WriterQueue {
  private queue: Queued[] = [];
  private scheduled = false;
  private flushing: Promise<void> = Promise.resolve();
  /** Told each committed batch's size and write+commit time (metrics); set by the relay. */
  onBatch?: (size: number, seconds: number) => void;

  private purgeScheduled = false;
  private purgeRetryMs = 0;

  constructor(
    private readonly store: Store,
    /** Called synchronously right after the commit, for each newly stored event, in commit order. */
    private readonly onStored: (w: PendingWrite, seq: number) => void,
    /** The storage rules in force, read once per batch (so a config reload applies at once). */
    private readonly rules: () => WriteRules,
    private readonly maxBatch = 2000,
  ) {
    if (store.purgeStep) {
      store.onPurge = () => this.purgeSoon();
      this.purgeSoon(); // what a previous run left undone
    }
  }

  /**
   * Big deletions (Store.purgeStep) run in steps of PURGE_STEP_MS, each a task of its own: the
   * event loop serves sockets, and this queue commits its batches, between two steps.
   */
  private purgeSoon(): void {
    if (this.purgeScheduled) return;
    this.purgeScheduled = true;
    setTimeout(() => void this.purgeOnce(), this.purgeRetryMs);
  }

  private async purgeOnce(): Promise<void> {
    this.purgeScheduled = false;
    let more: boolean;
    try {
      more = await this.store.purgeStep!(PURGE_STEP_MS);
      this.purgeRetryMs = 0;
    } catch (e) {
      // A locked database (another process), a lost connection: try again, less often.
      console.error("purge step failed, retrying:", e);
      this.purgeRetryMs = Math.min(Math.max(this.purgeRetryMs * 2, 100), 10_000);
      more = true;
    }
    if (more) this.purgeSoon();
  }

  get depth(): number {
    return this.queue.length;
  }

  enqueue(w: PendingWrite): Promise<WriteOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...w, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => (this.flushing = this.flush()));
      }
    });
  }

  /** Writes everything queued; resolves when the queue is empty. */
  async drain(): Promise<void> {
    await this.flushing;
    while (this.queue.length > 0) await (this.flushing = this.flush());
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      let outcomes: WriteOutcome[];
      const started = performance.now();
      try {
        outcomes = await this.store.writeBatch(batch, this.rules());
        this.onBatch?.(batch.length, (performance.now() - started) / 1000);
      } catch (e) {
        const err = e instanceof Error ? e : new Error(String(e));
        for (const q of batch) q.reject(err);
        continue;
      }
      batch.forEach((q, i) => {
        const o = outcomes[i]!;
        if (o.stored) this.onStored(q, o.seq);
      });
      batch.forEach((q, i) => q.resolve(outcomes[i]!));
    }
  }
}
