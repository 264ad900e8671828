// What the SQLite store (store.ts) asks of its writer and of its readers, whichever way they run:
// the writer in its thread (writer-thread.ts) or on this thread (inline.ts: an in-memory
// database, which other threads cannot open; tools and tests), the reads in reader workers
// (readers.ts) or on this thread (inline.ts). The store calls them without asking which: what
// only a thread does (waiting behind batches in flight, recovering from its loss, the
// checkpointer beside it) is a member the inline side answers trivially.
import type { Database } from "bun:sqlite";
import type { PendingWrite, ReadContext, RowBatch, WriteOutcome, WriteRules } from "../types.ts";
import type { Changes } from "./write.ts";

export interface SqliteWriterPort {
  /** The highest seq committed and told (the snapshot point: SqliteStore.lastSeq). */
  seq: number;
  /** Told when new purge work is recorded (Store.watchPurges). */
  onPurge?: () => void;
  /** Told which purges a call finished, after its commit, before its answer (Store.watchPurges). */
  onPurged?: (ids: number[]) => void;
  /** Told what a call changed beyond its answer, before that answer (ChangeWatch). */
  onChanges?: (c: Changes) => void;
  /** Told when the writer was lost: what its last transactions did is not known (inline: never). */
  onLost?: () => void;
  /** Told each time the writer has opened its connection after the store's (inline: never). */
  onOpen?: () => void;
  /** Is an event with this id stored? Behind the batches in flight (Store.has). */
  has(id: string): Promise<boolean>;
  /**
   * Store.hasNow: the answer without waiting. The thread: false ("not known") while a batch is
   * in flight, else undefined (ask has); inline: the exact answer.
   */
  hasNow(id: string): boolean | undefined;
  /**
   * Commits a batch; `committed` gets its outcomes in the continuation of the commit (the
   * snapshot point moved, nothing else run yet), and what it returns is the answer.
   */
  writeBatch(batch: PendingWrite[], rules: WriteRules, committed: (outcomes: WriteOutcome[]) => WriteOutcome[]): Promise<WriteOutcome[]>;
  purgeStep(budgetMs: number): Promise<boolean>;
  sweepExpired(now: number): Promise<number>;
  /** Another connection committed (data_version moved): has onChanges told what, and moves seq. */
  checkChanges(): void;
  /** Batches sent and not yet answered (inline: never; a batch is committed before its call returns). */
  readonly busy: boolean;
  /** Changes may have been made that onChanges has not told yet (a question or a recovery under way). */
  readonly changesPending: boolean;
  /**
   * Calls sent so far, when none is under way: what a state mark (Store.changes.mark) holds.
   * Undefined while one is, and always inline (it counts none: no marks, so no answers kept).
   */
  callsIfIdle(): number | undefined;
  /** Resolves once the writer's connection is open. */
  ready(): Promise<void>;
  /**
   * Closes the writer, and `connection` (the store's own) where the WAL needs it: before the
   * writer's, whose checkpoint is the last and folds the WAL in.
   */
  close(connection: Database): Promise<void>;
}

/** What a read job is (reader-worker.ts runs each kind). */
export type ReadKind = "query" | "count" | "neg" | "negopen" | "negmsg";

/** How a read with one result runs (ReaderPool.run). */
export interface RunOptions {
  /** Run on this worker (a NIP-77 session's). */
  pin?: object;
  /** Told which worker ran the job (inline: the reader itself). */
  onWorker?: (worker: object) => void;
  /** Buffers of the job to move to the worker instead of copying (the job must not use them after). */
  transfer?: ArrayBuffer[];
}

export interface SqliteReaderPort {
  /** A REQ's events in batches, read only as they are asked for (Store.query). */
  /** `ahead`: a point lookup, whose first slice goes before its group's other jobs (lanes.ts). */
  stream(job: unknown, ctx?: ReadContext, ahead?: boolean): AsyncIterable<RowBatch>;
  /** A read with one result (COUNT, NEG items, NEG-OPEN, NEG-MSG). */
  run<T>(op: Exclude<ReadKind, "query">, job: unknown, ctx?: ReadContext, opts?: RunOptions): Promise<T>;
  /** Forgets a NIP-77 session kept by `worker` (what onWorker named). */
  closeSession(worker: object, key: number): void;
  /** Drops the waiting reads of an owner that went away (inline: none wait). */
  cancel(owner: object): void;
  /** Resolves once every reader has opened its connection. */
  ready(): Promise<void>;
  close(): Promise<void>;
}
