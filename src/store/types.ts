// The store boundary. The relay only speaks to this interface, so an asynchronous backend
// (Postgres) can sit behind it; the SQLite store answers synchronously where it can. Both
// backends (store/sqlite/, store/postgres/) take their job, context and rules types and their
// errors from here, and neither imports the other.
import type { GroupGate } from "../nips/nip29.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Filter } from "../protocol/filter.ts";
import type { Refusal } from "../protocol/reasons.ts";

/** Which NIPs shape storage right now (read per batch, so a config reload applies at once). */
export interface WriteRules {
  deletion: boolean;
  vanish: boolean;
  search: boolean;
  /** Kinds whose content is not indexed for search (encrypted DMs and the like). */
  searchSkipKinds: ReadonlySet<number>;
}

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
  /**
   * The sender's address group (policy/ip.ts ipGroup) when its address is charged: the writer
   * queue takes its batches round-robin by group and holds each group to its share. Absent
   * (import, sync, stream, mirrors, an exempt private address): one shared group, no share.
   */
  group?: string;
  /** What the event costs the writer (policy/write-cost.ts writeCost), >= 1; absent: 1. Batches are cut by it. */
  cost?: number;
}

export type WriteOutcome =
  /**
   * `purge`: a NIP-09 deletion whose deleting goes on in purge steps (Store.purgeStep); its OK
   * waits until the store names it done (PurgeWatch), so nothing it deletes is served after the OK.
   */
  | { stored: true; seq: number; purge?: number }
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
  entries(): Promise<AdminEntry[]>;
  put(e: AdminEntry): Promise<void>;
  remove(list: string, key: string): Promise<void>;
  /** Records a NIP-98 token id until `expires`; false if it was used before (a replay). */
  useToken(id: string, expires: number, now: number): Promise<boolean>;
  log(e: AdminLogEntry): Promise<void>;
  recentLog(limit: number): Promise<AdminLogEntry[]>;
  /**
   * Deletes a stored event (banevent); false if it was not stored. `keepOut`: its id is also
   * tombstoned as its author's NIP-09 deletion would, so the event is refused if sent again (a
   * NIP-29 moderator's 9005: the group state forgets old targets, the store does not).
   */
  deleteEvent(id: string, keepOut?: boolean): Promise<boolean>;
  /**
   * Deletes every stored event of an author (banpubkey): a big one in steps (Store.purgeStep),
   * after the call returns; how many were deleted at once.
   */
  deleteAuthor(pubkey: string): Promise<number>;
  /**
   * NIP-29: the group state's gates written to group_gates (the writer raises them itself, in the
   * transaction of the 9002 or 9008 that may gate: nips/nip29.ts raisedGate). A row set by an
   * event committed after `asOf` (the event whose commit the state judged, or a seq) is left as
   * it is: that event's own correction follows.
   */
  setGroupGates(gates: readonly GroupGate[], asOf: GateAsOf): Promise<void>;
  /** Issue 34: what bans hide now (the `hidden` table), oldest first. */
  hidden(): Promise<HiddenEntry[]>;
  /**
   * Hides an author's or one event's stored events from every read (Visibility.hidden) from
   * `since` on, until unhide or purgeHidden; a row already there keeps its since.
   */
  hide(what: HiddenWhat, key: string, since: number): Promise<void>;
  /** Serves them again (unbanpubkey, allowevent). */
  unhide(what: HiddenWhat, key: string): Promise<void>;
  /**
   * After the retention: deletes what a row hides, in steps like deleteAuthor's (a call starts
   * the purge, a later one sees it finished); true once it is done and the row gone.
   */
  purgeHidden(what: HiddenWhat, key: string): Promise<boolean>;
}

/** What a ban hides: every stored event of a pubkey, or one event by id. */
export type HiddenWhat = "pubkey" | "event";

/** One row of the `hidden` table (issue 34): hidden since (seconds), purged after the retention. */
export interface HiddenEntry {
  what: HiddenWhat;
  /** The pubkey or event id, hex. */
  key: string;
  since: number;
  /** Its purge has started (it is deleted, not restored, whatever comes). */
  purging: boolean;
}

/** What the state had applied when it computed gates: up to the event with this id, or up to this seq. */
export type GateAsOf = { id: string } | { seq: number };

/** Issue 33: one stored admission of a pubkey on one basis (policy/admission.ts Basis: paid, verified, member). */
export interface AdmissionRow {
  pubkey: string;
  basis: string;
  /** When admitted (seconds). */
  since: number;
  /** Admitted until (seconds; a NIP-05 verification expires); null: until revoked. */
  until: number | null;
  /** JSON: why (paid: payment_hash, amount_sats, paid_at; verified: address, verified_at, checked_at; member: invited_by, code_prefix, via). */
  evidence: string;
}

/** A Lightning invoice for admission or a top-up (access/payments.ts). */
export interface InvoiceRow {
  payment_hash: string;
  pubkey: string;
  purpose: "admission" | "topup";
  amount_sats: number;
  bolt11: string;
  status: "unpaid" | "paid" | "expired";
  created_at: number;
  expires_at: number;
  paid_at: number | null;
  checked_at: number | null;
}

/** What a paid invoice bought, written with its settle (AdmissionStore.settleInvoice). */
export type PaidEffect = { admission: AdmissionRow } | { credit: { pubkey: string; sats: number } };

/** The paid admission row an invoice bought (its evidence as the console shows it). */
export const paidRow = (i: InvoiceRow, at: number): AdmissionRow => ({
  pubkey: i.pubkey,
  basis: "paid",
  since: at,
  until: null,
  evidence: JSON.stringify({ payment_hash: i.payment_hash, amount_sats: i.amount_sats, paid_at: i.paid_at ?? at }),
});

/** A pubkey's NIP-05 address and its checks (access/nip05.ts). */
export interface Nip05Row {
  pubkey: string;
  address: string;
  verified_at: number | null;
  checked_at: number;
  failures: number;
  error: string;
}

/** A NIP-43 invite code (access/members.ts). */
export interface InviteRow {
  code: string;
  issuer: string;
  created_at: number;
  expires_at: number;
  used_by: string | null;
  used_at: number | null;
}

/**
 * Issue 33: who is admitted and why, in the event database (both backends). Rows, invoices,
 * balances, NIP-05 checks and invite codes; the trust graph is rebuilt, never stored. Times in
 * seconds. Postgres: put and remove log the pubkey (admission_changes), so every node reads that pubkey's rows again.
 */
export interface AdmissionStore {
  rows(): Promise<AdmissionRow[]>;
  /** Upserts; a row already there keeps its `since`. */
  put(r: AdmissionRow): Promise<void>;
  remove(pubkey: string, basis: string): Promise<void>;
  putInvoice(i: InvoiceRow): Promise<void>;
  invoice(hash: string): Promise<InvoiceRow | undefined>;
  /** The newest unpaid, unexpired invoice of a pubkey for a purpose. */
  openInvoice(pubkey: string, purpose: string, now: number): Promise<InvoiceRow | undefined>;
  /** How many invoices are unpaid and unexpired (max_open_invoices). */
  openInvoices(now: number): Promise<number>;
  /** Unpaid, oldest check first: the poller's page (including those expired less than `graceS` ago). */
  dueInvoices(now: number, graceS: number, max: number): Promise<InvoiceRow[]>;
  /** Records a check of an unpaid invoice (the poller's order). */
  checkedInvoice(hash: string, at: number): Promise<void>;
  /**
   * unpaid -> paid (or expired), once: true only for the call that moved it (webhook and poller race
   * safely). A paid invoice's `effect` (its admission row, or its top-up's credit) is written in the
   * same step, so no crash leaves an invoice paid without what it bought; such an invoice's
   * checked_at becomes null (reconcilePaid's mark: the effect went with it).
   */
  settleInvoice(hash: string, status: "paid" | "expired", at: number, effect?: PaidEffect): Promise<boolean>;
  /**
   * At start: paid admission invoices settled without their effect (checked_at still set: by a
   * bunstr that wrote the admission in a second step) whose pubkey has no paid row get that row
   * now; every such invoice is marked done. The invoices whose rows were written.
   */
  reconcilePaid(at: number): Promise<InvoiceRow[]>;
  recentInvoices(limit: number): Promise<InvoiceRow[]>;
  balances(): Promise<{ pubkey: string; sats: number }[]>;
  /** Adds deltas (may be negative), additive so several nodes can flush. */
  addBalances(deltas: { pubkey: string; sats: number }[]): Promise<void>;
  /**
   * Postgres only (balances shared by every node): takes `sats` from the stored balance if it
   * covers them, in one conditional statement, so nodes charging at once never overdraw. The
   * balance after (charged), or as it is (not charged).
   */
  chargeBalance?(pubkey: string, sats: number): Promise<{ charged: boolean; sats: number }>;
  nip05(pubkey: string): Promise<Nip05Row | undefined>;
  putNip05(r: Nip05Row): Promise<void>;
  removeNip05(pubkey: string): Promise<void>;
  /** Checked before `before`: verified rows first (their re-checks keep writers admitted; new addresses must not crowd them out), oldest check first. */
  dueNip05(before: number, max: number): Promise<Nip05Row[]>;
  putInvite(i: InviteRow): Promise<void>;
  /** Marks an unused, unexpired code used by `pubkey` atomically; the row as it was, or why not. */
  takeInvite(code: string, pubkey: string, now: number): Promise<InviteRow | "unknown" | "expired" | "used">;
  invitesBy(issuer: string): Promise<InviteRow[]>;
  /**
   * An invite for `row.issuer`, decided in one transaction (one at a time per issuer, on every
   * node): its unused, unexpired code if it has one, else `row` written while the codes it issued
   * that were used number fewer than `quota` (null: no quota, an admin), else "none-left".
   */
  issueInvite(row: InviteRow, quota: number | null, now: number): Promise<IssuedInvite>;
  /** The stored rows of these pubkeys (a registry's reload of what another node changed). */
  rowsOf(pubkeys: readonly string[]): Promise<AdmissionRow[]>;
}

/** Whether this process leads a piece of background work now (Store.leader). */
export interface Leadership {
  readonly leading: boolean;
  /** Settles once the first try is answered (until then `leading` is false for want of an answer). */
  readonly first: Promise<void>;
}

/** What issueInvite came to: a code (fresh when just written), or none left under the quota. */
export type IssuedInvite = { row: InviteRow; fresh: boolean } | "none-left";

/**
 * The one feed of what a store commits, which the relay subscribes to once (Store.subscribe) and
 * fans out from: whoever wrote, by this process's writer queue or (Postgres) another node.
 */
export interface CommitFeed {
  /**
   * Each event committed, once, in commit order. This process's batch is told in the
   * continuation of its commit, before writeBatch answers: the fanout comes before the OKs, and
   * the snapshot seq (lastSeq) never passes an event not told yet.
   */
  committed(event: NostrEvent, json: string): void;
  /**
   * A write batch's events have all been told (stores that name their deletions, Store.changes:
   * the deletions told for that batch are past).
   */
  batchEnd(): void;
  /** Another node changed the admin state. */
  adminChanged(): void;
  /**
   * Stored admissions changed (Postgres: this node's writes or another's): these pubkeys' rows
   * are to be read again; undefined when too many changed to name (then all of them).
   */
  admissionsChanged?(pubkeys: readonly string[] | undefined): void;
  /** An ephemeral event another node accepted (never stored, so outside the commit order). */
  ephemeral(event: NostrEvent, json: string): void;
}

/** Opaque to the relay: what Store.changes.mark took. */
export interface StateMark {
  readonly calls: number;
  readonly version: number;
}

/**
 * What a store tells the relay of changes no writeBatch outcome shows, for the feeds the catch-up
 * ring answers alone (relay/answers/feeds.ts). Told before the answer of the call that made them.
 */
export interface ChangeWatch {
  /**
   * Events this process's writer deleted (NIP-09, NIP-62, bans, purges, expiry, replaced
   * versions), each `id + pubkey` in hex. A write batch's are told before its events are fanned
   * out: an event it stored and deleted comes after this.
   */
  deleted(idsAndPubkeys: readonly string[]): void;
  /**
   * The database changed in ways not named one by one (another process wrote; a deletion too big
   * to list; a lost writer): every stored event is at or before `maxCreatedAt` (-1: none).
   * `batch`: told by a write batch, whose stored events are fanned out next (some of them may
   * have been deleted by the same batch).
   */
  unknown(maxCreatedAt: number, batch: boolean): void;
}

/**
 * A store that can name every change (SQLite): what lets the relay answer REQs from memory
 * (relay/ring-answer.ts, replaceable-answer.ts, tag-answer.ts). Without it every REQ is read.
 */
export interface StoreChanges {
  /** `watch` is told each change from now on (and unknown() at once, with the newest stored created_at). */
  watch(watch: ChangeWatch): void;
  /** False while the store cannot vouch that all changes were told (it is asking its writer). */
  known(): boolean;
  /**
   * A mark of the stored state for `unchangedSince`, or undefined when a write may be under way
   * (a call to the writer not answered yet). Taken before a read, checked after it: a read that
   * nothing was committed during saw one state of the store (relay/answers/replaceable.ts).
   */
  mark(): StateMark | undefined;
  /** Nothing was committed since the mark, by this process or another, and no write is under way. */
  unchangedSince(mark: StateMark): boolean;
}

/**
 * NIP-77 sessions kept by the store, beside the data (SQLite: in the reader worker that read the
 * items). Stores without them: the relay builds sessions from negentropyItems on its own thread.
 */
export interface NegentropySessions {
  /** Reads the items and answers the initial message. */
  open(job: NegJob, message: Uint8Array, frameLimit: number, ctx?: ReadContext): Promise<NegSessionHandle>;
}

/**
 * What the NIP-29 group state is rebuilt from (groups/state.ts), and where a Postgres relay keeps
 * its key. On Store and on BulkStore (import, sync build the state from the target store).
 */
export interface GroupRecords {
  /** Stored events of these kinds with seq > afterSeq, in seq (commit) order, at most `max`. */
  inOrder(kinds: readonly number[], afterSeq: number, max: number): Promise<{ seq: number; json: string }[]>;
  /** The newest `perGroup` event ids (newest first) of each `h` value among the newest `scanRows` h-tag rows (for `previous`). */
  recentByGroup(perGroup: number, scanRows: number): Promise<Map<string, string[]>>;
  /** NIP-29: the rows of group_gates with a gate up (the start's reconciliation reads them). */
  gates?(): Promise<GroupGate[]>;
  /** Postgres: stores `secretHex` unless a key is stored already; returns the stored one (two nodes starting at once agree). SQLite: absent (the key is a file). */
  claimRelayKey?(secretHex: string): Promise<string>;
}

/** What the writer queue is told of the purges (Store.watchPurges), which it runs in steps (Store.purgeStep). */
export interface PurgeWatch {
  /** The store recorded new purge work. */
  more(): void;
  /**
   * The purges a call finished (WriteOutcome.purge), after that call's commit and the deletions
   * it names (ChangeWatch), before its answer.
   */
  done(ids: number[]): void;
}

export interface Store {
  /**
   * Several processes share this store (Postgres): the background work only one of them should
   * do (NIP-05 schedule, payment poller) asks here whether this one leads it. Absent: one
   * process, which always leads.
   */
  leader?(name: string): Leadership;
  readonly admin: AdminStore;
  /** Issue 33: admissions, invoices, balances, NIP-05 checks, invite codes (AdmissionStore). */
  readonly admission: AdmissionStore;
  /** NIP-29: the group state's rebuild reads (GroupRecords). */
  readonly groups: GroupRecords;
  /** Capability: every change named (SQLite); absent, the relay answers every REQ from the store. */
  readonly changes?: StoreChanges;
  /** Capability: NIP-77 sessions kept beside the data (SQLite). */
  readonly negentropy?: NegentropySessions;
  /** Tells `feed` what is committed from now on (CommitFeed); the relay subscribes once. */
  subscribe(feed: CommitFeed): void;
  /**
   * Carries this node's ephemeral events to the other nodes' subscribers, for stores that several
   * nodes write to (Postgres, over its bus); a store of one node (SQLite) does nothing.
   */
  shareEphemeral(event: NostrEvent, json: string): void;
  /** Is an event with this id stored? (Behind the writes in flight.) */
  has(id: string): Promise<boolean>;
  /**
   * The duplicate check before the signature (admit/admit.ts), answered at once: true stored;
   * false not stored, or "not known" when the exact answer would wait behind writes in flight;
   * undefined when there is no answer without waiting (a writer thread that is idle, a database
   * over the network): ask has. A "not known" event is verified and goes to the writer, whose
   * write finds it stored and answers it as has would have: a duplicate, also a request to
   * vanish, whose vanish-only write and tombstone come before the insert (store/write-steps.ts).
   */
  hasNow(id: string): boolean | undefined;
  /** Commits a batch atomically; one outcome per write, in order. */
  writeBatch(batch: PendingWrite[], rules: WriteRules): Promise<WriteOutcome[]>;
  /**
   * How many batches the writer queue may have handed over and not yet answered (a writer
   * thread that answers in order: one commits while the next gathers, so batches grow with the
   * load). Infinity: no bound, every tick's events start a batch of their own (Postgres: the
   * pool; SQLite without a writer thread).
   */
  readonly writePipeline: number;
  /**
   * Stored events matching the job, serialized, newest first, in batches of bounded size. The
   * read advances only as the caller asks for the next batch (so a caller waiting for a slow
   * socket holds it); leaving the loop early ends it. A batch known to be the last may say so
   * (RowBatch).
   */
  query(job: QueryJob, ctx?: ReadContext): AsyncIterable<RowBatch>;
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
  purgeStep(budgetMs: number): Promise<boolean>;
  /** Tells `watch` of the purge work from now on (PurgeWatch); the writer queue watches once. */
  watchPurges(watch: PurgeWatch): void;
  /**
   * NIP-40: deletes expired events; returns how many. SQLite deletes for a few ms here and the
   * rest in purge steps (PurgeWatch.more), between batches.
   */
  sweepExpired(now: number): Promise<number>;
  /** Forgets the waiting reads of an owner (a connection) that went away (a store without a read queue: nothing). */
  cancelReads(owner: object): void;
  /**
   * Resolves once the store's worker threads have opened their database connections: the relay
   * listens only then, so a flood of connections cannot take the descriptors they need.
   */
  ready(): Promise<void>;
  /** Bytes the database takes on disk (for status and metrics). */
  sizeBytes(): Promise<number>;
  /** The highest committed seq: a request's snapshot point. */
  lastSeq(): number;
  close(): Promise<void>;
}

/** Who is asking, for kinds only their author and p-tagged recipients may read (NIP-17/59). */
export interface Visibility {
  restrictedKinds: number[];
  /** Pubkeys the connection authenticated as. */
  viewers: string[];
  /**
   * NIP-29, present while some group is gated (the store's group_gates, GroupGate): an event
   * with an h tag naming a group whose events are gated is hidden unless that group is one of
   * `members`, and so is a 39000-39009 signed by one of `relays` (the relay's keys, the current
   * one and former ones) whose d names a group whose metadata is gated, and a record (kinds
   * 9000-9022: the member list they spell out) whose h names such a group. `members`: the gated
   * groups this reader is a member of (an anonymous reader: none), short, whatever the number of
   * gated groups.
   */
  groups?: { members: readonly string[]; relays: readonly string[] };
  /**
   * Issue 34, present while a ban hides something (the store's `hidden` table): the events of a
   * hidden author (`authors`) and hidden events by id (`events`) are left out, for every reader.
   */
  hidden?: HiddenReads;
}

/** Which of the `hidden` table's two probes a read makes (each is one primary-key probe a candidate). */
export interface HiddenReads {
  readonly authors: boolean;
  readonly events: boolean;
}

/** What every read sees: its snapshot, the time for NIP-40, and who asks. */
export interface ReadScope {
  /** Only events committed at or before this seq (the request's snapshot). */
  maxSeq: number;
  /** Hide events whose expiration is at or before this time (NIP-40); 0 = hide nothing. */
  now: number;
  visibility?: Visibility;
}

export interface QueryJob extends ReadScope {
  filters: Filter[];
  /** Effective limit per filter (already clamped; 0 = skip). */
  limits: number[];
  /**
   * When set (`["EVENT",<subId>,`), each row comes back as the whole frame `${frame}${json}]`,
   * built where the row is read (SQLite: in the reader worker, off the relay's main thread).
   */
  frame?: string;
}

export interface CountJob extends ReadScope {
  filters: Filter[];
  /** NIP-45 register offset, when the request is eligible for HyperLogLog. */
  hllOffset?: number;
}

export interface NegJob extends ReadScope {
  filter: Filter;
  /** Most items to return; more means overflow. */
  max: number;
}

/** NIP-77 items, packed (a structured clone of two typed arrays is a copy, not 100,000 strings). */
export interface NegItems {
  timestamps: Float64Array;
  /** 32 bytes per item. */
  ids: Uint8Array;
  overflow: boolean;
}

/** Packs (created_at, hex id) pairs. */
export function packNegItems(timestamps: readonly number[], ids: readonly string[], overflow: boolean): NegItems {
  // In NIP-77 order (created_at, then id), so sealing the storage on the main thread is one pass.
  const order = Array.from(ids, (_, i) => i).sort(
    (a, b) => timestamps[a]! - timestamps[b]! || (ids[a]! < ids[b]! ? -1 : ids[a]! > ids[b]! ? 1 : 0),
  );
  const raw = Buffer.alloc(ids.length * 32);
  const ts = new Float64Array(ids.length);
  order.forEach((j, i) => {
    raw.write(ids[j]!, i * 32, 32, "hex");
    ts[i] = timestamps[j]!;
  });
  return { timestamps: ts, ids: new Uint8Array(raw.buffer, raw.byteOffset, raw.length), overflow };
}

/** Who a read is for (a connection), how its cost is reported, and when it must stop. */
export interface ReadContext {
  owner: object;
  /** The client's address group (an IP, an IPv6 /64): the unit of fair scheduling. */
  group?: string;
  /** Worker time of each slice, in ms, as it is spent. */
  onCost?: (ms: number) => void;
  /** Asked after every slice: a reason to stop now (a spent budget), or undefined. */
  stop?: () => string | undefined;
  /** The job ended (answered, failed or dropped), with its total worker time. */
  onEnd?: (ms: number) => void;
}

/** A read ran longer than the store allows. */
export class QueryTimeoutError extends Error {}
/** Too many reads are waiting (in all, or for this owner). */
export class ReaderBusyError extends Error {}
/** The store is shutting down, or the reader went away: not a failure worth logging. */
export class StoreClosedError extends Error {}
/** ReadContext.stop asked for it; the message is the reason, meant for the client. */
export class ReadStoppedError extends Error {}

/** The answer to a NIP-77 message: the reply (hex), or the NEG-ERR text. */
export type NegReply = { reply: string; error?: undefined } | { error: string; reply?: undefined };

/**
 * A NIP-77 session kept by the store, with its answer to the initial message; overflow: more
 * items than the job's max (no session then, and no answer).
 */
export type NegSessionHandle = {
  /** Items the session holds. */
  items: number;
  /**
   * Reconciles the next message (its bytes, in a buffer of its own that the store may move to
   * another thread: the caller must not use it after), as a read of the given context.
   */
  message(message: Uint8Array, ctx?: ReadContext): Promise<NegReply>;
  close(): void;
} & ({ overflow: true } | ({ overflow: false } & NegReply));

/**
 * A batch of query() rows; `last` when no rows follow it, so the caller can send what ends the
 * answer (EOSE) in the same write.
 */
export type RowBatch = string[] & { last?: true };

/** Every batch of a query, concatenated (tools and tests; the relay streams them). */
export async function allRows(batches: AsyncIterable<string[]>): Promise<string[]> {
  const rows: string[] = [];
  for await (const batch of batches) for (const json of batch) rows.push(json);
  return rows;
}

// ---- The operator commands (ops/): bulk reads and writes, on either backend ----------------

/** What an export keeps; lists are matched by the store, tag and search conditions by the caller. */
export interface ExportScope {
  since?: number;
  until?: number;
  kinds?: number[];
  authors?: string[];
  ids?: string[];
  /** Leave out events expired at this time (NIP-40), as the relay hides them; 0 = keep them. */
  now: number;
}

export interface ExportRow {
  seq: number;
  json: string;
}

/** What sync keeps of an event it is about to upload, to say later why it was gone. */
export interface EventHead {
  readonly kind: number;
  readonly pubkey: string;
  readonly created_at: number;
  /** The d tag of an addressable event ("" otherwise). */
  readonly d: string;
}

/** `bunstr stats`: counts, each from an index, and sizes. */
export interface StoreStats {
  events: number;
  authors: number;
  kinds: { kind: number; count: number }[];
  distinctKinds: number;
  oldest: number | null;
  newest: number | null;
  tagRows: number;
  deletedIds: number;
  deletedAddresses: number;
  vanished: number;
  expiring: number;
  schemaVersion: number;
  /** Bytes on disk: the SQLite file (Postgres: the database) and SQLite's WAL (Postgres: 0). */
  fileBytes: number;
  walBytes: number;
  /** Bytes `compact` returns (SQLite's free pages; Postgres: unknown, null). */
  freeBytes: number | null;
}

export interface BackupResult {
  file: string;
  bytes: number;
  events: number;
  seconds: number;
}

export interface CompactResult {
  /** Bytes on disk before and after: the file and its WAL (Postgres: the database, 0). */
  before: { file: number; wal: number };
  after: { file: number; wal: number };
  /** SQLite: pages returned; Postgres: 0. */
  freePagesBefore: number;
  /** SQLite: the WAL could not be emptied (a reader held it). */
  checkpointBusy: boolean;
  seconds: number;
  /** How long each phase held the database (vacuum, checkpoint, optimize; Postgres: vacuum). */
  phases: Record<string, number>;
}

/** Shows progress while `file` grows towards `expectedBytes`; the returned function stops it. */
export type GrowthWatch = (file: string, expectedBytes: number) => Promise<() => void>;

export interface BulkWriterOptions {
  rules: WriteRules;
  /** Events per transaction while another process writes (SQLite), or always (Postgres). */
  batchSize: number;
  /** Most events per transaction when no other process writes (SQLite). */
  maxTxn?: number;
  /** Once, the first time the database stays locked past busy_timeout (SQLite). */
  onBusy?: () => void;
}

/** Where an import writes: transactions it sizes itself, with the purges they record carried out. */
export interface BulkWriter {
  /** The admin state the import's policies see. */
  adminEntries(): Promise<AdminEntry[]>;
  /** Already stored? (cheaper than a signature check); a store without a fast answer says false. */
  has(id: string): boolean;
  /** Commits one transaction; the outcomes in order. */
  commit(writes: PendingWrite[]): Promise<WriteOutcome[]>;
  /** Events in the next transaction. */
  readonly txnSize: number;
}

/**
 * The operator commands' view of a database (import, export, sync, stream, stats, backup,
 * compact): SQLite's file (store/sqlite/bulk.ts) or Postgres (store/postgres/bulk.ts). Reads are
 * short, each its own statement, so a relay running on the same database is never held up.
 */
export interface BulkStore {
  /** NIP-29: what import and sync rebuild the target's group state from. */
  readonly groups: GroupRecords;
  /** Lowest and highest committed seq: an export covers what was committed when it started. */
  seqRange(): Promise<{ min: number; max: number }>;
  /** Pages in commit order: `page(after, upTo, limit)` is up to `limit` events with after < seq <= upTo. */
  exportPager(scope: ExportScope): (after: number, upTo: number, limit: number) => Promise<ExportRow[]>;
  /** (created_at, id) of every event matching the filter (NIP-77), expired ones at `now` left out (0: none). */
  negItems(filter: Filter, now: number): Promise<NegItems>;
  /** id -> kind, pubkey, created_at and d of the stored events among `ids`. */
  eventHeads(ids: string[]): Promise<Map<string, EventHead>>;
  /** Why an event is no longer stored, as far as the tombstones tell. */
  tombstoneOf(id: string, head: EventHead | undefined): Promise<"nip09" | "nip62" | undefined>;
  writer(opts: BulkWriterOptions): Promise<BulkWriter>;
  stats(topKinds: number): Promise<StoreStats>;
  /** A consistent copy at `dest`, never half-written there. The caller has checked `dest`. */
  backup(dest: string, watch?: GrowthWatch): Promise<BackupResult>;
  /** Returns the space of deleted events and refreshes the planner's statistics. */
  compact(watch?: GrowthWatch): Promise<CompactResult>;
  close(): Promise<void>;
}
