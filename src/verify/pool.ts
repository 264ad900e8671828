// Verifiers: the pipeline asks "is this signature valid?" and gets a promise. Jobs arriving in
// the same tick are batched and spread over a pool of workers sized to the cores.
import { log } from "../log.ts";
import { availableParallelism } from "node:os";
import type { VerifyJob } from "../protocol/schnorr.ts";
import type { NativeLibrary } from "./native.ts";
import { workerUrl } from "../workers.ts";

/** Most signature checks waiting relay-wide before EVENTs are refused as overload. */
export const MAX_VERIFY_BACKLOG = 20000;

export interface Verifier {
  readonly name: string;
  verify(job: VerifyJob): Promise<boolean>;
  /** Resolves once its worker threads can verify (rejects if one could not start). */
  ready?(): Promise<void>;
  /** Jobs waiting for an answer (bounded by the ingest pipeline). */
  readonly depth: number;
  close(): void;
}

/** For trusted imports and benchmarks (`--no-verify`): every signature passes. */
export const noVerifier: Verifier = { name: "none", depth: 0, verify: async () => true, close() {} };

/** Verifies on the calling thread: for rare checks (NIP-42 AUTH) when no pool is running. */
export const inlineVerifier: Verifier = {
  name: "noble-inline",
  depth: 0,
  // Loaded on first use: the relay's main thread otherwise never needs @noble/curves.
  verify: async (job) => (await import("../protocol/schnorr.ts")).verifySchnorr(job),
  close() {},
};

interface Slot {
  worker: Worker;
  /** Loaded its verifier (the first message it sends). */
  ready: boolean;
  inFlight: number;
  /** Batches sent to this worker and not answered yet. */
  batches: Set<number>;
}

interface Waiting {
  resolvers: ((ok: boolean) => void)[];
  reject: (err: Error) => void;
}

export class WorkerVerifier implements Verifier {
  readonly name: string;
  private readonly size: number;
  private slots: Slot[] = [];
  private readonly waiting = new Map<number, Waiting>();
  private queue: { job: VerifyJob; resolve: (ok: boolean) => void; reject: (err: Error) => void }[] = [];
  private scheduled = false;
  private next = 1;
  private startError?: string;
  depth = 0;

  /**
   * `native`: the libsecp256k1 to load in each worker (findNativeLibrary checked it loads), else
   * @noble/curves. The workers start now and run until close(): a thread started later, when the
   * open-files limit may be reached, would end the process (Bun treats that failure as fatal).
   */
  constructor(
    workers = 0,
    private readonly native?: NativeLibrary,
    private readonly maxBatch = 64,
  ) {
    this.size = workers > 0 ? workers : availableParallelism();
    const what = native ? `native libsecp256k1${native.source === "embedded" ? " (embedded)" : ""}` : "noble";
    this.name = `${what} in ${this.size} worker${this.size === 1 ? "" : "s"}`;
    this.start();
  }

  /** Worker threads running now. */
  get threads(): number {
    return this.slots.length;
  }

  async ready(): Promise<void> {
    while (this.startError === undefined && this.slots.some((s) => !s.ready)) await Bun.sleep(5);
    if (this.startError !== undefined) throw new Error(`a signature verification worker could not start: ${this.startError}`);
  }

  verify(job: VerifyJob): Promise<boolean> {
    // Jobs cross as fixed-width text (dispatch); a field of another width cannot verify anyway.
    if (job.id.length !== 64 || job.pubkey.length !== 64 || job.sig.length !== 128) return Promise.resolve(false);
    this.depth++;
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.dispatch());
      }
    });
  }

  private dispatch(): void {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    if (this.slots.length === 0) {
      // Closed, or every worker failed: the pipeline answers "error:".
      this.depth -= queue.length;
      for (const q of queue) q.reject(new Error("no signature verification worker is running"));
      return;
    }
    // Spread the tick's jobs evenly, least-loaded worker first, in batches of maxBatch.
    const per = Math.min(this.maxBatch, Math.max(1, Math.ceil(queue.length / this.slots.length)));
    for (let i = 0; i < queue.length; i += per) {
      const chunk = queue.slice(i, i + per);
      const slot = this.slots.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
      const n = this.next++;
      slot.inFlight += chunk.length;
      slot.batches.add(n);
      this.waiting.set(n, { resolvers: chunk.map((c) => c.resolve), reject: (err) => chunk.forEach((c) => c.reject(err)) });
      // Only the three fields the check needs cross to the worker, not the content and tags, and
      // as one string (id, pubkey, sig: 256 characters a job; worker.ts): Bun clones a string
      // message several times cheaper than an array of objects (11% of the main thread's
      // samples during ingest went to this postMessage).
      const parts = new Array<string>(chunk.length * 3 + 1);
      parts[0] = `${n},`;
      chunk.forEach(({ job }, k) => {
        parts[3 * k + 1] = job.id;
        parts[3 * k + 2] = job.pubkey;
        parts[3 * k + 3] = job.sig;
      });
      slot.worker.postMessage(parts.join(""));
    }
  }

  private start(): void {
    for (let i = 0; i < this.size; i++) {
      const slot: Slot = { worker: new Worker(workerUrl("./verify/worker.ts")), ready: false, inFlight: 0, batches: new Set() };
      slot.worker.postMessage({ native: this.native?.path });
      slot.worker.onmessage = (msg: MessageEvent) => {
        if ((msg.data as { ready?: true }).ready) return void (slot.ready = true);
        // "<n>,<one '1' or '0' a job>"
        const reply = msg.data as string;
        const comma = reply.indexOf(",");
        const n = Number(reply.slice(0, comma));
        const { resolvers } = this.waiting.get(n)!;
        this.waiting.delete(n);
        slot.batches.delete(n);
        slot.inFlight -= resolvers.length;
        this.depth -= resolvers.length;
        resolvers.forEach((r, i) => r(reply.charCodeAt(comma + 1 + i) === 49));
      };
      slot.worker.onerror = (e) => this.fail(slot, e.message);
      slot.worker.unref();
      this.slots.push(slot);
    }
  }

  /**
   * A worker died (a bug, not load): its jobs get an error (the EVENTs an "error:" OK) and the
   * others carry on. No replacement is started (see the constructor); with none left, every
   * EVENT is answered "error:" and the operator sees why in the log.
   */
  private fail(slot: Slot, message: string): void {
    if (!this.slots.includes(slot)) return;
    if (!slot.ready) this.startError ??= message;
    this.slots = this.slots.filter((s) => s !== slot);
    log.error(
      `verify worker failed: ${message}; ${this.slots.length} of ${this.size} left${this.slots.length === 0 ? ": EVENTs get error: until the relay is restarted" : ""}`,
    );
    slot.worker.terminate();
    const err = new Error(`signature verification worker failed: ${message}`);
    for (const n of slot.batches) {
      const w = this.waiting.get(n)!;
      this.waiting.delete(n);
      this.depth -= w.resolvers.length;
      w.reject(err);
    }
  }

  close(): void {
    for (const s of this.slots) s.worker.terminate();
    this.slots = [];
  }
}
