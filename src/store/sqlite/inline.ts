// The writer and the readers on this thread, for an in-memory database (which other threads
// cannot open; tests, tools) and, for the writer, a store without a writer thread: the same
// interfaces as the threads (ports.ts), each call answered before it returns, behind a promise.
import { log } from "../../log.ts";
import type { Database } from "bun:sqlite";
import type { PendingWrite, ReadContext, WriteOutcome, WriteRules } from "../types.ts";
import { checkpointAndClose } from "./db.ts";
import { NegSessions, type NegMsgJob, type NegOpenJob } from "./neg-sessions.ts";
import type { ReadKind, RunOptions, SqliteReaderPort, SqliteWriterPort } from "./ports.ts";
import { countJob, negJob, queryFrames, runToEnd, StatementCache, type ReadSteps } from "./query.ts";
import type { Changes, SqliteWriter } from "./write.ts";

/** The writer on this thread: it shares the store's connection. */
export class InlineWriter implements SqliteWriterPort {
  /** Never told: there is no thread to lose or to open again. */
  onLost?: () => void;
  onOpen?: () => void;
  /** Nothing is ever in flight: each call commits before it returns. */
  readonly busy = false;
  readonly changesPending = false;

  constructor(readonly writer: SqliteWriter) {}

  get seq(): number {
    return this.writer.seq;
  }

  set seq(seq: number) {
    this.writer.seq = seq;
  }

  get onPurge(): (() => void) | undefined {
    return this.writer.onPurge;
  }

  set onPurge(f: (() => void) | undefined) {
    this.writer.onPurge = f;
  }

  get onPurged(): ((ids: number[]) => void) | undefined {
    return this.writer.onPurged;
  }

  set onPurged(f: ((ids: number[]) => void) | undefined) {
    this.writer.onPurged = f;
  }

  get onChanges(): ((c: Changes) => void) | undefined {
    return this.writer.onChanges;
  }

  set onChanges(f: ((c: Changes) => void) | undefined) {
    this.writer.onChanges = f;
  }

  has(id: string): Promise<boolean> {
    return settle(() => this.writer.has(id));
  }

  hasNow(id: string): boolean {
    return this.writer.has(id);
  }

  writeBatch(batch: PendingWrite[], rules: WriteRules, committed: (outcomes: WriteOutcome[]) => WriteOutcome[]): Promise<WriteOutcome[]> {
    // IMMEDIATE: another process may write too (bunstr import, the other relay of a zero-downtime
    // restart); a deferred transaction that read first fails with SQLITE_BUSY at its first write
    // if the other committed meanwhile, while this one waits up to busy_timeout for the lock.
    // (The writer thread's batches are IMMEDIATE too.) Committed and told before this returns.
    return settle(() => committed(this.writer.writeBatchImmediate(batch, rules)));
  }

  purgeStep(budgetMs: number): Promise<boolean> {
    return settle(() => this.writer.purgeStep(budgetMs));
  }

  sweepExpired(now: number): Promise<number> {
    return settle(() => this.writer.sweepExpired(now));
  }

  /** The writer shares the store's connection: a change it sees is another connection's. */
  checkChanges(): void {
    this.writer.checkChanges();
  }

  /** It counts no calls: the store takes no state marks (Store.changes.mark: undefined). */
  callsIfIdle(): undefined {
    return undefined;
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  /** `connection` is the writer's own: checkpointed and closed. */
  async close(connection: Database): Promise<void> {
    for (const w of checkpointAndClose(connection)) log.warn(`warning: ${w}`);
  }
}

/** The reads on this thread (an in-memory database): each job runs to its end when asked, its time reported as one slice. */
export class InlineReaders implements SqliteReaderPort {
  private readonly cache: StatementCache;
  /** NIP-77 sessions: this reader is their "worker". */
  private readonly sessions = new NegSessions();
  private readonly steps: Record<Exclude<ReadKind, "query">, (job: never) => ReadSteps<unknown>>;

  constructor(db: Database) {
    this.cache = new StatementCache(db);
    this.steps = {
      count: (job) => countJob(this.cache, job),
      neg: (job) => negJob(this.cache, job),
      negopen: (job: NegOpenJob) => this.sessions.open(this.cache, job),
      negmsg: (job: NegMsgJob) => this.sessions.message(this.cache, job),
    };
  }

  stream(job: unknown, ctx?: ReadContext): AsyncGenerator<string[]> {
    return inlineBatches(queryFrames(this.cache, job as Parameters<typeof queryFrames>[1]), ctx);
  }

  run<T>(op: Exclude<ReadKind, "query">, job: unknown, ctx?: ReadContext, opts: RunOptions = {}): Promise<T> {
    opts.onWorker?.(this);
    const steps = this.steps[op];
    return settle(() => {
      const started = performance.now();
      const result = runToEnd(steps(job as never)) as T;
      const ms = performance.now() - started;
      ctx?.onCost?.(ms);
      ctx?.onEnd?.(ms);
      return result;
    });
  }

  closeSession(_worker: object, key: number): void {
    this.sessions.close(key);
  }

  /** Nothing waits: each read runs when it is asked for. */
  cancel(_owner: object): void {}

  ready(): Promise<void> {
    return Promise.resolve();
  }

  async close(): Promise<void> {
    this.sessions.clear();
  }
}

/** An in-memory database (tests, tools): the job runs on this thread, its batches handed out as asked. */
async function* inlineBatches(steps: ReadSteps<void>, ctx?: ReadContext): AsyncGenerator<string[]> {
  let used = 0;
  try {
    for (;;) {
      const started = performance.now();
      const r = steps.next();
      const ms = performance.now() - started;
      used += ms;
      ctx?.onCost?.(ms);
      if (r.done) return;
      if (r.value && r.value.length > 0) yield r.value;
    }
  } finally {
    ctx?.onEnd?.(used);
  }
}

/** A synchronous call's value or error as a promise (the Store's promises). */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (err) {
    return Promise.reject(err);
  }
}
