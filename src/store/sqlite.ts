// The SQLite store: one writer connection on the main thread, REQ queries in reader workers
// (or inline for an in-memory database, which other threads cannot open).
import type { Database } from "bun:sqlite";
import { openDatabase } from "./db.ts";
import { runQuery, StatementCache, type QueryJob } from "./query.ts";
import type { PendingWrite, Store, WriteOutcome } from "./types.ts";
import { SqliteWriter } from "./write.ts";
import { workerUrl } from "../workers.ts";

export interface SqliteStoreOptions {
  /** Absolute file path, or ":memory:". */
  path: string;
  synchronous: "normal" | "full";
  readerWorkers: number;
}

interface Pending {
  resolve: (events: string[]) => void;
  reject: (e: Error) => void;
}

class ReaderPool {
  private readonly workers: { worker: Worker; busy: number }[] = [];
  private readonly pending = new Map<number, Pending>();
  private next = 1;

  constructor(path: string, size: number) {
    for (let i = 0; i < size; i++) {
      const worker = new Worker(workerUrl("./store/reader-worker.ts"));
      worker.postMessage({ open: path });
      const slot = { worker, busy: 0 };
      worker.onmessage = (msg: MessageEvent) => {
        if (msg.data.closed) return this.onClosed();
        const { n, events, error } = msg.data as { n: number; events?: string[]; error?: string };
        slot.busy--;
        const p = this.pending.get(n);
        this.pending.delete(n);
        if (error !== undefined) p?.reject(new Error(error));
        else p?.resolve(events!);
      };
      worker.onerror = (e) => {
        console.error(`query worker failed: ${e.message}`);
        process.exit(70);
      };
      worker.unref();
      this.workers.push(slot);
    }
  }

  query(job: QueryJob): Promise<string[]> {
    const slot = this.workers.reduce((a, b) => (b.busy < a.busy ? b : a));
    const n = this.next++;
    slot.busy++;
    return new Promise((resolve, reject) => {
      this.pending.set(n, { resolve, reject });
      slot.worker.postMessage({ n, job });
    });
  }

  private onClosed: () => void = () => {};

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

  writeBatch(batch: PendingWrite[]): WriteOutcome[] {
    return this.writer.writeBatch(batch);
  }

  query(job: QueryJob): Promise<string[]> {
    if (this.inline) {
      try {
        return Promise.resolve(runQuery(this.inline, job));
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return this.readers!.query(job);
  }

  lastSeq(): number {
    return this.writer.seq;
  }

  async close(): Promise<void> {
    await this.readers?.close();
    // Fold the WAL back into the main file so a backup of the .sqlite alone is complete.
    const r = this.db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number } | null;
    if (r?.busy) console.warn("warning: WAL checkpoint at shutdown was busy; the -wal file is kept and replayed on the next start");
    this.db.close(true);
  }
}
