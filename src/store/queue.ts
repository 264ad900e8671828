// Group commit: every write accepted in the same tick goes into one transaction, and each
// caller learns its outcome only after that transaction has committed.
//
// A batch that fails (disk full, database busy past busy_timeout, an I/O error) answers each of
// its events with a refusal, `error:` and a short reason, and is logged here, once per kind of
// failure per minute with a count of the repeats (not once per event: on a full disk every
// event fails, and a log line per event would fill what disk is left).
import { LOG_INTERVAL_MS, log, LogLimiter } from "../log.ts";
import { refuse, refusalText, type Refusal } from "../protocol/reasons.ts";
import type { PendingWrite, Store, WriteOutcome, WriteRules } from "./types.ts";

/** A failure is an error; storing again after failures a warning (what failed is over, but the operator should look). */
type FailureLevel = "error" | "warn";
const logLine = (line: string, level: FailureLevel): void => log[level](line);

/** Each kind of write failure is logged at most once per this interval; repeats are counted. */
const FAILURE_LOG_INTERVAL_MS = LOG_INTERVAL_MS;

/**
 * What a failed write is (a SQLite or Postgres error code, else the error's name), and what the client is told.
 * Exported for tests: test/disk-full.test.ts classifies errors no test can make the disk raise.
 */
export function classifyWriteFailure(err: unknown): { kind: string; refusal: Refusal } {
  const e = err as { code?: unknown; errno?: unknown } | undefined;
  let code = String(e?.code ?? "");
  // Bun's Postgres errors carry the server's SQLSTATE in errno.
  if (code === "ERR_POSTGRES_SERVER_ERROR" && typeof e?.errno === "string") code = `postgres ${e.errno}`;
  // SQLite: database or disk is full; Postgres: disk_full (53100); the OS: ENOSPC.
  if (code === "SQLITE_FULL" || code === "postgres 53100" || code === "ENOSPC")
    return { kind: code, refusal: refuse("error", "the relay's disk is full, the event was not stored") };
  if (/^SQLITE_(BUSY|LOCKED)/.test(code)) return { kind: code, refusal: refuse("error", "the database is busy, try again") };
  return { kind: code || (err instanceof Error ? err.name : typeof err), refusal: refuse("error", "could not store the event") };
}

/**
 * Logs write failures at most once per kind per interval, counting what it does not log, and
 * says when writes succeed again, also at most once per interval. A disk at the edge of full
 * flaps: each checkpoint frees the WAL's room, a batch or two fit, then writes fail again. The
 * limits hold across those recoveries, so a flapping disk costs two lines a minute, not two a flap.
 * Exported for tests (test/disk-full.test.ts, with a clock of its own).
 */
export class FailureLog {
  /** Per kind of failure; a held line's weight is its batch's events. */
  private readonly lines: LogLimiter;
  /** A batch failed since the last one that was stored. */
  private failing = false;
  private recoveryLoggedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly intervalMs = FAILURE_LOG_INTERVAL_MS,
    private readonly log: (line: string, level: FailureLevel) => void = logLine,
  ) {
    this.lines = new LogLimiter(intervalMs);
  }

  /** A batch of `events` failed with `err`: returns the refusal for each of them. */
  failed(err: unknown, events: number, now = Date.now()): Refusal {
    const { kind, refusal } = classifyWriteFailure(err);
    this.failing = true;
    const message = (err instanceof Error ? err.message : String(err)).split("\n")[0]!.slice(0, 300);
    const held = this.lines.take(kind, events, now);
    if (!held) return refusal;
    const repeats = held.count > 0 ? `; ${held.count} more failed batches (${held.weight} events) not yet logged` : "";
    this.log(
      `writer: could not store ${events} event${events === 1 ? "" : "s"}: ${message} (${kind})${repeats}; clients get "${refusalText(refusal)}"; ` +
        `more failures of this kind are counted and logged at most every ${Math.round(this.intervalMs / 1000)} s`,
      "error",
    );
    return refusal;
  }

  /** A batch was stored: say so if it had been failing, with what was not logged. */
  succeeded(now = Date.now()): void {
    if (!this.failing) return;
    this.failing = false;
    // Flapping: the counts go with the next line, whichever kind it is.
    if (now - this.recoveryLoggedAt < this.intervalMs) return;
    this.recoveryLoggedAt = now;
    const counts = this.lines.takeHeld().map(([kind, k]) => `${k.count} failed batches (${k.weight} events, ${kind})`);
    this.log(`writer: storing events again${counts.length > 0 ? ` after ${counts.join(", ")} not logged` : ""}`, "warn");
  }
}

/** One step of deferred deletion between batches: short enough that nobody waits long behind it. */
export const PURGE_STEP_MS = 5;

/**
 * Stored JSON (counted as bytes: its length) waiting for the writer or in its batches in flight,
 * at most, by default ([limits] max_write_queue_bytes): past it an EVENT is answered `error:` at
 * once. With the writer in a thread of its own the main thread admits while a batch commits, so
 * when the disk is slower than the clients the queue would otherwise grow with connections x
 * max_pending_events x max_event_bytes; each queued event is held parsed as well (its tags as
 * arrays: 2-3x its JSON).
 */
const MAX_QUEUED_CHARS = 16 * 1024 * 1024;
/**
 * A batch is cut at this much stored JSON as well as at maxBatch events (one message, one transaction).
 * Exported for tests: test/writer-thread.test.ts sends batches past it.
 */
export const MAX_BATCH_CHARS = 8 * 1024 * 1024;
/**
 * A batch is cut at this much write cost (policy/write-cost.ts: an ordinary note is 1) as well:
 * a batch of heavy events then takes the writer about as long as one of ordinary notes, so an
 * event that comes while one commits waits no longer behind heavy ones. Exported for tests
 * (test/writer-thread.test.ts).
 */
export const MAX_BATCH_COST = 2000;
/**
 * Write cost an address group may take per turn of the round (deficit round-robin): fair by cost,
 * not by count, so a client of short notes is not served one note a round while each heavy
 * sender's turn carries hundreds of units. An event costing more waits for its group's turns to add up.
 */
const TURN_COST = 64;

const BUSY = refuse("error", "the relay is busy storing events, try again");
const OVER_SHARE = refuse("rate-limited", "too many of your events are waiting to be stored, try again shortly");

/** What the queue may hold; read at each enqueue (a config reload applies at once). */
interface QueueBounds {
  /** Stored JSON queued or in flight, over all senders. */
  maxChars: number;
  /** The same for one address group (PendingWrite.group); 0 = no share. */
  maxGroupChars: number;
}

interface Queued extends PendingWrite {
  resolve: (o: WriteOutcome) => void;
}

/** One address group's writes in arrival order (head: the next to go, without shifting the array). */
interface Line {
  items: Queued[];
  head: number;
  /** Write cost it may still take in its turn (deficit round-robin). */
  deficit: number;
  /** Its turn began (and was granted its quantum) in a batch that filled up: it goes on in the next. */
  inTurn: boolean;
}

const refused = (refusal: Refusal): Promise<WriteOutcome> => Promise.resolve({ stored: false, duplicate: false, refusal });

export class WriterQueue {
  /**
   * The writes waiting, by address group (PendingWrite.group; "" for those without one), in a
   * Map whose order is the round-robin order: a batch takes one from each group in turn, and a
   * group served goes to the back, so one address's backlog does not delay another's events
   * (issue 36). Within a group the order is the arrival order.
   */
  private readonly lines = new Map<string, Line>();
  private waiting = 0;
  /** Stored JSON queued or in batches in flight (QueueBounds.maxChars). */
  private queuedChars = 0;
  /** The same by group (QueueBounds.maxGroupChars); a group is dropped when it has none. */
  private readonly groupChars = new Map<string, number>();
  private scheduled = false;
  /** Batches handed to the store and not yet answered. */
  private inFlight = 0;
  private readonly maxInFlight: number;
  private readonly bounds: () => QueueBounds;
  /** Told whenever a batch is answered (drain). */
  private waiters: (() => void)[] = [];
  /** Told each committed batch's size and write+commit time (metrics); set by the relay. */
  onBatch?: (size: number, seconds: number) => void;
  readonly failures = new FailureLog();

  private purgeScheduled = false;
  private purgeRetryMs = 0;
  /** Outcomes of NIP-09 deletions still deleting, by purge (WriteOutcome.purge): answered once it is done. */
  private held = new Map<number, (() => void)[]>();
  /** The same deletions by event id: resolve when their purge is done (deleting). */
  private deletions = new Map<string, Promise<void>>();

  constructor(
    private readonly store: Store,
    /** The storage rules in force, read once per batch (so a config reload applies at once). */
    private readonly rules: () => WriteRules,
    private readonly maxBatch = 2000,
    /** A number: the bound over all senders, without a share per group. */
    bounds: number | (() => QueueBounds) = MAX_QUEUED_CHARS,
  ) {
    this.maxInFlight = store.writePipeline;
    this.bounds = typeof bounds === "number" ? () => ({ maxChars: bounds, maxGroupChars: 0 }) : bounds;
    store.watchPurges({ more: () => this.purgeSoon(), done: (ids) => this.release(ids) });
    this.purgeSoon(); // what a previous run left undone
  }

  /** Answers the outcomes held for these purges (all of them: none is left). */
  private release(ids?: number[]): void {
    for (const id of ids ?? [...this.held.keys()]) {
      const waiting = this.held.get(id);
      this.held.delete(id);
      for (const answer of waiting ?? []) answer();
    }
    if (this.held.size === 0) for (const w of this.waiters.splice(0)) w();
  }

  /** Outcomes waiting for their deletion to be carried out. */
  get holding(): number {
    return this.held.size;
  }

  /**
   * Big deletions (Store.purgeStep) run in steps of PURGE_STEP_MS, each a task of its own: the
   * event loop serves sockets, and this queue commits its batches, between two steps.
   */
  private purgeSoon(): void {
    if (this.purgeScheduled) return;
    this.purgeScheduled = true;
    setTimeout(() => void this.purgeOnce(), this.purgeRetryMs);
  }

  private async purgeOnce(): Promise<void> {
    this.purgeScheduled = false;
    // The deletions held before the step: a batch committed while it runs (outside the sequence
    // lock, Postgres) may hold a new one that this step never saw.
    const before = [...this.held.keys()];
    let more: boolean;
    try {
      more = await this.store.purgeStep(PURGE_STEP_MS);
      this.purgeRetryMs = 0;
    } catch (e) {
      // A locked database (another process), a lost connection: try again, less often.
      log.error("purge step failed, retrying:", e);
      this.purgeRetryMs = Math.min(Math.max(this.purgeRetryMs * 2, 100), 10_000);
      more = true;
    }
    if (more) this.purgeSoon();
    // Nothing left to purge: whatever still waits (its finish was not told: a lost writer thread) is done.
    else if (before.length > 0) this.release(before);
  }

  get depth(): number {
    return this.waiting;
  }

  /**
   * Whether a write from `group` would be refused for the bounds whatever its size (the queue, or
   * the group's share, already full): asked before the id hash and the signature check, so what
   * would be refused here costs no more work (admit/admit.ts).
   */
  refusalFor(group: string | undefined): Refusal | undefined {
    const { maxChars, maxGroupChars } = this.bounds();
    if (this.queuedChars >= maxChars) return BUSY;
    if (group !== undefined && maxGroupChars > 0 && (this.groupChars.get(group) ?? 0) >= maxGroupChars) return OVER_SHARE;
    return undefined;
  }

  /**
   * Queues a write; resolves with its outcome once its batch is answered. Refused at once (and
   * never queued) past the bounds: a group over its share `rate-limited:`, the whole queue full
   * `error:`. A write alone in an empty queue (or group) always fits, however big.
   */
  enqueue(w: PendingWrite): Promise<WriteOutcome> {
    const { maxChars, maxGroupChars } = this.bounds();
    const size = w.json.length;
    const group = w.group ?? "";
    if (this.queuedChars + size > maxChars && this.queuedChars > 0) return refused(BUSY);
    if (w.group !== undefined && maxGroupChars > 0) {
      const held = this.groupChars.get(group) ?? 0;
      if (held + size > maxGroupChars && held > 0) return refused(OVER_SHARE);
    }
    this.queuedChars += size;
    this.groupChars.set(group, (this.groupChars.get(group) ?? 0) + size);
    return new Promise((resolve) => {
      const line = this.lines.get(group);
      if (line) line.items.push({ ...w, resolve });
      else this.lines.set(group, { items: [{ ...w, resolve }], head: 0, deficit: 0, inTurn: false });
      this.waiting++;
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  /** Writes everything queued; resolves when the queue is empty and every batch answered (deletions carried out). */
  async drain(): Promise<void> {
    for (;;) {
      this.pump();
      if (this.waiting === 0 && this.inFlight === 0 && this.held.size === 0) return;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /**
   * Hands the queued writes to the store, a batch at a time, while fewer than maxInFlight are
   * unanswered: with a writer thread, what arrives while one batch commits is the next batch
   * (group commit: batches grow with the load).
   */
  private pump(): void {
    while (this.waiting > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.nextBatch();
      this.inFlight++;
      void this.write(batch).finally(() => {
        for (const q of batch) this.releaseChars(q);
        this.inFlight--;
        for (const w of this.waiters.splice(0)) w();
        this.pump();
      });
    }
  }

  /** An answered write's JSON no longer counts against the bounds. */
  private releaseChars(q: Queued): void {
    const size = q.json.length;
    this.queuedChars -= size;
    const group = q.group ?? "";
    const left = (this.groupChars.get(group) ?? size) - size;
    if (left > 0) this.groupChars.set(group, left);
    else this.groupChars.delete(group);
  }

  /**
   * The next batch, taken round-robin by group, by cost: each group in turn takes up to TURN_COST
   * (plus what it did not use of earlier turns while it had writes waiting), then goes to the
   * back. At most maxBatch writes, MAX_BATCH_CHARS of their JSON and MAX_BATCH_COST of their cost
   * (at least one write); the batch stops at the first write that does not fit, whose group then
   * goes on with its turn in the next batch.
   */
  private nextBatch(): Queued[] {
    const batch: Queued[] = [];
    let chars = 0;
    let cost = 0;
    while (this.waiting > 0) {
      const [group, line] = this.lines.entries().next().value!;
      if (!line.inTurn) line.deficit += TURN_COST;
      line.inTurn = true;
      for (let w = line.items[line.head]; w !== undefined; w = line.items[line.head]) {
        const c = w.cost ?? 1;
        if (c > line.deficit) break;
        const fits = batch.length < this.maxBatch && chars + w.json.length <= MAX_BATCH_CHARS && cost + c <= MAX_BATCH_COST;
        if (!fits && batch.length > 0) return batch;
        batch.push(w);
        chars += w.json.length;
        cost += c;
        line.deficit -= c;
        this.waiting--;
        line.items[line.head++] = undefined!;
      }
      // A group that is never empty (an import) would hold its array forever: drop what was taken.
      if (line.head >= 1024 && line.head * 2 >= line.items.length) {
        line.items = line.items.slice(line.head);
        line.head = 0;
      }
      // Its turn is over: to the back of the round; a group with nothing left leaves it (and
      // keeps no credit: it was idle).
      line.inTurn = false;
      this.lines.delete(group);
      if (line.head < line.items.length) this.lines.set(group, line);
    }
    return batch;
  }

  private async write(batch: Queued[]): Promise<void> {
    let outcomes: WriteOutcome[];
    const started = performance.now();
    try {
      outcomes = await this.store.writeBatch(batch, this.rules());
      this.onBatch?.(batch.length, (performance.now() - started) / 1000);
      this.failures.succeeded();
    } catch (e) {
      // Answered, not thrown: the caller would log each event's error again.
      const refusal = this.failures.failed(e, batch.length);
      for (const q of batch) q.resolve({ stored: false, duplicate: false, refusal });
      return;
    }
    // Committed, and the store has told its commit feed (the fanout) of every stored event
    // before it answered (Store.subscribe): the outcomes come after, so an author's OK comes
    // after the subscribers' copies and never before the commit.
    batch.forEach((q, i) => {
      const o = outcomes[i]!;
      const deleting = !o.stored && o.duplicate ? this.deleting(q.event.id) : undefined;
      if (o.stored && o.purge !== undefined) this.hold(o.purge, q.event.id, () => q.resolve(o));
      // The same deletion sent again meanwhile: its duplicate answer waits as well.
      else if (deleting) void deleting.then(() => q.resolve(o));
      else q.resolve(o);
    });
  }

  /**
   * A NIP-09 deletion with this id that is still deleting (its OK held): resolves once it is
   * done, so an answer to the same deletion sent again (duplicate:) does not come before its own.
   */
  deleting(id: string): Promise<void> | undefined {
    return this.deletions.get(id);
  }

  /**
   * A NIP-09 deletion too big for its batch is answered once its purge is done: its targets
   * are then gone from the store and named to the answers from memory (ChangeWatch), so none is
   * served after its OK. Other writers' batches go on between the purge's steps meanwhile.
   */
  private hold(purge: number, id: string, answer: () => void): void {
    let done = () => {};
    this.deletions.set(id, new Promise<void>((resolve) => (done = resolve)));
    const release = () => {
      this.deletions.delete(id);
      answer();
      done();
    };
    const waiting = this.held.get(purge);
    if (waiting) waiting.push(release);
    else this.held.set(purge, [release]);
    this.purgeSoon();
  }
}
