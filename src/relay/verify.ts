// Verifiers: the pipeline asks "is this signature valid?" and gets a promise. Jobs arriving in
// the same tick are batched and spread over a pool of workers sized to the cores.
import { availableParallelism } from "node:os";
import { verifySchnorr, type VerifyJob } from "../protocol/schnorr.ts";
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
export const inlineVerifier: Verifier = { name: "noble-inline", depth: 0, verify: async (job) => verifySchnorr(job), close() {} };

interface Slot {
  worker: Worker;
  inFlight: number;
}

export class WorkerVerifier implements Verifier {
  readonly name: string;
  private readonly slots: Slot[] = [];
  private readonly waiting = new Map<number, ((ok: boolean) => void)[]>();
  private queue: { job: VerifyJob; resolve: (ok: boolean) => void }[] = [];
  private scheduled = false;
  private next = 1;
  depth = 0;

  /** `native`: libsecp256k1 through bun:ffi (the caller checked it loads), else @noble/curves. */
  constructor(workers = 0, native = false, private readonly maxBatch = 64) {
    const size = workers > 0 ? workers : availableParallelism();
    this.name = `${native ? "native libsecp256k1" : "noble"} in ${size} worker${size === 1 ? "" : "s"}`;
    for (let i = 0; i < size; i++) {
      const slot: Slot = { worker: new Worker(workerUrl("./relay/verify-worker.ts")), inFlight: 0 };
      slot.worker.postMessage({ native });
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

  close(): void {
    for (const s of this.slots) s.worker.terminate();
  }
}
