// The store boundary. The relay only speaks to this interface, so an asynchronous backend
// (Postgres) can sit behind it; the SQLite store answers synchronously where it can.
import type { NostrEvent } from "../protocol/event.ts";
import type { QueryJob } from "./query.ts";

export interface PendingWrite {
  event: NostrEvent;
  /** The serialized event, built once at ingest. */
  json: string;
}

export type WriteOutcome =
  | { stored: true; seq: number }
  | { stored: false; duplicate: true }
  | { stored: false; duplicate: false; reason: string };

export interface Store {
  /** Is an event with this id stored? */
  has(id: string): boolean | Promise<boolean>;
  /** Commits a batch atomically; one outcome per write, in order. */
  writeBatch(batch: PendingWrite[]): WriteOutcome[] | Promise<WriteOutcome[]>;
  /** Stored events matching the job, serialized, newest first. */
  query(job: QueryJob): Promise<string[]>;
  /** The highest committed seq: a REQ's snapshot point. */
  lastSeq(): number;
  close(): Promise<void>;
}
