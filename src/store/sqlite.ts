// The SQLite store: one writer connection on the main thread, reads (REQ, COUNT, NEG-OPEN) in
// reader workers (or inline for an in-memory database, which other threads cannot open).
import type { Database } from "bun:sqlite";
import { SqliteAdmin } from "./admin.ts";
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
  readonly admin: SqliteAdmin;
  private readonly writer: SqliteWriter;
  private readonly readers?: ReaderPool;
  private readonly inline?: StatementCache;
  private readonly dataVersion;
  private readonly maxSeq;
  private seenVersion = -1;
  private closed = false;

  constructor(opts: SqliteStoreOptions) {
    this.db = openDatabase({ path: opts.path, synchronous: opts.synchronous });
    this.writer = new SqliteWriter(this.db);
    this.admin = new SqliteAdmin(this.db, this.writer);
    this.dataVersion = this.db.prepare("PRAGMA data_version");
    this.maxSeq = this.db.prepare("SELECT coalesce(max(seq), 0) AS s FROM events");
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
    // IMMEDIATE: another process may write too (bunstr import, the other relay of a zero-downtime
    // restart); a deferred transaction that read first fails with SQLITE_BUSY at its first write
    // if the other committed meanwhile, while this one waits up to busy_timeout for the lock.
    return this.writer.writeBatchImmediate(batch, rules);
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

  purgeStep(budgetMs: number): boolean {
    return !this.closed && this.writer.purgeStep(budgetMs);
  }

  set onPurge(f: (() => void) | undefined) {
    this.writer.onPurge = f;
  }

  get onPurge(): (() => void) | undefined {
    return this.writer.onPurge;
  }

  sweepExpired(now: number): number {
    return this.writer.sweepExpired(now);
  }

  /** Forgets the waiting reads of an owner (a connection) that went away. */
  cancelReads(owner: object): void {
    this.readers?.cancel(owner);
  }

  sizeBytes(): number {
    const pages = this.db.query("SELECT page_count * page_size AS b FROM pragma_page_count(), pragma_page_size()").get() as { b: number };
    return pages.b;
  }

  lastSeq(): number {
    // data_version changes when another connection (another process) commits: then our seq,
    // which only follows our own writes, may be behind what is stored.
    const version = (this.dataVersion.get() as { data_version: number }).data_version;
    if (version !== this.seenVersion) {
      this.seenVersion = version;
      this.writer.seq = Math.max(this.writer.seq, (this.maxSeq.get() as { s: number }).s);
    }
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
    this.closed = true;
    await this.readers?.close();
    // Fold the WAL back into the main file so a backup of the .sqlite alone is complete.
    const r = this.db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number } | null;
    if (r?.busy) console.warn("warning: WAL checkpoint at shutdown was busy; the -wal file is kept and replayed on the next start");
    this.db.close(true);
  }
}
