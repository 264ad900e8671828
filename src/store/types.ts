// The store boundary. The relay only speaks to this interface, so an asynchronous backend
// (Postgres) can sit behind it; the SQLite store answers synchronously where it can.
import type { NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";
import type { CountJob, NegItems, NegJob, QueryJob } from "./query.ts";
import type { ReadContext } from "./readers.ts";
import type { WriteRules } from "./write.ts";

export interface PendingWrite {
  event: NostrEvent;
  /** The serialized event, built once at ingest. */
  json: string;
  /**
   * A request to vanish (kind 62) the policies refused for the sender's standing (AUTH, bans,
   * lists: policy/defaults.ts judgeEvent), with that refusal: NIP-62 has it carried out
   * anyway, so the writer records the vanish and deletes, but does not store the event; its
   * outcome is that refusal, saying the deletion was done.
   */
  vanishOnly?: Refusal;
}

export type WriteOutcome =
  | { stored: true; seq: number }
  | { stored: false; duplicate: true }
  /** Not stored, and why: "blocked" (its author deleted it or vanished), "duplicate" (a newer version is stored), "error" (the write failed), or a vanishOnly's refusal. */
  | { stored: false; duplicate: false; refusal: Refusal };

/** One row of admin state: which list, the key in it, the reason or value, when (seconds). */
export interface AdminEntry {
  list: string;
  key: string;
  value: string;
  at: number;
}

export interface AdminLogEntry {
  at: number;
  pubkey: string;
  method: string;
  /** JSON of the params. */
  params: string;
  /** "ok", or the error text. */
  result: string;
}

/** Where NIP-86 admin state lives: the same database as the events. */
export interface AdminStore {
  entries(): AdminEntry[] | Promise<AdminEntry[]>;
  put(e: AdminEntry): void | Promise<void>;
  remove(list: string, key: string): void | Promise<void>;
  /** Records a NIP-98 token id until `expires`; false if it was used before (a replay). */
  useToken(id: string, expires: number, now: number): boolean | Promise<boolean>;
  log(e: AdminLogEntry): void | Promise<void>;
  recentLog(limit: number): AdminLogEntry[] | Promise<AdminLogEntry[]>;
  /** Deletes a stored event (banevent); false if it was not stored. */
  deleteEvent(id: string): boolean | Promise<boolean>;
  /**
   * Deletes every stored event of an author (banpubkey): a big one in steps (Store.purgeStep),
   * after the call returns; how many were deleted at once.
   */
  deleteAuthor(pubkey: string): number | Promise<number>;
}

/** What a store with other writers (other nodes) tells the relay. */
export interface CommitFeed {
  /** Each event committed here or by another node, once, in commit order (for fanout). */
  committed(event: NostrEvent, json: string): void;
  /** Another node changed the admin state. */
  adminChanged(): void;
  /** An ephemeral event another node accepted (never stored, so outside the commit order). */
  ephemeral(event: NostrEvent, json: string): void;
}

export interface Store {
  readonly admin: AdminStore;
  /**
   * Stores that several nodes write to: the relay fans out from this feed (in commit order,
   * its own commits included) instead of from its writer queue.
   */
  follow?(feed: CommitFeed): void;
  /** Such stores also carry this node's ephemeral events to the other nodes' subscribers. */
  shareEphemeral?(event: NostrEvent, json: string): void;
  /** Is an event with this id stored? */
  has(id: string): boolean | Promise<boolean>;
  /** Commits a batch atomically; one outcome per write, in order. */
  writeBatch(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] | Promise<WriteOutcome[]>;
  /**
   * Stored events matching the job, serialized, newest first, in batches of bounded size. The
   * read advances only as the caller asks for the next batch (so a caller waiting for a slow
   * socket holds it); leaving the loop early ends it.
   */
  query(job: QueryJob, ctx?: ReadContext): AsyncIterable<string[]>;
  /** NIP-45 counts. */
  count(job: CountJob, ctx?: ReadContext): Promise<{ count: number; hll?: string }>;
  /** NIP-77: (created_at, id) of the events matching a filter. */
  negentropyItems(job: NegJob, ctx?: ReadContext): Promise<NegItems>;
  /**
   * Deletions too big for one write transaction (a request to vanish of a big key, a ban),
   * recorded by the write that asked for them and carried out in steps: runs about `budgetMs`
   * of them, in a transaction of its own; true if some remain. The writer queue calls it between
   * batches (store/queue.ts), so other clients' writes and reads go on meanwhile.
   */
  purgeStep?(budgetMs: number): boolean | Promise<boolean>;
  /** Set by the writer queue: the store calls it when it records new purge work. */
  onPurge?: () => void;
  /** NIP-40: deletes expired events; returns how many. */
  sweepExpired(now: number): number | Promise<number>;
  /** Forgets the waiting reads of an owner (a connection) that went away. */
  cancelReads?(owner: object): void;
  /**
   * Resolves once the store's worker threads have opened their database connections: the relay
   * listens only then, so a flood of connections cannot take the descriptors they need.
   */
  ready?(): Promise<void>;
  /** Bytes the database takes on disk (for status and metrics). */
  sizeBytes(): number | Promise<number>;
  /** The highest committed seq: a request's snapshot point. */
  lastSeq(): number;
  close(): Promise<void>;
}

export type { ReadContext, WriteRules };

/** Every batch of a query, concatenated (tools and tests; the relay streams them). */
export async function allRows(batches: AsyncIterable<string[]>): Promise<string[]> {
  const rows: string[] = [];
  for await (const batch of batches) for (const json of batch) rows.push(json);
  return rows;
}
