// The reader pool: worker threads that run reads (REQ, COUNT, NEG-OPEN) in time slices.
//
// A read is a job the worker advances a few milliseconds at a time (store/query.ts walks the
// indexes in bounded chunks). After each slice it comes back here: its time is charged to the
// caller, it may be stopped (out of time, out of budget, the connection gone), and otherwise
// it goes to the back of the line. The line is served round-robin by client group (an IP), then
// by connection, and a group takes more than all but one worker only when no other group is
// waiting, so a heavy query only delays the client that sent it: everyone else waits at most the
// two slices a busy worker holds (SLICES_AHEAD). A job keeps its state in the worker that started
// it (its cursors), so it resumes there. Workers start with the pool and stay: no
// thread (and no file descriptor) has to be found later, under load.
import { log } from "../../log.ts";
import { workerUrl } from "../../workers.ts";
import { QueryTimeoutError, ReaderBusyError, ReadStoppedError, StoreClosedError, type ReadContext, type RowBatch } from "../types.ts";
import type { ReadKind, RunOptions, SqliteReaderPort } from "./ports.ts";

/** What a worker sends back after a slice. */
interface SliceReply {
  id: number;
  ms: number;
  rows?: string[];
  done?: boolean;
  result?: unknown;
  error?: string;
}

interface Job {
  id: number;
  op: ReadKind;
  job: unknown;
  ctx?: ReadContext;
  owner: object;
  group: string;
  /** The worker holding the job's state, once it has run a slice. */
  slot?: Slot;
  started: boolean;
  /** Its first slice goes before the other jobs of its group (lanes.ts: a point lookup). */
  ahead: boolean;
  /** Told the worker its first slice runs on. */
  onStart?: (worker: object) => void;
  /** Buffers of the job moved (not copied) to the worker with it. */
  transfer?: ArrayBuffer[];
  /** Worker ms used so far. */
  used: number;
  ended: boolean;
  /** Handles a slice's reply (or a failure); decides whether the job goes on. */
  onSlice(reply: SliceReply): void;
  fail(err: Error): void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  /** Slices posted to the worker and not answered yet, in the order it answers them. */
  jobs: Job[];
  /** Jobs whose state this worker holds. */
  held: Set<Job>;
}

interface ReaderPoolOptions {
  path: string;
  size: number;
  /** A job that has used more worker time than this is stopped with QueryTimeoutError. */
  timeoutMs: number;
  /** Most jobs waiting in all queues together, and per owner. */
  maxQueued: number;
  maxQueuedPerOwner: number;
}

const ANONYMOUS = {};

/** The first owner of a group whose next job is a point lookup not started yet, as a line of one. */
function aheadIn(owners: Map<object, Job[]>): [object, Job[]][] | undefined {
  for (const entry of owners) {
    const j = entry[1][0];
    if (j?.ahead && !j.started) return [entry];
  }
  return undefined;
}
/** Jobs made of strings and numbers only, posted as JSON text (see dispatch). */
const PLAIN_JOBS = new Set<ReadKind>(["query", "count", "neg"]);

/**
 * A slice's rows as one string (reader-worker.ts encodeRows: "id ms done len len ...\n" and the
 * rows), cut into substrings. The lengths are read digit by digit: splitting the head into a
 * string per row and parsing each took this thread 5.7-6.3 us per reply of 60 rows, this 1.6.
 */
function decodeRows(text: string): SliceReply {
  const nl = text.indexOf("\n");
  const a = text.indexOf(" ");
  const b = text.indexOf(" ", a + 1);
  const rows: string[] = [];
  let at = nl + 1;
  for (let i = b + 2; i < nl; ) {
    let n = 0;
    for (let c = text.charCodeAt(++i); c >= 48; c = text.charCodeAt(++i)) n = n * 10 + c - 48;
    rows.push(text.slice(at, (at += n)));
  }
  return { id: Number(text.slice(0, a)), ms: Number(text.slice(a + 1, b)), done: text.charCodeAt(b + 1) === 49, rows };
}
/**
 * Slices a worker is given at once: the one it runs and the next, which it starts as soon as it
 * has posted the first's reply instead of sleeping until this thread answers it with another.
 * A job that arrives meanwhile waits at most the slices already given (SLICE_MS each).
 */
const SLICES_AHEAD = 2;
/** Respawns of crashed workers allowed per minute before reads fail instead. */
const MAX_RESPAWNS = 10;

export class ReaderPool implements SqliteReaderPort {
  private readonly slots: Slot[] = [];
  /** Jobs ready for a slice, by group and then by owner; Map order is the round-robin order of each. */
  private readonly queues = new Map<string, Map<object, Job[]>>();
  private readonly running = new Map<string, number>();
  private readonly byOwner = new Map<object, Set<Job>>();
  private queued = 0;
  private nextId = 1;
  private closing = false;
  private respawns: number[] = [];

  constructor(private readonly opts: ReaderPoolOptions) {
    // Every worker (and its database connection) starts now and runs until close(): a thread
    // started later, when the open-files limit may be reached, would end the process (Bun treats
    // that failure as fatal).
    for (let i = 0; i < opts.size; i++) this.slots.push(this.spawn());
  }

  /** Resolves once every worker has opened its database connection. */
  async ready(): Promise<void> {
    while (this.slots.some((s) => !s.ready)) await Bun.sleep(5);
  }

  /** Worker threads running now. */
  get threads(): number {
    return this.slots.length;
  }

  /** A read with one result (COUNT, NEG-OPEN, NEG-MSG). */
  run<T>(op: Exclude<ReadKind, "query">, job: unknown, ctx?: ReadContext, opts: RunOptions = {}): Promise<T> {
    const { pin, onWorker, transfer } = opts;
    if (pin && !this.slots.includes(pin as Slot)) {
      ctx?.onEnd?.(0); // the read never ran: its reservation goes back to the budget
      return Promise.reject(new StoreClosedError("the query worker of this session is gone"));
    }
    return new Promise<T>((resolve, reject) => {
      const j = this.add(op, job, ctx, reject);
      if (!j) return;
      if (pin) j.slot = pin as Slot;
      j.onStart = onWorker;
      j.transfer = transfer;
      j.onSlice = (reply) => {
        if (reply.done) {
          this.end(j);
          if (reply.error !== undefined) reject(new Error(reply.error));
          else resolve(reply.result as T);
        } else this.enqueue(j);
      };
      this.enqueue(j);
    });
  }

  /**
   * A REQ's events in batches. The job runs only while the caller asks for the next batch, so a
   * caller that waits for its socket to drain holds the read where it is (backpressure). Ending
   * the iteration early (break, return) drops the job.
   */
  stream(job: unknown, ctx?: ReadContext, ahead = false): AsyncIterableIterator<RowBatch> {
    let wake: { resolve(r: IteratorResult<RowBatch>): void; reject(e: Error): void } | undefined;
    let finished = false;
    let failure: Error | undefined;
    const j = this.add("query", job, ctx, (err) => {
      failure = err;
      wake?.reject(err);
      wake = undefined;
    });
    if (j) j.ahead = ahead;
    if (j)
      j.onSlice = (reply) => {
        if (reply.error !== undefined) return j.fail(new Error(reply.error));
        if (reply.done) {
          finished = true;
          this.end(j);
        }
        if (reply.rows?.length || reply.done) {
          const rows: RowBatch | undefined = reply.rows;
          if (rows && reply.done) rows.last = true;
          wake?.resolve(rows?.length ? { value: rows, done: false } : { value: undefined, done: true });
          wake = undefined;
        } else this.enqueue(j); // a slice that only read keys: straight back in line
      };
    const iterator: AsyncIterableIterator<RowBatch> = {
      next: () => {
        if (failure) return Promise.reject(failure);
        if (finished || !j) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          wake = { resolve, reject };
          this.enqueue(j);
        });
      },
      return: () => {
        if (j && !j.ended) this.drop(j);
        finished = true;
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** Forgets a NIP-77 session kept in a worker. */
  closeSession(worker: object, key: number): void {
    const slot = worker as Slot;
    if (this.slots.includes(slot)) slot.worker.postMessage({ negclose: key });
  }

  /** Drops every job of an owner that went away (a closed connection). */
  cancel(owner: object): void {
    for (const j of [...(this.byOwner.get(owner) ?? [])]) j.fail(new StoreClosedError("connection closed"));
  }

  private add(op: ReadKind, job: unknown, ctx: ReadContext | undefined, reject: (e: Error) => void): Job | undefined {
    // A read refused here never runs: what it reserved goes back to the budget.
    const refuse = (err: Error) => (ctx?.onEnd?.(0), reject(err));
    if (this.closing) return void refuse(new StoreClosedError("store closed"));
    const owner = ctx?.owner ?? ANONYMOUS;
    const mine = this.byOwner.get(owner);
    if (this.queued >= this.opts.maxQueued || (mine?.size ?? 0) >= this.opts.maxQueuedPerOwner)
      return void refuse(new ReaderBusyError("too many queries waiting"));
    const j: Job = {
      id: this.nextId++,
      op,
      job,
      ctx,
      owner,
      group: ctx?.group ?? "",
      started: false,
      ahead: false,
      used: 0,
      ended: false,
      onSlice: () => {},
      fail: (err) => {
        if (j.ended) return;
        this.drop(j);
        reject(err);
      },
    };
    if (mine) mine.add(j);
    else this.byOwner.set(owner, new Set([j]));
    return j;
  }

  /** Puts a job in its group's line for its next slice. */
  private enqueue(j: Job): void {
    if (j.ended) return;
    let g = this.queues.get(j.group);
    if (!g) this.queues.set(j.group, (g = new Map()));
    let q = g.get(j.owner);
    if (!q) g.set(j.owner, (q = []));
    q.push(j);
    this.queued++;
    this.dispatch();
  }

  /** The job is over: forget it here and in its worker. */
  private end(j: Job): void {
    if (j.ended) return;
    j.ended = true;
    const mine = this.byOwner.get(j.owner);
    mine?.delete(j);
    if (mine?.size === 0) this.byOwner.delete(j.owner);
    const g = this.queues.get(j.group);
    const q = g?.get(j.owner);
    const at = q?.indexOf(j) ?? -1;
    if (at >= 0) {
      q!.splice(at, 1);
      this.queued--;
      if (q!.length === 0) g!.delete(j.owner);
      if (g!.size === 0) this.queues.delete(j.group);
    }
    if (j.slot) j.slot.held.delete(j);
    j.ctx?.onEnd?.(j.used);
  }

  /** Ends a job before its worker finished it: the worker frees its state. */
  private drop(j: Job): void {
    const slot = j.slot;
    this.end(j);
    // A slice in progress is answered first; its reply finds the job ended and drops it then.
    if (slot && !slot.jobs.includes(j)) slot.worker.postMessage({ drop: j.id });
  }

  /**
   * Starts a slice on every idle worker, taking groups in turn; then gives each busy worker its
   * next slice ahead (SLICES_AHEAD), so that it goes on without waiting for this thread.
   */
  private dispatch(): void {
    for (let depth = 1; depth <= SLICES_AHEAD && this.queued > 0; depth++)
      for (const slot of this.slots) if (slot.ready && slot.jobs.length < depth && this.queued > 0) this.post(slot);
  }

  /** Gives the worker the next job in line it can run, if any. */
  private post(slot: Slot): void {
    const perGroup = Math.max(1, this.slots.length - 1);
    // Work-conserving: a group over its share still gets an idle worker nobody else wants
    // (behind a proxy without remote_ip_header every client is one group). A newcomer then
    // waits at most the slices in progress.
    const j = this.next(slot, perGroup) ?? this.next(slot, Number.POSITIVE_INFINITY);
    if (!j) return;
    slot.jobs.push(j);
    this.running.set(j.group, (this.running.get(j.group) ?? 0) + 1);
    if (!j.started) {
      j.started = true;
      j.slot = slot;
      slot.held.add(j);
      j.onStart?.(slot);
      // A job of plain values goes as JSON text: Bun's structured clone of a filter object (50
      // authors) costs this thread several times what stringifying it and cloning a string do.
      if (j.transfer?.length || !PLAIN_JOBS.has(j.op)) slot.worker.postMessage({ id: j.id, op: j.op, job: j.job }, j.transfer ?? []);
      else slot.worker.postMessage(JSON.stringify({ id: j.id, op: j.op, job: j.job }));
    } else slot.worker.postMessage(j.id);
  }

  /**
   * The first group in line that is under its share of workers, and in it the first owner with
   * a point lookup not started yet (lanes.ts), else the first owner with a job this worker can
   * run; both go to the back of their lines.
   */
  private next(slot: Slot, perGroup: number): Job | undefined {
    for (const [group, owners] of this.queues) {
      if ((this.running.get(group) ?? 0) >= perGroup) continue;
      const first = aheadIn(owners) ?? owners;
      for (const [owner, q] of first) {
        const at = q.findIndex((j) => !j.slot || j.slot === slot);
        if (at < 0) continue;
        const [j] = q.splice(at, 1);
        this.queued--;
        owners.delete(owner);
        if (q.length > 0) owners.set(owner, q);
        this.queues.delete(group);
        if (owners.size > 0) this.queues.set(group, owners);
        return j;
      }
    }
    return undefined;
  }

  private onReply(slot: Slot, reply: SliceReply): void {
    const j = slot.jobs.shift();
    if (j) {
      const left = (this.running.get(j.group) ?? 1) - 1;
      if (left > 0) this.running.set(j.group, left);
      else this.running.delete(j.group);
    }
    if (j && j.id === reply.id && !j.ended) {
      j.used += reply.ms;
      j.ctx?.onCost?.(reply.ms);
      const stop = reply.done ? undefined : j.used > this.opts.timeoutMs ? "timeout" : j.ctx?.stop?.();
      if (stop === "timeout") j.fail(new QueryTimeoutError(`query ran longer than ${this.opts.timeoutMs} ms`));
      else if (stop !== undefined) j.fail(new ReadStoppedError(stop));
      else j.onSlice(reply);
    } else if (j && !reply.done) slot.worker.postMessage({ drop: reply.id }); // dropped meanwhile
    this.dispatch();
  }

  private spawn(): Slot {
    const worker = new Worker(workerUrl("./store/sqlite/reader-worker.ts"));
    worker.postMessage({ open: this.opts.path });
    const slot: Slot = { worker, ready: false, jobs: [], held: new Set() };
    worker.onmessage = (msg: MessageEvent) => {
      if (typeof msg.data === "string") return this.onReply(slot, decodeRows(msg.data));
      const data = msg.data as SliceReply & { ready?: true; closed?: true };
      if (data.closed) return;
      if (data.ready) {
        slot.ready = true; // the connection is open: the first query does not pay for start-up
        return this.dispatch();
      }
      this.onReply(slot, data);
    };
    worker.onerror = (e) => {
      e.preventDefault?.();
      log.error(`query worker failed: ${e.message}`);
      this.replace(slot);
    };
    worker.unref();
    return slot;
  }

  /** A worker died: its jobs fail, and a new one takes its place (a bounded number of times). */
  private replace(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i < 0) return;
    slot.worker.terminate();
    const lost = [...slot.held];
    for (const j of slot.jobs) {
      lost.push(j);
      const left = (this.running.get(j.group) ?? 1) - 1;
      if (left > 0) this.running.set(j.group, left);
      else this.running.delete(j.group);
    }
    slot.jobs = [];
    // Jobs waiting for this worker (a NIP-77 session's) cannot run anywhere else.
    for (const owners of this.queues.values()) for (const q of owners.values()) for (const j of q) if (j.slot === slot) lost.push(j);
    for (const j of lost) j.fail(new Error("the query worker failed"));
    const now = Date.now();
    this.respawns = this.respawns.filter((t) => now - t < 60_000);
    if (this.closing || this.respawns.length >= MAX_RESPAWNS) {
      this.slots.splice(i, 1);
      if (this.slots.length === 0) log.error("every query worker failed: reads are refused until the relay restarts");
      return;
    }
    this.respawns.push(now);
    try {
      this.slots[i] = this.spawn();
    } catch (err) {
      this.slots.splice(i, 1);
      log.error("could not start a query worker:", err);
    }
  }

  /** Asks every worker to close its connection, waits (bounded), then terminates them. */
  async close(): Promise<void> {
    this.closing = true;
    for (const owner of [...this.byOwner.keys()]) this.cancel(owner);
    const closed = this.slots.map(
      (s) =>
        new Promise<void>((resolve) => {
          const prev = s.worker.onmessage;
          s.worker.onmessage = (msg: MessageEvent) => (msg.data.closed ? resolve() : prev?.call(s.worker, msg));
        }),
    );
    for (const s of this.slots) s.worker.postMessage({ close: true });
    await Promise.race([Promise.all(closed), Bun.sleep(2000)]);
    for (const s of this.slots) s.worker.terminate();
  }
}
