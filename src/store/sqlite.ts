// The SQLite store: one writer connection on the main thread, reads (REQ, COUNT, NEG-OPEN) in
// reader workers (or inline for an in-memory database, which other threads cannot open).
import type { Database } from "bun:sqlite";
import { openDatabase } from "./db.ts";
import { runCount, runNegItems, runQuery, StatementCache, type CountJob, type NegItems, type NegJob, type QueryJob } from "./query.ts";
import type { PendingWrite, Store, WriteOutcome, WriteRules } from "./types.ts";
import { ReaderPool, type ReadContext, type ReadKind } from "./readers.ts";
import { SqliteWriter } from "./write.ts";

export interface SqliteStoreOptions {
  /** Absolute file path, or ":memory:". */
  path: string;
  synchronous: "normal" | "full";
  readerWorkers: number;
  /** A read running longer is abandoned (its worker replaced); default 10 s. */
  queryTimeoutMs?: number;
}

/** A read request for a worker. */
export type ReadOp = { n: number } & ({ op: "query"; job: QueryJob } | { op: "count"; job: CountJob } | { op: "neg"; job: NegJob });

export class SqliteStore implements Store {
  readonly db: Database;
  private readonly writer: SqliteWriter;
  private readonly readers?: ReaderPool;
  private readonly inline?: StatementCache;

  constructor(opts: SqliteStoreOptions) {
    this.db = openDatabase({ path: opts.path, synchronous: opts.synchronous });
    this.writer = new SqliteWriter(this.db);
    if (opts.path === ":memory:") {
      this.inline = new StatementCache(this.db);
      return;
    }
    this.readers = new ReaderPool({ path: opts.path, size: opts.readerWorkers, timeoutMs: opts.queryTimeoutMs ?? 10_000, maxQueued: 10_000, maxQueuedPerOwner: 1000 });
  }

  has(id: string): boolean {
    return this.writer.has(id);
  }

  writeBatch(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] {
    return this.writer.writeBatch(batch, rules);
  }

  query(job: QueryJob, ctx?: ReadContext): Promise<string[]> {
    return this.read("query", job, runQuery, ctx);
  }

  count(job: CountJob, ctx?: ReadContext): Promise<{ count: number; hll?: string }> {
    return this.read("count", job, runCount, ctx);
  }

  negentropyItems(job: NegJob, ctx?: ReadContext): Promise<NegItems> {
    return this.read("neg", job, runNegItems, ctx);
  }

  sweepExpired(now: number): number {
    return this.writer.sweepExpired(now);
  }

  /** Forgets the waiting reads of an owner (a connection) that went away. */
  cancelReads(owner: object): void {
    this.readers?.cancel(owner);
  }

  lastSeq(): number {
    return this.writer.seq;
  }

  private read<J, T>(op: ReadKind, job: J, inline: (c: StatementCache, j: J) => T, ctx?: ReadContext): Promise<T> {
    if (!this.inline) return this.readers!.run<T>(op, job, ctx);
    try {
      const started = performance.now();
      const result = inline(this.inline, job);
      ctx?.onCost?.(performance.now() - started);
      return Promise.resolve(result);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  async close(): Promise<void> {
    await this.readers?.close();
    // Fold the WAL back into the main file so a backup of the .sqlite alone is complete.
    const r = this.db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number } | null;
    if (r?.busy) console.warn("warning: WAL checkpoint at shutdown was busy; the -wal file is kept and replayed on the next start");
    this.db.close(true);
  }
}
