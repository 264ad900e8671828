// NIP-77 sessions kept where their items were read: a reader worker (or, for an in-memory
// store, this thread). The items never travel, and reconciling a NEG-MSG is a read job like any
// other: sliced, charged to the client's query budget, taken in turn with everyone's reads.
// Messages and replies travel as bytes in buffers of their own, moved between threads, not copied.
import { NegentropyError, NegentropyServer, NegentropyStorage } from "../../nips/nip77.ts";
import type { NegJob } from "../types.ts";
import { negJob, type ReadSteps, type StatementCache } from "./query.ts";

export interface NegOpenJob {
  /** Names the session in its worker. */
  key: number;
  neg: NegJob;
  /** The client's initial message. */
  message: Uint8Array;
  frameLimit: number;
}

export interface NegMsgJob {
  key: number;
  message: Uint8Array;
}

/** A reply, or why there is none: the NIP-77 decoder's complaint, or an overflow. */
export interface NegAnswer {
  items: number;
  overflow?: boolean;
  /** In a buffer of its own (to be transferred). */
  reply?: Uint8Array;
  error?: string;
}

export class NegSessions {
  private readonly servers = new Map<number, NegentropyServer>();

  /** Reads the items (in slices, like any read), builds the session, answers the initial message. */
  *open(cache: StatementCache, job: NegOpenJob): ReadSteps<NegAnswer> {
    const items = yield* negJob(cache, job.neg);
    const count = items.timestamps.length;
    if (items.overflow) return { items: count, overflow: true };
    const server = new NegentropyServer(NegentropyStorage.fromPacked(items.timestamps, items.ids), job.frameLimit);
    this.servers.set(job.key, server);
    return { items: count, ...this.reconcile(job.key, job.message) };
  }

  // biome-ignore lint/correctness/useYield: a read job (ReadSteps) of one step: reconciling a message is not sliced
  *message(_cache: StatementCache, job: NegMsgJob): ReadSteps<NegAnswer> {
    return { items: 0, ...this.reconcile(job.key, job.message) };
  }

  /** Forgets a session; the bytes its index held. */
  close(key: number): number {
    const server = this.servers.get(key);
    this.servers.delete(key);
    // Per item: its timestamp, its id and the id sums of the fingerprints (nips/nip77.ts).
    return (server?.storage.size ?? 0) * 72;
  }

  clear(): void {
    this.servers.clear();
  }

  private reconcile(key: number, message: Uint8Array): { reply?: Uint8Array; error?: string } {
    const server = this.servers.get(key);
    if (!server) return { error: "closed: no open negentropy session with this id" };
    try {
      return { reply: server.reconcileBytes(message).slice() };
    } catch (err) {
      if (!(err instanceof NegentropyError)) throw err;
      this.servers.delete(key);
      return { error: `invalid: ${err.message}` };
    }
  }
}
