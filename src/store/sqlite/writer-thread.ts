// The main thread's side of the writer thread (store/sqlite/writer-worker.ts), which owns the
// SQLite write connection. A batch crosses as one string message (a small JSON head, then its
// stored JSONs: no structured clone per event) and comes back as one seq per event; the
// worker handles messages in order, so replies come in commit order, and a duplicate check
// (has) sent after a batch is answered after that batch's commit. Beside it, the thread that
// checkpoints its WAL (checkpointer.ts). The store's writer (ports.ts SqliteWriterPort).
import { log } from "../../log.ts";
import type { Database } from "bun:sqlite";
import type { Prefix } from "../../protocol/reasons.ts";
import { workerUrl } from "../../workers.ts";
import { StoreClosedError, type PendingWrite, type WriteOutcome, type WriteRules } from "../types.ts";
import type { Changes } from "./write.ts";
import { Checkpointer, SOLO_AUTOCHECKPOINT, WRITER_AUTOCHECKPOINT } from "./checkpointer.ts";
import type { SqliteWriterPort } from "./ports.ts";

type AdminMethod =
  | "put"
  | "remove"
  | "useToken"
  | "log"
  | "deleteEvent"
  | "deleteAuthor"
  | "setGroupGates"
  | "hide"
  | "unhide"
  | "purgeHidden";
/** The writes of store/sqlite/admission.ts SqliteAdmission. */
export type AdmissionWrite =
  | "put"
  | "remove"
  | "putInvoice"
  | "checkedInvoice"
  | "settleInvoice"
  | "reconcilePaid"
  | "addBalances"
  | "putNip05"
  | "removeNip05"
  | "putInvite"
  | "takeInvite"
  | "issueInvite";

export type WriterCall =
  | { id: number; call: "purgeStep"; budgetMs: number }
  | { id: number; call: "sweepExpired"; now: number }
  | { id: number; call: "admin"; method: AdminMethod; args: unknown[] }
  | { id: number; call: "admission"; method: AdmissionWrite; args: unknown[] }
  /** Tells (a changes reply) whether another connection committed since the last call. */
  | { id: number; call: "changes" }
  /** Sets the connection's own checkpoint threshold (pages) when given; answers the one in force. */
  | { id: number; call: "walPages"; pages?: number };

export type WriterRequest =
  | { open: string; synchronous: "normal" | "full"; walPages: number }
  | { close: true }
  /**
   * A batch: a BatchHead as JSON, a newline, then the batch's stored JSONs one after the other;
   * or duplicate checks: "?", the request id, a comma, then the 64-character ids (answered with
   * a string of "1" stored / "0" not, one per id).
   */
  | string
  | WriterCall;

export interface BatchHead {
  id: number;
  /** Of each stored JSON, in UTF-16 code units. */
  lengths: number[];
  /** The writes that are a refused request to vanish, carried out (PendingWrite.vanishOnly). */
  vanishOnly: [number, Prefix, string][];
  rules: Omit<WriteRules, "searchSkipKinds"> & { searchSkipKinds: number[] };
}

export type WriterReply =
  | { ready: true; seq: number }
  | { closed: true; warnings: string[] }
  | { purge: true }
  | { purged: number[] }
  | { changes: Changes }
  /** A batch's answer; `purges`: [index, purge] of its deletions still going on (WriteOutcome.purge). */
  | { id: number; seqs: Float64Array; refusals: [number, Prefix, string][]; purges: [number, number][]; seq: number }
  | { id: number; result: unknown }
  | { id: number; error: { message: string; code?: string; name: string } };

type CallOf<C> = C extends { call: infer K } ? Omit<C, "id"> & { call: K } : never;

interface Pending {
  resolve(reply: WriterReply): void;
  reject(err: Error): void;
  /** A batch's event ids, in its order (what a lost thread's batch is looked up by). */
  ids?: string[];
}

/** A batch whose writer thread was lost before its answer came: see lost. */
interface LostBatch extends Pending {
  id: number;
  ids: string[];
}

/** How long a lost writer thread's "close" is waited for before its batch is decided all the same. */
const LOST_CLOSE_WAIT_MS = 30_000;

/** A writer thread that died this soon after it was started is started again only after a backoff. */
const RESTART_BACKOFF_MS = { min: 100, max: 10_000, quick: 1000 };

export class WriterThread implements SqliteWriterPort {
  /** Undefined while a restart waits for its backoff: calls are then refused at once. */
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private sent = 0;
  private nextId = 1;
  private opened = false;
  private closing = false;
  private readyWaiters: Pending[] = [];
  private startedAt = 0;
  private backoffMs = 0;
  /** Duplicate checks of this turn of the event loop, sent together (has). */
  private checks: { id: string; resolve(found: boolean): void; reject(err: Error): void }[] = [];
  /** Batches sent and not yet answered. */
  private batches = 0;
  /** Batches of a lost writer thread, waiting for that thread to be gone (see lost). */
  private lostBatches = new Set<LostBatch>();
  /** Told when the worker records new purge work. */
  onPurge?: () => void;
  /** Told which purges the worker finished (Store.watchPurges: PurgeWatch.done). */
  onPurged?: (ids: number[]) => void;
  /** Told what the worker's calls changed beyond their answers, before those answers (ChangeWatch). */
  onChanges?: (c: Changes) => void;
  /** Told when the thread was lost: what its last transactions did is not known. */
  onLost?: () => void;
  /** Told each time a thread has opened its connection (at start, after a loss). */
  onOpen?: () => void;
  /** Copies the committed WAL into the database file, told of each commit. */
  private readonly checkpointer: Checkpointer;
  /** The connection's own checkpoint threshold, pages (setWalPages). */
  private walPages = WRITER_AUTOCHECKPOINT;
  /** "changes" calls sent and not answered (checkChanges), and whether to ask again. */
  private asking = 0;
  private askAgain = false;

  constructor(
    private readonly path: string,
    private readonly synchronous: "normal" | "full",
    /** The highest seq committed (what the caller found at start; then each answer's, see outcomes). */
    public seq: number,
    /** Each id's seq in the database (0: not stored), read on another connection (see lost). */
    private readonly seqsOf: (ids: string[]) => number[],
    /** The purge of the NIP-09 deletion stored at this seq, while it goes on (see settleLost). */
    private readonly purgeOf: (seq: number) => number | undefined = () => undefined,
  ) {
    this.worker = this.spawn();
    this.checkpointer = new Checkpointer(path, synchronous);
    this.checkpointer.onLost = () => this.setWalPages(SOLO_AUTOCHECKPOINT);
  }

  private spawn(): Worker {
    const worker = new Worker(workerUrl("./store/sqlite/writer-worker.ts"));
    this.startedAt = performance.now();
    this.opened = false;
    worker.postMessage({ open: this.path, synchronous: this.synchronous, walPages: this.walPages } satisfies WriterRequest);
    worker.onmessage = (msg: MessageEvent) => this.onReply(msg.data as WriterReply);
    worker.onerror = (e) => {
      e.preventDefault?.();
      this.lost(worker, `failed: ${e.message}`);
    };
    // A worker that ends without an error event (process.exit in it, terminate) drops every
    // message sent to it afterwards: without this, its batch would never be answered and every
    // EVENT behind it would wait for good.
    worker.addEventListener("close", () => this.lost(worker, "exited"));
    return worker;
  }

  /**
   * The writer thread is gone: the calls and checks waiting on it are refused, and a new one is
   * started, after a backoff when the last one died young. Its batches in flight may have
   * committed before their answer was lost: they stay in flight (busy: the snapshot point does not
   * move) until that thread is gone for sure, then each event's outcome is what the database holds
   * (settleLost), so an event that is stored is fanned out and answered OK, and one that is not is
   * answered `error:` as before.
   */
  private lost(worker: Worker, how: string): void {
    if (worker !== this.worker || this.closing) return;
    this.worker = undefined;
    log.error(`writer thread ${how}; starting a new one`);
    this.onLost?.();
    const err = new Error(`the writer thread ${how}`);
    const batches: LostBatch[] = [];
    for (const [id, p] of this.pending) if (p.ids) batches.push({ ...p, id, ids: p.ids });
    for (const b of batches) this.pending.delete(b.id);
    this.failAll(err);
    if (batches.length > 0) this.settleWhenGone(worker, batches, err, how === "exited");
    const young = performance.now() - this.startedAt < RESTART_BACKOFF_MS.quick;
    this.backoffMs = young ? Math.min(Math.max(this.backoffMs * 2, RESTART_BACKOFF_MS.min), RESTART_BACKOFF_MS.max) : 0;
    const restart = () => {
      if (!this.closing) this.worker = this.spawn();
    };
    if (this.backoffMs === 0) restart();
    else setTimeout(restart, this.backoffMs).unref?.();
  }

  /**
   * A transaction in a thread that is still running (after an error event, say) may yet commit:
   * its batches are decided once its "close" has come (after terminate, that is once its native
   * work, a COMMIT included, has returned), or after LOST_CLOSE_WAIT_MS should it never come.
   */
  private settleWhenGone(worker: Worker, batches: LostBatch[], err: Error, gone: boolean): void {
    for (const b of batches) this.lostBatches.add(b);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const settle = () => {
      clearTimeout(timer);
      for (const b of batches) if (this.lostBatches.delete(b)) this.settleLost(b, err);
    };
    if (gone) return settle();
    worker.addEventListener("close", settle);
    timer = setTimeout(settle, LOST_CLOSE_WAIT_MS);
    timer.unref?.();
    worker.terminate();
  }

  /**
   * A lost batch answered from the database: an id stored past the last seq fanned out is this
   * batch's (stored, at that seq), one stored at or before it a duplicate, one not stored the
   * failure of today (`error:`). Nothing stored: the transaction did not commit, the batch fails.
   */
  private settleLost(b: LostBatch, err: Error): void {
    // A stored NIP-09 deletion whose purge goes on keeps waiting for it, as its answer would have said.
    let found: number[];
    try {
      found = this.seqsOf(b.ids);
    } catch (e) {
      log.error("could not look up the events of a lost writer thread's batch:", e);
      return b.reject(err);
    }
    if (!found.some((s) => s > 0)) return b.reject(err);
    const seqs = new Float64Array(b.ids.length);
    const refusals: [number, Prefix, string][] = [];
    const purges: [number, number][] = [];
    const mine = new Set<string>();
    let seq = this.seq;
    b.ids.forEach((id, i) => {
      const s = found[i]!;
      if (s > this.seq && !mine.has(id)) {
        seqs[i] = s;
        seq = Math.max(seq, s);
        mine.add(id);
        const purge = this.lostPurge(s);
        if (purge !== undefined) purges.push([i, purge]);
      } else if (s > 0) seqs[i] = 0;
      else {
        seqs[i] = -1;
        refusals.push([i, "error", "could not store the event"]);
      }
    });
    b.resolve({ id: b.id, seqs, refusals, purges, seq });
  }

  /** purgeOf, a failure logged: the deletion is then answered at once. */
  private lostPurge(seq: number): number | undefined {
    try {
      return this.purgeOf(seq);
    } catch (e) {
      log.error("could not look up the purge of a lost writer thread's deletion:", e);
      return undefined;
    }
  }

  private onReply(r: WriterReply): void {
    if ("ready" in r) {
      this.opened = true;
      // Not past a batch in flight (a lost one included): its answer moves the snapshot point.
      if (this.batches === 0) this.seq = Math.max(this.seq, r.seq);
      this.onOpen?.();
      for (const w of this.readyWaiters.splice(0)) w.resolve(r);
      return;
    }
    if ("error" in r && r.id === 0 && !this.opened && !this.closing) {
      // The worker could not open the database (locked past busy_timeout, damaged, unwritable).
      const err = Object.assign(new Error(r.error.message), { code: r.error.code, name: r.error.name });
      for (const w of this.readyWaiters.splice(0)) w.reject(err);
      const worker = this.worker;
      if (worker) {
        this.lost(worker, `could not open the database: ${r.error.message}`);
        worker.terminate();
      }
      return;
    }
    if ("purge" in r) return this.onPurge?.();
    if ("purged" in r) return this.onPurged?.(r.purged);
    if ("changes" in r) return this.onChanges?.(r.changes);
    if ("closed" in r) {
      for (const w of r.warnings) log.warn(`warning: ${w}`);
      return this.pending.get(0)?.resolve(r);
    }
    const p = this.pending.get(r.id);
    this.pending.delete(r.id);
    if ("seqs" in r) this.checkpointer.committed();
    p?.resolve(r);
  }

  /** Refuses what waits on the worker (its batches are taken out before: lost). */
  private failAll(err: Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(err);
  }

  private send(m: WriterRequest, id: number, ids?: string[]): Promise<WriterReply> {
    if (this.closing) return Promise.reject(new StoreClosedError("the store is closed"));
    const worker = this.worker;
    if (!worker) return Promise.reject(new Error("the writer thread is restarting"));
    this.sent++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ids });
      worker.postMessage(m);
    });
  }

  /** Calls and batches sent to the worker so far, when it is open and none waits for its answer (so none being committed). */
  callsIfIdle(): number | undefined {
    return this.pending.size === 0 && !this.recovering ? this.sent : undefined;
  }

  /** Resolves once the worker has opened its connection; rejects when it cannot. */
  ready(): Promise<void> {
    if (this.opened) return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve: () => resolve(), reject }));
  }

  /**
   * A batch committed in one transaction, or failed as a whole (an error with SQLite's code);
   * `committed` is given its outcomes as the snapshot point moves (see outcomes).
   */
  writeBatch(batch: PendingWrite[], rules: WriteRules, committed: (outcomes: WriteOutcome[]) => WriteOutcome[]): Promise<WriteOutcome[]> {
    const id = this.nextId++;
    const lengths = new Array<number>(batch.length);
    const vanishOnly: [number, Prefix, string][] = [];
    // parts[0] is the head; one join makes one flat string (a template literal around the
    // joined JSONs is a rope, which the message copies once more: ~1.5x the main thread's cost).
    const parts = new Array<string>(batch.length + 1);
    const ids = new Array<string>(batch.length);
    batch.forEach((w, i) => {
      lengths[i] = w.json.length;
      ids[i] = w.event.id;
      if (w.vanishOnly) vanishOnly.push([i, w.vanishOnly.prefix, w.vanishOnly.message]);
      parts[i + 1] = w.json;
    });
    // Counted only once it is sent (a refused send is not in flight).
    if (this.worker && !this.closing) this.batches++;
    // One string: Bun clones a string message several times faster than an object holding the
    // same string (measured: 128 events, 59 vs 334 us of the main thread per message).
    const head: BatchHead = { id, lengths, vanishOnly, rules: { ...rules, searchSkipKinds: [...rules.searchSkipKinds] } };
    parts[0] = `${JSON.stringify(head)}\n`;
    // A lost worker's batches count until they are settled (lost).
    const done = () => (this.batches = Math.max(0, this.batches - 1));
    return this.send(parts.join(""), id, ids).then(
      (r) => {
        done();
        return committed(this.outcomes(r));
      },
      (err: unknown) => {
        done();
        throw err;
      },
    );
  }

  private outcomes(r: WriterReply): WriteOutcome[] {
    if ("error" in r) throw Object.assign(new Error(r.error.message), { code: r.error.code, name: r.error.name });
    const { seqs, refusals, purges, seq } = r as Extract<WriterReply, { seqs: Float64Array }>;
    // The snapshot point moves here, and writeBatch's `committed` (store/sqlite/store.ts) tells the
    // commit feed (the fanout) right after, in the same continuation: nothing else runs in
    // between, so a REQ never sees a seq whose events were not fanned out yet (store/types.ts
    // lastSeq, relay/read/req.ts).
    this.seq = Math.max(this.seq, seq);
    const out: WriteOutcome[] = new Array(seqs.length);
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      out[i] = s > 0 ? { stored: true, seq: s } : { stored: false, duplicate: true };
    }
    for (const [i, prefix, message] of refusals) out[i] = { stored: false, duplicate: false, refusal: { prefix, message } };
    for (const [i, purge] of purges) out[i] = { stored: true, seq: seqs[i]!, purge };
    return out;
  }

  /**
   * Is an event with this id stored? Asked of the writer's connection, whose page cache its own
   * commits keep warm (another connection drops its cache at each of the writer's commits and
   * reads the index pages back from the WAL: that was 16% of the main thread during ingest).
   * The checks of one turn of the event loop go in one message, behind the batches sent before
   * them, so an event in flight is found once its batch is committed.
   */
  has(id: string): Promise<boolean> {
    // The answer is one character per 64-character id: any other length would shift the rest.
    if (id.length !== 64) return Promise.resolve(false);
    // No writer thread (it is being restarted): "not known"; the writer finds a duplicate itself.
    if (!this.worker) return Promise.resolve(false);
    return new Promise((resolve, reject) => {
      if (this.checks.length === 0) setImmediate(() => this.sendChecks());
      this.checks.push({ id, resolve, reject });
    });
  }

  /** Store.hasNow: while batches are in flight, "not known" (has would wait behind them); else ask has. */
  hasNow(_id: string): boolean | undefined {
    return this.busy ? false : undefined;
  }

  private sendChecks(): void {
    const checks = this.checks;
    this.checks = [];
    const id = this.nextId++;
    this.send(`?${id},${checks.map((c) => c.id).join("")}`, id).then(
      (r) => {
        const found = (r as { result?: unknown }).result;
        if (typeof found !== "string") {
          const err = new Error("error" in r ? r.error.message : "the writer thread did not answer the duplicate checks");
          for (const c of checks) c.reject(err);
          return;
        }
        checks.forEach((c, i) => c.resolve(found.charCodeAt(i) === 49));
      },
      (err: Error) => {
        // The thread was lost (failAll): "not known", as above; the writer's own insert is the
        // check that counts. A closed store is still an error.
        for (const c of checks) err instanceof StoreClosedError ? c.reject(err) : c.resolve(false);
      },
    );
  }

  /** Are batches sent and not yet answered? */
  get busy(): boolean {
    return this.batches > 0;
  }

  /** Since a loss, until a new thread is open and the lost batches are decided. */
  get recovering(): boolean {
    return !this.opened || this.lostBatches.size > 0;
  }

  /** A "changes" question is unanswered, or a lost thread's batches are undecided (or it is not open yet). */
  get changesPending(): boolean {
    return this.asking > 0 || this.recovering;
  }

  /**
   * data_version moved, which our own commits do too: the thread is asked whether another
   * connection committed (its answer goes to onChanges). One question at a time; a change seen
   * meanwhile is asked about once it is answered (the answer may have been read before it).
   */
  checkChanges(): void {
    if (this.asking > 0) {
      this.askAgain = true;
      return;
    }
    this.asking++;
    this.call({ call: "changes" })
      .catch(() => {}) // lost: onLost
      .finally(() => {
        this.asking--;
        if (!this.askAgain) return;
        this.askAgain = false;
        this.checkChanges();
      });
  }

  purgeStep(budgetMs: number): Promise<boolean> {
    return this.call<boolean>({ call: "purgeStep", budgetMs });
  }

  sweepExpired(now: number): Promise<number> {
    return this.call<number>({ call: "sweepExpired", now });
  }

  async call<T>(c: CallOf<WriterCall>): Promise<T> {
    const id = this.nextId++;
    const r = await this.send({ ...c, id } as WriterCall, id);
    if ("error" in r) throw Object.assign(new Error(r.error.message), { code: r.error.code, name: r.error.name });
    return (r as { result: T }).result;
  }

  /** The write connection checkpoints past this many WAL pages, in this thread and any that replaces it. */
  setWalPages(pages: number): void {
    this.walPages = pages;
    // After the open message if the thread is starting; a thread started later opens with it.
    if (this.worker) this.call({ call: "walPages", pages }).catch(() => {});
  }

  admin<T>(method: AdminMethod, ...args: unknown[]): Promise<T> {
    return this.call<T>({ call: "admin", method, args });
  }

  /** Issue 33: an admission write (store/sqlite/admission.ts SqliteAdmission), between batches. */
  admission<T>(method: AdmissionWrite, args: unknown[]): Promise<T> {
    return this.call<T>({ call: "admission", method, args });
  }

  /**
   * Stops the checkpointer and closes `connection` (the store's), waits for what was sent, then
   * checkpoints the WAL and closes the connection in the worker: the last one, its checkpoint
   * folds the WAL in.
   */
  async close(connection: Database): Promise<void> {
    await this.checkpointer.close();
    connection.close(true);
    if (this.closing) return;
    const worker = this.worker;
    this.closing = true;
    const closed = new StoreClosedError("the store is closed");
    for (const b of this.lostBatches) b.reject(closed);
    this.lostBatches.clear();
    if (!worker) return;
    const answered = new Promise<WriterReply>((resolve, reject) => this.pending.set(0, { resolve, reject }));
    worker.postMessage({ close: true } satisfies WriterRequest);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([answered, new Promise((r) => (timer = setTimeout(r, 30_000)))]);
    } catch {
      // Answered with an error: the worker is ended below all the same.
    } finally {
      clearTimeout(timer);
      this.pending.delete(0);
      worker.terminate();
    }
  }
}
