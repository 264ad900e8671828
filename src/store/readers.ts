// The reader pool: each worker runs one job at a time. Jobs wait in per-owner queues served
// round-robin, so one connection's burst of heavy REQs only delays that connection; a job that
// runs past the time limit gets its worker terminated and replaced, so no query runs unbounded.
import { workerUrl } from "../workers.ts";

export type ReadKind = "query" | "count" | "neg";

/** Who a read is for (a connection) and how its cost is reported. */
export interface ReadContext {
  owner: object;
  /** Called with the worker time the job took, in ms. */
  onCost?: (ms: number) => void;
}

export class QueryTimeoutError extends Error {}
/** The store is shutting down: not a failure worth logging. */
export class StoreClosedError extends Error {}
export class ReaderBusyError extends Error {}

interface Job {
  op: ReadKind;
  job: unknown;
  ctx?: ReadContext;
  resolve: (r: unknown) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  job?: Job;
  started: number;
  timer?: ReturnType<typeof setTimeout>;
}

export interface ReaderPoolOptions {
  path: string;
  size: number;
  /** A job running longer than this is abandoned and its worker replaced. */
  timeoutMs: number;
  /** Most jobs waiting in all queues together. */
  maxQueued: number;
}

const ANONYMOUS = {};

export class ReaderPool {
  private readonly slots: Slot[] = [];
  /** Waiting jobs by owner; Map order is the round-robin order. */
  private readonly queues = new Map<object, Job[]>();
  private queued = 0;
  private closing = false;

  constructor(private readonly opts: ReaderPoolOptions) {
    for (let i = 0; i < opts.size; i++) this.slots.push(this.spawn());
  }

  run<T>(op: ReadKind, job: unknown, ctx?: ReadContext): Promise<T> {
    if (this.closing) return Promise.reject(new StoreClosedError("store closed"));
    if (this.queued >= this.opts.maxQueued) return Promise.reject(new ReaderBusyError("too many queries waiting"));
    return new Promise<T>((resolve, reject) => {
      const owner = ctx?.owner ?? ANONYMOUS;
      let q = this.queues.get(owner);
      if (!q) this.queues.set(owner, (q = []));
      q.push({ op, job, ctx, resolve: resolve as (r: unknown) => void, reject });
      this.queued++;
      this.dispatch();
    });
  }

  /** Starts waiting jobs on idle workers, taking owners in turn. */
  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.job || this.queued === 0) continue;
      const [owner, q] = this.queues.entries().next().value!;
      const job = q.shift()!;
      this.queued--;
      this.queues.delete(owner);
      if (q.length > 0) this.queues.set(owner, q); // to the back of the line
      slot.job = job;
      slot.started = performance.now();
      slot.timer = setTimeout(() => this.timeout(slot), this.opts.timeoutMs);
      slot.worker.postMessage({ n: 0, op: job.op, job: job.job });
    }
  }

  private spawn(): Slot {
    const worker = new Worker(workerUrl("./store/reader-worker.ts"));
    worker.postMessage({ open: this.opts.path });
    const slot: Slot = { worker, started: 0 };
    worker.onmessage = (msg: MessageEvent) => {
      if (msg.data.closed) return;
      const job = slot.job;
      clearTimeout(slot.timer);
      slot.job = undefined;
      if (job) {
        job.ctx?.onCost?.(performance.now() - slot.started);
        const { result, error } = msg.data as { result?: unknown; error?: string };
        if (error !== undefined) job.reject(new Error(error));
        else job.resolve(result);
      }
      this.dispatch();
    };
    worker.onerror = (e) => {
      console.error(`query worker failed: ${e.message}`);
      process.exit(70);
    };
    worker.unref();
    return slot;
  }

  private timeout(slot: Slot): void {
    const job = slot.job;
    if (!job) return;
    slot.worker.terminate();
    const i = this.slots.indexOf(slot);
    this.slots[i] = this.spawn();
    job.ctx?.onCost?.(this.opts.timeoutMs);
    job.reject(new QueryTimeoutError(`query ran longer than ${this.opts.timeoutMs} ms`));
    this.dispatch();
  }

  /** Asks every worker to close its connection, waits (bounded), then terminates them. */
  async close(): Promise<void> {
    this.closing = true;
    for (const q of this.queues.values()) for (const j of q) j.reject(new StoreClosedError("store closed"));
    this.queues.clear();
    this.queued = 0;
    const closed = this.slots.map(
      (s) =>
        new Promise<void>((resolve) => {
          const prev = s.worker.onmessage;
          s.worker.onmessage = (msg: MessageEvent) => (msg.data.closed ? resolve() : prev?.call(s.worker, msg));
        }),
    );
    for (const s of this.slots) s.worker.postMessage({ close: true });
    await Promise.race([Promise.all(closed), Bun.sleep(2000)]);
    for (const s of this.slots) {
      clearTimeout(s.timer);
      s.worker.terminate();
      s.job?.reject(new StoreClosedError("store closed"));
    }
  }
}
