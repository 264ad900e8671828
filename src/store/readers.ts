// The reader pool: each worker runs one job at a time. Jobs wait in per-owner queues served
// round-robin, and one owner (a connection) may hold at most all but one worker, so a burst of
// heavy REQs only delays the connection that sent it. A job running past the time limit is
// answered with QueryTimeoutError at once; SQLite cannot be interrupted from here, so its worker
// finishes the statement and then returns to the pool (no extra threads pile up).
import { workerUrl } from "../workers.ts";

export type ReadKind = "query" | "count" | "neg";

/** Who a read is for (a connection) and how its cost is reported. */
export interface ReadContext {
  owner: object;
  /** Called with the worker time the job took, in ms. */
  onCost?: (ms: number) => void;
}

export class QueryTimeoutError extends Error {}
export class ReaderBusyError extends Error {}
/** The store is shutting down: not a failure worth logging. */
export class StoreClosedError extends Error {}

interface Job {
  op: ReadKind;
  job: unknown;
  owner: object;
  ctx?: ReadContext;
  /** Settles the caller's promise; later calls are ignored (a job answered by its timeout). */
  settle?: (err: Error | undefined, result?: unknown) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job?: Job;
  started: number;
  timer?: ReturnType<typeof setTimeout>;
}

export interface ReaderPoolOptions {
  path: string;
  size: number;
  /** A job running longer than this is answered with QueryTimeoutError. */
  timeoutMs: number;
  /** Most jobs waiting in all queues together, and per owner. */
  maxQueued: number;
  maxQueuedPerOwner: number;
}

const ANONYMOUS = {};

export class ReaderPool {
  private slots: Slot[] = [];
  /** Waiting jobs by owner; Map order is the round-robin order. */
  private readonly queues = new Map<object, Job[]>();
  private readonly running = new Map<object, number>();
  private queued = 0;
  private closing = false;

  constructor(private readonly opts: ReaderPoolOptions) {
    // Every worker (and its database connection) starts now and runs until close(): a thread
    // started later, when the open-files limit may be reached, would end the process (Bun treats
    // that failure as fatal).
    for (let i = 0; i < opts.size; i++) this.slots.push(this.spawn());
  }

  /** Worker threads running now. */
  get threads(): number {
    return this.slots.length;
  }

  /** Resolves once every worker has opened its database connection. */
  async ready(): Promise<void> {
    while (this.slots.some((s) => !s.ready)) await Bun.sleep(5);
  }

  run<T>(op: ReadKind, job: unknown, ctx?: ReadContext): Promise<T> {
    if (this.closing) return Promise.reject(new StoreClosedError("store closed"));
    const owner = ctx?.owner ?? ANONYMOUS;
    let q = this.queues.get(owner);
    if (this.queued >= this.opts.maxQueued || (q?.length ?? 0) >= this.opts.maxQueuedPerOwner)
      return Promise.reject(new ReaderBusyError("too many queries waiting"));
    return new Promise<T>((resolve, reject) => {
      if (!q) this.queues.set(owner, (q = []));
      let done = false;
      const settle = (err: Error | undefined, result?: unknown) => {
        if (done) return;
        done = true;
        if (err) reject(err);
        else resolve(result as T);
      };
      q.push({ op, job, owner, ctx, settle });
      this.queued++;
      this.dispatch();
    });
  }

  /** Drops the waiting jobs of an owner that went away (a closed connection). */
  cancel(owner: object): void {
    const q = this.queues.get(owner);
    if (!q) return;
    this.queues.delete(owner);
    this.queued -= q.length;
    for (const j of q) j.settle?.(new StoreClosedError("connection closed"));
  }

  /** Starts waiting jobs on idle workers, taking owners in turn. */
  private dispatch(): void {
    const perOwner = Math.max(1, this.opts.size - 1);
    const starting = this.slots.reduce((n, s) => n + (s.ready ? 0 : 1), 0);
    const idle = this.slots.reduce((n, s) => n + (s.ready && !s.job ? 1 : 0), 0);
    if (this.queued > idle + starting && this.slots.length < this.opts.size) this.slots.push(this.spawn());
    for (const slot of this.slots) {
      if (!slot.ready || slot.job || this.queued === 0) continue;
      const job = this.next(perOwner);
      if (!job) return;
      slot.job = job;
      slot.started = performance.now();
      this.running.set(job.owner, (this.running.get(job.owner) ?? 0) + 1);
      slot.timer = setTimeout(() => job.settle?.(new QueryTimeoutError(`query ran longer than ${this.opts.timeoutMs} ms`)), this.opts.timeoutMs);
      slot.worker.postMessage({ n: 0, op: job.op, job: job.job });
    }
  }

  /** The first owner in line that is not already using its share of workers. */
  private next(perOwner: number): Job | undefined {
    for (const [owner, q] of this.queues) {
      if ((this.running.get(owner) ?? 0) >= perOwner) continue;
      const job = q.shift()!;
      this.queued--;
      this.queues.delete(owner);
      if (q.length > 0) this.queues.set(owner, q); // to the back of the line
      return job;
    }
    return undefined;
  }

  private spawn(): Slot {
    const worker = new Worker(workerUrl("./store/reader-worker.ts"));
    worker.postMessage({ open: this.opts.path });
    const slot: Slot = { worker, ready: false, started: 0 };
    worker.onmessage = (msg: MessageEvent) => {
      const data = msg.data as { ready?: true; closed?: true; result?: unknown; error?: string };
      if (data.closed) return;
      if (data.ready) {
        slot.ready = true; // the connection is open: the first query does not pay for start-up
        return this.dispatch();
      }
      const job = slot.job;
      clearTimeout(slot.timer);
      slot.job = undefined;
      if (job) {
        const left = (this.running.get(job.owner) ?? 1) - 1;
        if (left > 0) this.running.set(job.owner, left);
        else this.running.delete(job.owner);
        job.ctx?.onCost?.(performance.now() - slot.started);
        job.settle?.(data.error !== undefined ? new Error(data.error) : undefined, data.result);
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

  /** Asks every worker to close its connection, waits (bounded), then terminates them. */
  async close(): Promise<void> {
    this.closing = true;
    for (const owner of [...this.queues.keys()]) this.cancel(owner);
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
      s.job?.settle?.(new StoreClosedError("store closed"));
    }
  }
}
