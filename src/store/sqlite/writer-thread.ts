// The main thread's side of the writer thread (store/sqlite/writer-worker.ts), which owns the
// SQLite write connection. A batch crosses as one string message (a small JSON head, then its
// stored JSONs: no structured clone per event) and comes back as one seq per event; the
// worker handles messages in order, so replies come in commit order, and a duplicate check
// (has) sent after a batch is answered after that batch's commit.
import type { Prefix } from "../../protocol/reasons.ts";
import { workerUrl } from "../../workers.ts";
import { StoreClosedError, type PendingWrite, type WriteOutcome, type WriteRules } from "../types.ts";

export type AdminMethod = "put" | "remove" | "useToken" | "log" | "deleteEvent" | "deleteAuthor";

export type WriterCall =
  | { id: number; call: "purgeStep"; budgetMs: number }
  | { id: number; call: "sweepExpired"; now: number }
  | { id: number; call: "admin"; method: AdminMethod; args: unknown[] };

export type WriterRequest =
  | { open: string; synchronous: "normal" | "full" }
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
  | { id: number; seqs: Float64Array; refusals: [number, Prefix, string][]; seq: number }
  | { id: number; result: unknown }
  | { id: number; error: { message: string; code?: string; name: string } };

type CallOf<C> = C extends { call: infer K } ? Omit<C, "id"> & { call: K } : never;

interface Pending {
  resolve(reply: WriterReply): void;
  reject(err: Error): void;
}

/** A writer thread that died this soon after it was started is started again only after a backoff. */
const RESTART_BACKOFF_MS = { min: 100, max: 10_000, quick: 1000 };

export class WriterThread {
  /** Undefined while a restart waits for its backoff: calls are then refused at once. */
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
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
  /** Told when the worker records new purge work. */
  onPurge?: () => void;

  constructor(
    private readonly path: string,
    private readonly synchronous: "normal" | "full",
    /** The highest seq committed (what the caller found at start; then each answer's, see outcomes). */
    public seq: number,
  ) {
    this.worker = this.spawn();
  }

  private spawn(): Worker {
    const worker = new Worker(workerUrl("./store/sqlite/writer-worker.ts"));
    this.startedAt = performance.now();
    this.opened = false;
    worker.postMessage({ open: this.path, synchronous: this.synchronous } satisfies WriterRequest);
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
   * The writer thread is gone: everything waiting on it is refused (the queue answers its EVENTs
   * `error:`), and a new one is started, after a backoff when the last one died young.
   */
  private lost(worker: Worker, how: string): void {
    if (worker !== this.worker || this.closing) return;
    this.worker = undefined;
    console.error(`writer thread ${how}; starting a new one`);
    const err = new Error(`the writer thread ${how}`);
    this.failAll(err);
    const young = performance.now() - this.startedAt < RESTART_BACKOFF_MS.quick;
    this.backoffMs = young ? Math.min(Math.max(this.backoffMs * 2, RESTART_BACKOFF_MS.min), RESTART_BACKOFF_MS.max) : 0;
    const restart = () => {
      if (!this.closing) this.worker = this.spawn();
    };
    if (this.backoffMs === 0) restart();
    else setTimeout(restart, this.backoffMs).unref?.();
  }

  private onReply(r: WriterReply): void {
    if ("ready" in r) {
      this.opened = true;
      this.seq = Math.max(this.seq, r.seq);
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
    if ("closed" in r) {
      for (const w of r.warnings) console.warn(`warning: ${w}`);
      return this.pending.get(0)?.resolve(r);
    }
    const p = this.pending.get(r.id);
    this.pending.delete(r.id);
    p?.resolve(r);
  }

  private failAll(err: Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    this.batches = 0;
    for (const p of all) p.reject(err);
  }

  private send(m: WriterRequest, id: number, transfer: ArrayBuffer[] = []): Promise<WriterReply> {
    if (this.closing) return Promise.reject(new StoreClosedError("the store is closed"));
    const worker = this.worker;
    if (!worker) return Promise.reject(new Error("the writer thread is restarting"));
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage(m, transfer);
    });
  }

  /** Resolves once the worker has opened its connection; rejects when it cannot. */
  ready(): Promise<void> {
    if (this.opened) return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve: () => resolve(), reject }));
  }

  /** A batch committed in one transaction, or failed as a whole (an error with SQLite's code). */
  writeBatch(batch: PendingWrite[], rules: WriteRules): Promise<WriteOutcome[]> {
    const id = this.nextId++;
    const lengths = new Array<number>(batch.length);
    const vanishOnly: [number, Prefix, string][] = [];
    // parts[0] is the head; one join makes one flat string (a template literal around the
    // joined JSONs is a rope, which the message copies once more: ~1.5x the main thread's cost).
    const parts = new Array<string>(batch.length + 1);
    batch.forEach((w, i) => {
      lengths[i] = w.json.length;
      if (w.vanishOnly) vanishOnly.push([i, w.vanishOnly.prefix, w.vanishOnly.message]);
      parts[i + 1] = w.json;
    });
    // Counted only once it is sent (a refused send is not in flight).
    if (this.worker && !this.closing) this.batches++;
    // One string: Bun clones a string message several times faster than an object holding the
    // same string (measured: 128 events, 59 vs 334 us of the main thread per message).
    const head: BatchHead = { id, lengths, vanishOnly, rules: { ...rules, searchSkipKinds: [...rules.searchSkipKinds] } };
    parts[0] = `${JSON.stringify(head)}\n`;
    // failAll (a lost worker) sets batches to 0 itself.
    const done = () => (this.batches = Math.max(0, this.batches - 1));
    return this.send(parts.join(""), id).then(
      (r) => {
        done();
        return this.outcomes(r);
      },
      (err: unknown) => {
        done();
        throw err;
      },
    );
  }

  private outcomes(r: WriterReply): WriteOutcome[] {
    if ("error" in r) throw Object.assign(new Error(r.error.message), { code: r.error.code, name: r.error.name });
    const { seqs, refusals, seq } = r as Extract<WriterReply, { seqs: Float64Array }>;
    // The snapshot point moves here, and the caller (store/queue.ts) fans the batch out in the
    // continuation of this very promise: no other task runs in between, so a REQ never sees a
    // seq whose events were not fanned out yet (store/types.ts lastSeq, relay/req.ts).
    this.seq = Math.max(this.seq, seq);
    const out: WriteOutcome[] = new Array(seqs.length);
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      out[i] = s > 0 ? { stored: true, seq: s } : { stored: false, duplicate: true };
    }
    for (const [i, prefix, message] of refusals) out[i] = { stored: false, duplicate: false, refusal: { prefix, message } };
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

  async call<T>(c: CallOf<WriterCall>): Promise<T> {
    const id = this.nextId++;
    const r = await this.send({ ...c, id } as WriterCall, id);
    if ("error" in r) throw Object.assign(new Error(r.error.message), { code: r.error.code, name: r.error.name });
    return (r as { result: T }).result;
  }

  admin<T>(method: AdminMethod, ...args: unknown[]): Promise<T> {
    return this.call<T>({ call: "admin", method, args });
  }

  /** Waits for what was sent, then checkpoints the WAL and closes the connection in the worker. */
  async close(): Promise<void> {
    if (this.closing) return;
    const worker = this.worker;
    this.closing = true;
    if (!worker) return;
    const closed = new Promise<WriterReply>((resolve, reject) => this.pending.set(0, { resolve, reject }));
    worker.postMessage({ close: true } satisfies WriterRequest);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([closed, new Promise((r) => (timer = setTimeout(r, 30_000)))]);
    } catch {
      // Answered with an error: the worker is ended below all the same.
    } finally {
      clearTimeout(timer);
      this.pending.delete(0);
      worker.terminate();
    }
  }
}
