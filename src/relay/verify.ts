// Verifiers: the pipeline asks "is this signature valid?" and gets a promise. Jobs arriving in
// the same tick are batched and spread over a pool of workers sized to the cores.
import { availableParallelism } from "node:os";
import type { VerifyJob } from "../protocol/schnorr.ts";
import type { NativeLibrary } from "./secp256k1-native.ts";
import { workerUrl } from "../workers.ts";

export interface Verifier {
  readonly name: string;
  verify(job: VerifyJob): Promise<boolean>;
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
  inFlight: number;
}

/** Workers idle this long are stopped (an idle relay holds no verify threads); restarted on demand. */
const IDLE_MS = 5 * 60_000;

export class WorkerVerifier implements Verifier {
  readonly name: string;
  private readonly size: number;
  private slots: Slot[] = [];
  private readonly waiting = new Map<number, ((ok: boolean) => void)[]>();
  private queue: { job: VerifyJob; resolve: (ok: boolean) => void }[] = [];
  private scheduled = false;
  private next = 1;
  private lastUsed = 0;
  private readonly idleTimer: ReturnType<typeof setInterval>;
  depth = 0;

  /**
   * `native`: the libsecp256k1 to load in each worker (findNativeLibrary checked it loads), else
   * @noble/curves. Workers start with the first signature to check, not with the relay.
   */
  constructor(workers = 0, private readonly native?: NativeLibrary, private readonly maxBatch = 64) {
    this.size = workers > 0 ? workers : availableParallelism();
    const what = native ? `native libsecp256k1${native.source === "embedded" ? " (embedded)" : ""}` : "noble";
    this.name = `${what} in ${this.size} worker${this.size === 1 ? "" : "s"}`;
    this.idleTimer = setInterval(() => this.retireIfIdle(), IDLE_MS / 5);
    this.idleTimer.unref();
  }

  /** Worker threads running now (0 until the first EVENT, and again after a quiet spell). */
  get threads(): number {
    return this.slots.length;
  }

  verify(job: VerifyJob): Promise<boolean> {
    this.depth++;
    return new Promise((resolve) => {
      this.queue.push({ job, resolve });
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
    this.lastUsed = performance.now();
    if (this.slots.length === 0) this.start();
    // Spread the tick's jobs evenly, least-loaded worker first, in batches of maxBatch.
    const per = Math.min(this.maxBatch, Math.max(1, Math.ceil(queue.length / this.slots.length)));
    for (let i = 0; i < queue.length; i += per) {
      const chunk = queue.slice(i, i + per);
      const slot = this.slots.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
      const n = this.next++;
      slot.inFlight += chunk.length;
      this.waiting.set(n, chunk.map((c) => c.resolve));
      // Only the three fields the check needs cross to the worker, not the content and tags.
      slot.worker.postMessage({ n, jobs: chunk.map(({ job: { id, pubkey, sig } }) => ({ id, pubkey, sig })) });
    }
  }

  private start(): void {
    for (let i = 0; i < this.size; i++) {
      const slot: Slot = { worker: new Worker(workerUrl("./relay/verify-worker.ts")), inFlight: 0 };
      slot.worker.postMessage({ native: this.native?.path });
      slot.worker.onmessage = (msg: MessageEvent) => {
        const { n, ok } = msg.data as { n: number; ok: boolean[] };
        const resolvers = this.waiting.get(n)!;
        this.waiting.delete(n);
        slot.inFlight -= resolvers.length;
        this.depth -= resolvers.length;
        resolvers.forEach((r, i) => r(ok[i]!));
      };
      slot.worker.onerror = (e) => {
        // A verifier that cannot answer would leave EVENTs hanging: fail loudly instead.
        console.error(`verify worker failed: ${e.message}`);
        process.exit(70);
      };
      slot.worker.unref();
      this.slots.push(slot);
    }
  }

  private retireIfIdle(): void {
    if (this.slots.length === 0 || this.depth > 0 || performance.now() - this.lastUsed < IDLE_MS) return;
    this.stop();
  }

  private stop(): void {
    for (const s of this.slots) s.worker.terminate();
    this.slots = [];
  }

  close(): void {
    clearInterval(this.idleTimer);
    this.stop();
  }
}
