// The SQLite store: one writer connection, in the writer thread (store/sqlite/writer-thread.ts)
// when `writerThread` is set, else on this thread (an in-memory database, which other threads
// cannot open; tools and tests); reads (REQ, COUNT, NEG-OPEN) in reader workers (or on this
// thread for an in-memory database: inline.ts). The store holds one writer and one set of
// readers (ports.ts) and calls them the same either way. With a writer thread, this thread's own
// connection only reads (admin lists, sizes, the snapshot seq).
import { log } from "../../log.ts";
import type { Database } from "bun:sqlite";
import { toHex } from "../../nips/nip77-wire.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import { InlineAdmin, SqliteAdmin, ThreadAdmin } from "./admin.ts";
import { inlineAdmission, threadAdmission } from "./admission.ts";
import { SqliteGroups } from "./groups.ts";
import { openDatabase } from "./db.ts";
import { packGroupLists } from "./query.ts";
import { InlineReaders, InlineWriter } from "./inline.ts";
import { isPointLookup } from "./lanes.ts";
import { MainThreadLookups, oneBatch } from "./quick.ts";
import type { NegAnswer, NegMsgJob, NegOpenJob } from "./neg-sessions.ts";
import type { SqliteReaderPort, SqliteWriterPort } from "./ports.ts";
import type {
  AdminStore,
  AdmissionStore,
  ChangeWatch,
  CommitFeed,
  CountJob,
  GroupRecords,
  NegItems,
  NegJob,
  NegReply,
  NegSessionHandle,
  NegentropySessions,
  PendingWrite,
  PurgeWatch,
  QueryJob,
  ReadContext,
  RowBatch,
  StateMark,
  Store,
  StoreChanges,
  WriteOutcome,
  WriteRules,
} from "../types.ts";
import { ReaderPool } from "./readers.ts";
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
  /** Point lookups read on this thread first (quick.ts); default true. False: every read goes to the readers. */
  mainThreadLookups?: boolean;
}

/**
 * The main thread's connection maps this much of the file (the largest map SQLite takes here):
 * point lookups read their pages through it (see the constructor). Pages past it are read.
 */
export const MAIN_MMAP_BYTES = 0x7fff0000;

/** How often (ms) lastSeq looks for commits of other connections (see there). */
const VERSION_CHECK_MS = 10;

export class SqliteStore implements Store {
  readonly db: Database;
  readonly admin: AdminStore;
  readonly admission: AdmissionStore;
  readonly groups: GroupRecords = new SqliteGroups(() => this.db);
  /** The writer thread (with the thread that checkpoints its WAL), or the writer on this thread. */
  private readonly writer: SqliteWriterPort;
  /** Batches the writer queue may have in flight: one committing while the next gathers. */
  readonly writePipeline: number = Infinity;
  /** The reader workers, or the reads on this thread (an in-memory database). */
  private readonly readers: SqliteReaderPort;
  /** Point lookups read on this thread, within bounds, before the readers (quick.ts). */
  readonly lookups?: MainThreadLookups;
  private readonly dataVersion;
  private readonly maxSeq;
  private readonly maxCreatedAt;
  /** Told of each committed event (subscribe). */
  private feed?: CommitFeed;
  /** Told of changes (watchChanges). */
  private watch?: ChangeWatch;
  /** The writer thread was lost since changes were last known. */
  private afterLoss = false;
  private seenVersion = -1;
  /** data_version as last read (stateMark). */
  private versionRead = -1;
  /** When lastSeq last asked for data_version (performance.now()). */
  private versionAskedAt = Number.NEGATIVE_INFINITY;
  private nextSession = 1;
  private closed = false;

  constructor(opts: SqliteStoreOptions) {
    this.db = openDatabase({ path: opts.path, synchronous: opts.synchronous });
    if (opts.writerThread && opts.path !== ":memory:") {
      // This connection created and migrated the file; the worker's writes from here on.
      this.db.exec("PRAGMA cache_size = -2000");
      // Its reads are small (admin lists, sizes, the snapshot seq) but many: every point lookup
      // (quick.ts) reads a few random pages. Mapped, a page the OS holds costs no read() call and
      // no copy into the 2 MB cache: at 1M events 21.6 such calls per REQ of the issue-35 mix,
      // and the map gave 1.1x the REQs/s at 0.9x the CPU (bench/RESULTS.md, session 36). The
      // mapped pages count in the RSS as file-backed (cache the kernel may drop), not anonymous
      // memory: /metrics shows the two apart.
      this.db.exec(`PRAGMA mmap_size = ${MAIN_MMAP_BYTES}`);
      const committed = (this.db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
      // A batch whose writer thread was lost before it answered is decided by what is stored.
      const seqOf = this.db.prepare("SELECT seq FROM events WHERE id = unhex(?)");
      const seqsOf = (ids: string[]) => ids.map((id) => (seqOf.get(id) as { seq: number } | null)?.seq ?? 0);
      // And a NIP-09 deletion's purge still going on (its OK waits for it: write.ts applyDeletion).
      const purgeOf = this.db.prepare("SELECT id FROM purges WHERE listed = 1 AND keep = ?");
      const purgeOfSeq = (seq: number) => (purgeOf.get(seq) as { id: number } | null)?.id;
      const thread = new WriterThread(opts.path, opts.synchronous, committed, seqsOf, purgeOfSeq);
      this.writer = thread;
      this.admin = new ThreadAdmin(this.db, thread);
      this.admission = threadAdmission(this.db, thread);
      this.writePipeline = 1;
    } else {
      const writer = new SqliteWriter(this.db);
      this.writer = new InlineWriter(writer);
      this.admin = new InlineAdmin(new SqliteAdmin(this.db, writer));
      this.admission = inlineAdmission(this.db);
    }
    this.dataVersion = this.db.prepare("PRAGMA data_version");
    this.maxSeq = this.db.prepare("SELECT coalesce(max(seq), 0) AS s FROM events");
    this.maxCreatedAt = this.db.prepare("SELECT coalesce(max(created_at), -1) AS t FROM events");
    // Point lookups on this thread first (quick.ts); an in-memory database reads here anyway.
    if (opts.path !== ":memory:" && opts.mainThreadLookups !== false) this.lookups = new MainThreadLookups(this.db);
    this.readers =
      opts.path === ":memory:"
        ? new InlineReaders(this.db)
        : new ReaderPool({
            path: opts.path,
            size: opts.readerWorkers,
            timeoutMs: opts.queryTimeoutMs ?? 10_000,
            maxQueued: 10_000,
            maxQueuedPerOwner: 1000,
          });
  }

  has(id: string): Promise<boolean> {
    // Asked of the writer (writer-thread.ts has): behind the batches in flight.
    return this.writer.has(id);
  }

  hasNow(id: string): boolean | undefined {
    // While the writer thread commits a batch, has() waits behind it, and so does every event
    // that arrives meanwhile: the writer then sat idle after each commit until they were
    // checked, verified and queued (bench/RESULTS.md, session 29: median +6% events/s, -11% CPU per event).
    return this.writer.hasNow(id);
  }

  subscribe(feed: CommitFeed): void {
    this.feed = feed;
  }

  /** One node: the fanout of this process reached every subscriber there is. */
  shareEphemeral(_event: NostrEvent, _json: string): void {}

  writeBatch(batch: PendingWrite[], rules: WriteRules): Promise<WriteOutcome[]> {
    // The writer's answer moves the snapshot seq (writer-thread.ts outcomes); the feed is told in
    // the continuation of that answer, before the writer queue's own.
    return this.writer.writeBatch(batch, rules, (outcomes) => this.committed(batch, outcomes));
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
        log.error("fanout of a stored event failed:", e);
      }
    });
    feed.batchEnd();
    return outcomes;
  }

  // packGroupLists: a long NIP-29 membership list travels to the reader as one string.
  query(job: QueryJob, ctx?: ReadContext): AsyncIterable<RowBatch> {
    const packed = packGroupLists(job);
    if (!isPointLookup(job.filters, job.limits)) return this.readers.stream(packed, ctx);
    const rows = this.lookups?.answer(packed, ctx);
    return rows ? oneBatch(rows) : this.readers.stream(packed, ctx, true);
  }

  count(job: CountJob, ctx?: ReadContext): Promise<{ count: number; hll?: string }> {
    return this.readers.run("count", packGroupLists(job), ctx);
  }

  negentropyItems(job: NegJob, ctx?: ReadContext): Promise<NegItems> {
    return this.readers.run("neg", packGroupLists(job), ctx);
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
    const open: NegOpenJob = { key, neg: packGroupLists(neg), message, frameLimit };
    const readers = this.readers;
    let first: NegAnswer;
    try {
      first = await readers.run<NegAnswer>("negopen", open, ctx, {
        onWorker: (w) => (worker = w),
        transfer: [message.buffer as ArrayBuffer],
      });
    } catch (err) {
      // Stopped (the connection gone, out of time) while its last slice ran: the worker may have
      // kept the session all the same.
      if (worker) readers.closeSession(worker, key);
      throw err;
    }
    const hex = ({ reply, error }: NegAnswer): NegReply =>
      error === undefined && reply !== undefined ? { reply: toHex(reply) } : { error: error ?? "error: no reply to this message" };
    const session = {
      items: first.items,
      message: async (m: Uint8Array, c?: ReadContext) => {
        const job: NegMsgJob = { key, message: m };
        return hex(await readers.run<NegAnswer>("negmsg", job, c, { pin: worker, transfer: [m.buffer as ArrayBuffer] }));
      },
      close: () => void (worker && readers.closeSession(worker, key)),
    };
    return first.overflow ? { ...session, overflow: true } : { ...session, overflow: false, ...hex(first) };
  }

  purgeStep(budgetMs: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    return this.writer.purgeStep(budgetMs);
  }

  watchPurges(watch: PurgeWatch): void {
    this.writer.onPurge = () => watch.more();
    this.writer.onPurged = (ids) => watch.done(ids);
  }

  sweepExpired(now: number): Promise<number> {
    return this.writer.sweepExpired(now);
  }

  async ready(): Promise<void> {
    await Promise.all([this.readers.ready(), this.writer.ready()]);
  }

  /** Forgets the waiting reads of an owner (a connection) that went away. */
  cancelReads(owner: object): void {
    this.readers.cancel(owner);
  }

  async sizeBytes(): Promise<number> {
    const pages = this.db.query("SELECT page_count * page_size AS b FROM pragma_page_count(), pragma_page_size()").get() as { b: number };
    return pages.b;
  }

  private watchChanges(watch: ChangeWatch): void {
    this.watch = watch;
    this.writer.onChanges = (c: Changes) => ("deleted" in c ? watch.deleted(c.deleted) : watch.unknown(c.unknown, c.batch));
    this.writer.onLost = () => (this.afterLoss = true);
    // A writer thread reads its data_version when it opens, after this: what another process
    // committed in between is in the newest created_at read once it has (changesKnown is false
    // until then), and what it commits later the thread finds.
    this.writer.onOpen = () => {
      if (!this.closed) watch.unknown(this.newestCreatedAt(), false);
    };
    watch.unknown(this.newestCreatedAt(), false);
  }

  private changesKnown(): boolean {
    if (this.writer.changesPending) return false;
    if (this.afterLoss) {
      // The lost thread is gone and its batches decided: what it deleted is not known.
      this.afterLoss = false;
      this.watch?.unknown(this.newestCreatedAt(), false);
    }
    return true;
  }

  /**
   * With a writer thread only (ports.ts callsIfIdle): its calls sent (ours) and data_version
   * (another connection's commits; the thread's own move it too, and none is under way while it
   * is idle). The version is the one lastSeq read last (at most VERSION_CHECK_MS old, no read
   * transaction here): `unchangedSince` reads it afresh, so a stale one only makes it say "changed".
   */
  private stateMark(): StateMark | undefined {
    const calls = this.writer.callsIfIdle();
    if (calls === undefined) return undefined;
    return { calls, version: this.versionRead };
  }

  private unchangedSince(mark: StateMark): boolean {
    if (this.writer.callsIfIdle() !== mark.calls) return false;
    return this.readVersion() === mark.version;
  }

  private readVersion(): number {
    this.versionRead = (this.dataVersion.get() as { data_version: number }).data_version;
    return this.versionRead;
  }

  private newestCreatedAt(): number {
    return (this.maxCreatedAt.get() as { t: number }).t;
  }

  lastSeq(): number {
    const w = this.writer;
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
    // a batch in flight, which may be waiting for another process's write lock meanwhile. Our
    // writer thread's commits move data_version too, so it is asked whether someone else's did
    // (its own connection's data_version tells); the writer on this thread shares this
    // connection, and the change is someone else's.
    if (this.watch) w.checkChanges();
    // The writer thread's commits reach this seq as its answers are fanned out (writer-thread.ts):
    // with a batch in flight, what this connection sees may not be fanned out yet. Its answer
    // moves the seq instead, and this change is looked at again once it is idle.
    if (w.busy) return w.seq;
    this.seenVersion = version;
    w.seq = Math.max(w.seq, (this.maxSeq.get() as { s: number }).s);
    return w.seq;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.readers.close();
    // The writer's connection is the last one: its checkpoint folds the WAL in.
    return this.writer.close(this.db);
  }
}
