// The SQLite store: one writer connection, in the writer thread (store/sqlite/writer-worker.ts)
// when `writerThread` is set, else on this thread (an in-memory database, which other threads
// cannot open; tools and tests); reads (REQ, COUNT, NEG-OPEN) in reader workers (or inline for an
// in-memory database). With a writer thread, this thread's own connection only reads (the
// duplicate check, admin lists, sizes).
import type { Database } from "bun:sqlite";
import { toHex } from "../../nips/nip77-wire.ts";
import { InlineAdmin, SqliteAdmin, ThreadAdmin } from "./admin.ts";
import { SqliteGroups } from "./groups.ts";
import { Checkpointer, SOLO_AUTOCHECKPOINT } from "./checkpointer.ts";
import { checkpointAndClose, openDatabase } from "./db.ts";
import { countJob, negJob, queryFrames, runToEnd, StatementCache, type ReadSteps } from "./query.ts";
import { NegSessions, type NegAnswer, type NegMsgJob, type NegOpenJob } from "./neg-sessions.ts";
import type {
  AdminStore,
  ChangeWatch,
  CommitFeed,
  CountJob,
  GroupRecords,
  NegItems,
  NegJob,
  NegSessionHandle,
  NegentropySessions,
  PendingWrite,
  QueryJob,
  ReadContext,
  RowBatch,
  StateMark,
  Store,
  StoreChanges,
  WriteOutcome,
  WriteRules,
} from "../types.ts";
import { ReaderPool, type ReadKind } from "./readers.ts";
import { SqliteWriter, type Changes } from "./write.ts";
import { WriterThread } from "./writer-thread.ts";

interface SqliteStoreOptions {
  /** Absolute file path, or ":memory:". */
  path: string;
  synchronous: "normal" | "full";
  readerWorkers: number;
  /** A read running longer is abandoned (its worker replaced); default 10 s. */
  queryTimeoutMs?: number;
  /** Writes in a thread of their own (a file database only): the relay's setting. */
  writerThread?: boolean;
}

/** How often (ms) lastSeq looks for commits of other connections (see there). */
const VERSION_CHECK_MS = 10;

export class SqliteStore implements Store {
  readonly db: Database;
  readonly admin: AdminStore;
  readonly groups: GroupRecords = new SqliteGroups(() => this.db);
  /** The writer on this thread, or */
  private readonly writer?: SqliteWriter;
  /** the writer thread, and the thread that checkpoints its WAL. */
  private readonly thread?: WriterThread;
  private readonly checkpointer?: Checkpointer;
  private readonly hasId;
  /** Batches the writer queue may have in flight: one committing while the next gathers. */
  readonly writePipeline: number = Infinity;
  private readonly readers?: ReaderPool;
  private readonly inline?: StatementCache;
  private readonly dataVersion;
  private readonly maxSeq;
  private readonly maxCreatedAt;
  /** Told of each committed event (subscribe). */
  private feed?: CommitFeed;
  /** Told of changes (watchChanges). */
  private watch?: ChangeWatch;
  /** "changes" calls sent to the writer thread and not answered (changesKnown), and whether to ask again. */
  private asking = 0;
  private askAgain = false;
  /** The writer thread was lost since changes were last known. */
  private afterLoss = false;
  private seenVersion = -1;
  /** data_version as last read (stateMark). */
  private versionRead = -1;
  /** When lastSeq last asked for data_version (performance.now()). */
  private versionAskedAt = Number.NEGATIVE_INFINITY;
  private nextSession = 1;
  /** NIP-77 sessions of an in-memory store (no workers). */
  private readonly inlineSessions = new NegSessions();
  private closed = false;

  constructor(opts: SqliteStoreOptions) {
    this.db = openDatabase({ path: opts.path, synchronous: opts.synchronous });
    if (opts.writerThread && opts.path !== ":memory:") {
      // This connection created and migrated the file; the worker's writes from here on.
      this.db.exec("PRAGMA cache_size = -2000");
      // Its reads are small (admin lists, sizes, the snapshot seq): no map, which would count
      // the file's pages again in the relay's RSS.
      this.db.exec("PRAGMA mmap_size = 0");
      const committed = (this.db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
      // A batch whose writer thread was lost before it answered is decided by what is stored.
      const seqOf = this.db.prepare("SELECT seq FROM events WHERE id = unhex(?)");
      const seqsOf = (ids: string[]) => ids.map((id) => (seqOf.get(id) as { seq: number } | null)?.seq ?? 0);
      // And a NIP-09 deletion's purge still going on (its OK waits for it: write.ts applyDeletion).
      const purgeOf = this.db.prepare("SELECT id FROM purges WHERE listed = 1 AND keep = ?");
      const purgeOfSeq = (seq: number) => (purgeOf.get(seq) as { id: number } | null)?.id;
      this.thread = new WriterThread(opts.path, opts.synchronous, committed, seqsOf, purgeOfSeq);
      this.checkpointer = new Checkpointer(opts.path, opts.synchronous);
      this.checkpointer.onLost = () => this.thread?.setWalPages(SOLO_AUTOCHECKPOINT);
      this.thread.onCommitted = () => this.checkpointer?.committed();
      this.admin = new ThreadAdmin(this.db, this.thread);
      this.writePipeline = 1;
    } else {
      this.writer = new SqliteWriter(this.db);
      this.admin = new InlineAdmin(new SqliteAdmin(this.db, this.writer));
    }
    this.hasId = this.db.prepare("SELECT 1 FROM events WHERE id = unhex(?)");
    this.dataVersion = this.db.prepare("PRAGMA data_version");
    this.maxSeq = this.db.prepare("SELECT coalesce(max(seq), 0) AS s FROM events");
    this.maxCreatedAt = this.db.prepare("SELECT coalesce(max(created_at), -1) AS t FROM events");
    if (opts.path === ":memory:") {
      this.inline = new StatementCache(this.db);
      return;
    }
    this.readers = new ReaderPool({
      path: opts.path,
      size: opts.readerWorkers,
      timeoutMs: opts.queryTimeoutMs ?? 10_000,
      maxQueued: 10_000,
      maxQueuedPerOwner: 1000,
    });
  }

  has(id: string): boolean | Promise<boolean> {
    // With a writer thread, asked of it (writer-thread.ts has): behind the batches in flight.
    return this.thread ? this.thread.has(id) : this.hasId.get(id) !== null;
  }

  hasNow(id: string): boolean | Promise<boolean> {
    // While the writer thread commits a batch, has() waits behind it, and so does every event
    // that arrives meanwhile: the writer then sat idle after each commit until they were
    // checked, verified and queued (bench/RESULTS.md, session 29: median +6% events/s, -11% CPU per event).
    if (this.thread?.busy) return false;
    return this.has(id);
  }

  subscribe(feed: CommitFeed): void {
    this.feed = feed;
  }

  writeBatch(batch: PendingWrite[], rules: WriteRules): Promise<WriteOutcome[]> {
    // The writer thread's answer moves the snapshot seq (writer-thread.ts outcomes); the feed is
    // told in the continuation of that answer, before the writer queue's own.
    if (this.thread) return this.thread.writeBatch(batch, rules).then((outcomes) => this.committed(batch, outcomes));
    // IMMEDIATE: another process may write too (bunstr import, the other relay of a zero-downtime
    // restart); a deferred transaction that read first fails with SQLITE_BUSY at its first write
    // if the other committed meanwhile, while this one waits up to busy_timeout for the lock.
    // (The writer thread's batches are IMMEDIATE too.) Committed before this returns.
    return settle(() => this.committed(batch, this.writer!.writeBatchImmediate(batch, rules)));
  }

  /**
   * Tells the feed each stored event of a committed batch, in commit order (CommitFeed), and
   * returns the batch's outcomes. Deletions the batch made were told before (Store.changes).
   */
  private committed(batch: PendingWrite[], outcomes: WriteOutcome[]): WriteOutcome[] {
    const feed = this.feed;
    if (!feed) return outcomes;
    batch.forEach((w, i) => {
      if (!outcomes[i]!.stored) return;
      try {
        feed.committed(w.event, w.json);
      } catch (e) {
        // A fanout bug must not leave the batch's authors without their OK.
        console.error("fanout of a stored event failed:", e);
      }
    });
    feed.batchEnd();
    return outcomes;
  }

  query(job: QueryJob, ctx?: ReadContext): AsyncIterable<RowBatch> {
    if (this.readers) return this.readers.stream(job, ctx);
    return inlineBatches(queryFrames(this.inline!, job), ctx);
  }

  count(job: CountJob, ctx?: ReadContext): Promise<{ count: number; hll?: string }> {
    return this.read("count", job, countJob, ctx);
  }

  negentropyItems(job: NegJob, ctx?: ReadContext): Promise<NegItems> {
    return this.read("neg", job, negJob, ctx);
  }

  /** Store.negentropy: sessions kept in the reader worker that read their items. */
  readonly negentropy: NegentropySessions = { open: (job, message, frameLimit, ctx) => this.negentropyOpen(job, message, frameLimit, ctx) };

  /** Store.changes: every change named, told by the writer (thread). */
  readonly changes: StoreChanges = {
    watch: (w) => this.watchChanges(w),
    known: () => this.changesKnown(),
    mark: () => this.stateMark(),
    unchangedSince: (m) => this.unchangedSince(m),
  };

  private async negentropyOpen(neg: NegJob, message: Uint8Array, frameLimit: number, ctx?: ReadContext): Promise<NegSessionHandle> {
    const key = this.nextSession++;
    let worker: object | undefined;
    const open: NegOpenJob = { key, neg, message, frameLimit };
    let first: NegAnswer;
    try {
      first = this.readers
        ? await this.readers.run<NegAnswer>("negopen", open, ctx, {
            onWorker: (w) => (worker = w),
            transfer: [message.buffer as ArrayBuffer],
          })
        : runToEnd(this.inlineSessions.open(this.inline!, open));
    } catch (err) {
      // Stopped (the connection gone, out of time) while its last slice ran: the worker may have
      // kept the session all the same.
      if (worker) this.readers?.closeSession(worker, key);
      throw err;
    }
    const readers = this.readers;
    const inline = this.inlineSessions;
    const cache = this.inline;
    const hex = ({ reply, error }: NegAnswer) => ({ reply: reply && toHex(reply), error });
    return {
      items: first.items,
      overflow: first.overflow === true,
      ...hex(first),
      message: async (m, c) => {
        const job: NegMsgJob = { key, message: m };
        return hex(
          readers
            ? await readers.run<NegAnswer>("negmsg", job, c, { pin: worker, transfer: [m.buffer as ArrayBuffer] })
            : runToEnd(inline.message(cache!, job)),
        );
      },
      close: () => (readers && worker ? readers.closeSession(worker, key) : inline.close(key)),
    };
  }

  purgeStep(budgetMs: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.thread) return this.thread.call<boolean>({ call: "purgeStep", budgetMs });
    return settle(() => this.writer!.purgeStep(budgetMs));
  }

  set onPurge(f: (() => void) | undefined) {
    if (this.thread) this.thread.onPurge = f;
    else this.writer!.onPurge = f;
  }

  get onPurge(): (() => void) | undefined {
    return (this.thread ?? this.writer!).onPurge;
  }

  set onPurged(f: ((ids: number[]) => void) | undefined) {
    if (this.thread) this.thread.onPurged = f;
    else this.writer!.onPurged = f;
  }

  get onPurged(): ((ids: number[]) => void) | undefined {
    return (this.thread ?? this.writer!).onPurged;
  }

  sweepExpired(now: number): Promise<number> {
    if (this.thread) return this.thread.call<number>({ call: "sweepExpired", now });
    return settle(() => this.writer!.sweepExpired(now));
  }

  async ready(): Promise<void> {
    await Promise.all([this.readers?.ready(), this.thread?.ready()]);
  }

  /** Forgets the waiting reads of an owner (a connection) that went away. */
  cancelReads(owner: object): void {
    this.readers?.cancel(owner);
  }

  async sizeBytes(): Promise<number> {
    const pages = this.db.query("SELECT page_count * page_size AS b FROM pragma_page_count(), pragma_page_size()").get() as { b: number };
    return pages.b;
  }

  private watchChanges(watch: ChangeWatch): void {
    this.watch = watch;
    const tell = (c: Changes) => ("deleted" in c ? watch.deleted(c.deleted) : watch.unknown(c.unknown, c.batch));
    if (this.thread) {
      this.thread.onChanges = tell;
      this.thread.onLost = () => (this.afterLoss = true);
      // The thread reads its data_version when it opens, after this: what another process
      // committed in between is in the newest created_at read once it has (changesKnown is false
      // until then), and what it commits later the thread finds.
      this.thread.onOpen = () => {
        if (!this.closed) watch.unknown(this.newestCreatedAt(), false);
      };
    } else this.writer!.onChanges = tell;
    watch.unknown(this.newestCreatedAt(), false);
  }

  private changesKnown(): boolean {
    if (this.asking > 0 || this.thread?.recovering) return false;
    if (this.afterLoss) {
      // The lost thread is gone and its batches decided: what it deleted is not known.
      this.afterLoss = false;
      this.watch?.unknown(this.newestCreatedAt(), false);
    }
    return true;
  }

  /**
   * With a writer thread only: its calls sent (ours) and data_version (another connection's
   * commits; the thread's own move it too, and none is under way while it is idle). The version
   * is the one lastSeq read last (at most VERSION_CHECK_MS old, no read transaction here):
   * `unchangedSince` reads it afresh, so a stale one only makes it say "changed".
   */
  private stateMark(): StateMark | undefined {
    if (!this.thread?.idle) return undefined;
    return { calls: this.thread.callsSent, version: this.versionRead };
  }

  private unchangedSince(mark: StateMark): boolean {
    if (!this.thread?.idle || this.thread.callsSent !== mark.calls) return false;
    return this.readVersion() === mark.version;
  }

  private readVersion(): number {
    this.versionRead = (this.dataVersion.get() as { data_version: number }).data_version;
    return this.versionRead;
  }

  private newestCreatedAt(): number {
    return (this.maxCreatedAt.get() as { t: number }).t;
  }

  /**
   * data_version moved: another connection committed. Our writer thread's commits move it too,
   * so it is asked whether someone else's did (its own connection's data_version tells);
   * without a thread, our writer shares this connection and the change is someone else's.
   */
  private askForChanges(): void {
    if (!this.watch) return;
    if (!this.thread) return this.writer!.checkChanges();
    // One question at a time; a change seen meanwhile is asked about once it is answered (the
    // answer may have been read before that change).
    if (this.asking > 0) {
      this.askAgain = true;
      return;
    }
    this.asking++;
    this.thread
      .call({ call: "changes" })
      .catch(() => {}) // lost: onLost
      .finally(() => {
        this.asking--;
        if (!this.askAgain) return;
        this.askAgain = false;
        this.askForChanges();
      });
  }

  lastSeq(): number {
    const w = this.thread ?? this.writer!;
    // data_version changes when another connection (another process, the writer thread) commits:
    // then our seq, which only follows our own writes, may be behind what is stored. Asked at
    // most every VERSION_CHECK_MS: it opens and closes a read transaction (two fcntl locks and an
    // fstat), 7% of the main thread's time per REQ under the issue-15 mix, and what it finds
    // (another process's commit, which nobody here was told of) can wait that long.
    const now = performance.now();
    if (now - this.versionAskedAt < VERSION_CHECK_MS) return w.seq;
    this.versionAskedAt = now;
    const version = this.readVersion();
    if (version === this.seenVersion) return w.seq;
    // Whose commit it was, the writer says (changesKnown is false until it has): asked even with
    // a batch in flight, which may be waiting for another process's write lock meanwhile.
    this.askForChanges();
    // The writer thread's commits reach this seq as its answers are fanned out (writer-thread.ts):
    // with a batch in flight, what this connection sees may not be fanned out yet. Its answer
    // moves the seq instead, and this change is looked at again once it is idle.
    if (this.thread?.busy) return w.seq;
    this.seenVersion = version;
    w.seq = Math.max(w.seq, (this.maxSeq.get() as { s: number }).s);
    return w.seq;
  }

  private read<J, T>(op: ReadKind, job: J, steps: (c: StatementCache, j: J) => ReadSteps<T>, ctx?: ReadContext): Promise<T> {
    if (!this.inline) return this.readers!.run<T>(op, job, ctx);
    try {
      const started = performance.now();
      const result = runToEnd(steps(this.inline, job));
      const ms = performance.now() - started;
      ctx?.onCost?.(ms);
      ctx?.onEnd?.(ms);
      return Promise.resolve(result);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.readers?.close();
    if (this.thread) {
      // The writer's connection is the last one: its checkpoint folds the WAL in.
      await this.checkpointer?.close();
      this.db.close(true);
      return this.thread.close();
    }
    for (const w of checkpointAndClose(this.db)) console.warn(`warning: ${w}`);
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

/** A synchronous call's value or error as a promise (the writer on this thread, behind the Store's promises). */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (err) {
    return Promise.reject(err);
  }
}
