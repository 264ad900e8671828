// The SQLite store: one writer connection on the main thread, reads (REQ, COUNT, NEG-OPEN) in
// reader workers (or inline for an in-memory database, which other threads cannot open).
import type { Database } from "bun:sqlite";
import { workerUrl } from "../workers.ts";
import { openDatabase } from "./db.ts";
import { runCount, runNegItems, runQuery, StatementCache, type CountJob, type NegItems, type NegJob, type QueryJob } from "./query.ts";
import type { PendingWrite, Store, WriteOutcome, WriteRules } from "./types.ts";
import { SqliteWriter } from "./write.ts";

export interface SqliteStoreOptions {
  /** Absolute file path, or ":memory:". */
  path: string;
  synchronous: "normal" | "full";
  readerWorkers: number;
}

/** A read request for a worker. */
export type ReadOp = { n: number } & ({ op: "query"; job: QueryJob } | { op: "count"; job: CountJob } | { op: "neg"; job: NegJob });
type ReadKind = ReadOp["op"];

interface Pending {
  resolve: (r: unknown) => void;
  reject: (e: Error) => void;
}

class ReaderPool {
  private readonly workers: { worker: Worker; busy: number }[] = [];
  private readonly pending = new Map<number, Pending>();
  private next = 1;
  private onClosed: () => void = () => {};

  constructor(path: string, size: number) {
    for (let i = 0; i < size; i++) {
      const worker = new Worker(workerUrl("./store/reader-worker.ts"));
      worker.postMessage({ open: path });
      const slot = { worker, busy: 0 };
      worker.onmessage = (msg: MessageEvent) => {
        if (msg.data.closed) return this.onClosed();
        const { n, result, error } = msg.data as { n: number; result?: unknown; error?: string };
        slot.busy--;
        const p = this.pending.get(n);
        this.pending.delete(n);
        if (error !== undefined) p?.reject(new Error(error));
        else p?.resolve(result);
      };
      worker.onerror = (e) => {
        console.error(`query worker failed: ${e.message}`);
        process.exit(70);
      };
      worker.unref();
      this.workers.push(slot);
    }
  }

  run<T>(op: ReadKind, job: unknown): Promise<T> {
    const slot = this.workers.reduce((a, b) => (b.busy < a.busy ? b : a));
    const n = this.next++;
    slot.busy++;
    return new Promise((resolve, reject) => {
      this.pending.set(n, { resolve: resolve as (r: unknown) => void, reject });
      slot.worker.postMessage({ n, op, job });
    });
  }

  /** Asks every worker to close its connection, waits (bounded), then terminates them. */
  async close(): Promise<void> {
    let open = this.workers.length;
    const closed = new Promise<void>((resolve) => {
      this.onClosed = () => --open === 0 && resolve();
    });
    for (const { worker } of this.workers) worker.postMessage({ close: true });
    await Promise.race([closed, Bun.sleep(2000)]);
    for (const { worker } of this.workers) worker.terminate();
    for (const p of this.pending.values()) p.reject(new Error("store closed"));
    this.pending.clear();
  }
}

export class SqliteStore implements Store {
  readonly db: Database;
  private readonly writer: SqliteWriter;
  private readonly readers?: ReaderPool;
  private readonly inline?: StatementCache;

  constructor(opts: SqliteStoreOptions) {
    this.db = openDatabase({ path: opts.path, synchronous: opts.synchronous });
    this.writer = new SqliteWriter(this.db);
    if (opts.path === ":memory:") this.inline = new StatementCache(this.db);
    else this.readers = new ReaderPool(opts.path, opts.readerWorkers);
  }

  has(id: string): boolean {
    return this.writer.has(id);
  }

  writeBatch(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] {
    return this.writer.writeBatch(batch, rules);
  }

  query(job: QueryJob): Promise<string[]> {
    return this.read("query", job, runQuery);
  }

  count(job: CountJob): Promise<{ count: number; hll?: string }> {
    return this.read("count", job, runCount);
  }

  negentropyItems(job: NegJob): Promise<NegItems> {
    return this.read("neg", job, runNegItems);
  }

  sweepExpired(now: number): number {
    return this.writer.sweepExpired(now);
  }

  lastSeq(): number {
    return this.writer.seq;
  }

  private read<J, T>(op: ReadKind, job: J, inline: (c: StatementCache, j: J) => T): Promise<T> {
    if (!this.inline) return this.readers!.run<T>(op, job);
    try {
      return Promise.resolve(inline(this.inline, job));
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
