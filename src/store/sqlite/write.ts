// The single writer: NIP-01/09/40/50/62 storage semantics inside one transaction per batch.
// Deletions too big for one transaction (a request to vanish of a key with 40k events, a ban, a
// NIP-09 deletion of hundreds of events with thousands of tags each) are recorded as purges and
// carried out in bounded steps between batches (purgeStep), and so are the NIP-40 sweeps: the
// writer then ran on the main thread, where one such transaction stalled every client for
// seconds; in the writer thread (writer-worker.ts) it stalls every write as long (issue 36: a
// kind 5 deleting 900 events of 1,800 tags held every other EVENT 14.8 s).
import type { Database } from "bun:sqlite";
import { deletionTargets, type Address } from "../../nips/nip09.ts";
import { expirationOf } from "../../nips/nip40.ts";
import { indexText } from "../../nips/nip50.ts";
import { raisedGate, type GroupGate } from "../../nips/nip29.ts";
import { dTag, type NostrEvent } from "../../protocol/event.ts";
import type { Refusal } from "../../protocol/reasons.ts";
import { isAddressable } from "../../protocol/kinds.ts";
import { deletionOf, GROUP_ACTIONS, tombstoneRefusal, type Tombstones } from "../semantics.ts";
import type { GateAsOf, HiddenWhat, PendingWrite, WriteOutcome, WriteRules } from "../types.ts";
import { indexedTag, runSteps, writeSteps } from "../write-steps.ts";
import { RAISE_GATE_SQL, storedJson, tagValue } from "./db.ts";

/** A group's moderation record (semantics.ts groupRecord): a purge of its author leaves it. */
const GROUP_RECORD_SQL = `kind BETWEEN ${GROUP_ACTIONS.min} AND ${GROUP_ACTIONS.max} AND EXISTS (SELECT 1 FROM tags h INDEXED BY tags_h WHERE h.name = 'h' AND h.created_at = events.created_at AND h.seq = events.seq)`;

/** Rows a purge selects at a time. */
const PURGE_ROWS = 32;
/**
 * Events a purge step deletes before it looks at the clock: a small deletion (a request to
 * vanish of a few events) is then done before its OK however late the thread runs. On a loaded
 * machine a preemption alone can outlast PURGE_FIRST_MS, and a REQ after the OK still found the
 * events (test/vanish-policy.test.ts beside a CPU hog). Each purge of a batch deletes as many at
 * once even when the batch's PURGE_FIRST_MS is used up: an earlier deletion in the batch does not
 * make a one-target deletion a purge whose OK waits behind the others (issue 36).
 */
const PURGE_MIN_EVENTS = 8;
/**
 * Purge work done inside the batch that asked for it (all its deletions and requests to vanish
 * together): a small one completes before its OK. Also the first step of a NIP-40 sweep.
 */
const PURGE_FIRST_MS = 5;
/** A bound no created_at or seq reaches: "no limit" for a purge. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

/** A deletion carried out in steps (table purges): the events of a pubkey, and gift wraps to it. */
interface Purge {
  id: number;
  pubkey: string;
  /** Events created up to this (a request to vanish); null: all (a ban). */
  until: number | null;
  /** The seq of an event kept (the request to vanish itself). */
  keep: number | null;
  /** Only events with a seq up to this: those stored when the purge was recorded. */
  upto: number | null;
  /** Also gift wraps p-tagged to the pubkey (NIP-62). */
  wraps: number;
  /** A NIP-09 deletion: only the events listed in purge_targets (pubkey is the requester's). */
  listed: number;
}

/** A purge_targets entry, and the seq of its event when that is still stored. */
interface Target {
  target: number;
  seq: number | null;
}

interface Row {
  seq: number;
  created_at: number;
  json: string;
  /** Its id and pubkey in hex, one after the other (what Changes names a deletion by). */
  key: string;
}

/** What a writer call changed that its answer does not show (store/types.ts ChangeWatch). */
export type Changes = { deleted: string[] } | { unknown: number; batch: boolean };

/** Deletions one call names at most; past it, they are told as an unknown change. */
const MAX_NAMED = 2048;

interface Existing {
  seq: number;
  created_at: number;
  id: string;
}

/** Row.key of the events row `a`. */
const keySql = (a: string): string => `lower(hex(${a}.id) || hex(${a}.pubkey)) AS key`;

/** The writer's prepared statements, by name. */
function writerStatements(db: Database) {
  const q = (sql: string) => db.prepare(sql);
  return {
    insertEvent: q(
      "INSERT INTO events (id, pubkey, created_at, kind, d, expiration, json, sig) VALUES (unhex(?1), unhex(?2), ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO NOTHING",
    ),
    insertTag: q("INSERT OR IGNORE INTO tags (name, value, created_at, seq, kind) VALUES (?, ?, ?, ?, ?)"),
    insertText: q("INSERT INTO events_fts (rowid, text) VALUES (?, ?)"),
    findReplaceable: q("SELECT seq, created_at, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ?"),
    findAddressable: q("SELECT seq, created_at, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ? AND d = ?"),
    rowBySeq: q(`SELECT seq, created_at, json, ${keySql("events")} FROM events WHERE seq = ?`),
    deleteEvent: q("DELETE FROM events WHERE seq = ?"),
    // Through the tag table's primary key, with the values indexTags wrote (indexedTag; no
    // index by seq: it would cost ~360 bytes and a b-tree insert per tag).
    deleteTag: q("DELETE FROM tags WHERE name = ? AND value = ? AND created_at = ? AND seq = ?"),
    deleteText: q("DELETE FROM events_fts WHERE rowid = ?"),
    hasId: q("SELECT 1 FROM events WHERE id = unhex(?)"),
    // NIP-09
    deletedId: q("SELECT 1 FROM deleted_ids WHERE id = unhex(?) AND pubkey = unhex(?)"),
    deletedAddress: q("SELECT until FROM deleted_addresses WHERE pubkey = unhex(?) AND kind = ? AND d = ?"),
    tombstoneId: q("INSERT OR IGNORE INTO deleted_ids (id, pubkey) VALUES (unhex(?), unhex(?))"),
    tombstoneAddress: q(
      "INSERT INTO deleted_addresses (pubkey, kind, d, until) VALUES (unhex(?), ?, ?, ?) ON CONFLICT DO UPDATE SET until = max(until, excluded.until)",
    ),
    eventById: q("SELECT seq, kind, lower(hex(pubkey)) AS pubkey FROM events WHERE id = unhex(?)"),
    // A stored event a deletion names (?1), and whether it is p-tagged to the requester (?2).
    deletionTarget: q(
      "SELECT e.seq, e.kind, lower(hex(e.pubkey)) AS pubkey, EXISTS (SELECT 1 FROM tags t WHERE t.name = 'p' AND t.value = unhex(?2) AND t.created_at = e.created_at AND t.seq = e.seq) AS tagsRequester, EXISTS (SELECT 1 FROM tags h INDEXED BY tags_h WHERE h.name = 'h' AND h.created_at = e.created_at AND h.seq = e.seq) AS inGroup FROM events e WHERE e.id = unhex(?1)",
    ),
    addressUpTo: q(
      "SELECT seq, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ? AND coalesce(d, '') = ? AND created_at <= ?",
    ),
    // NIP-62
    vanishedUntil: q("SELECT until FROM vanished WHERE pubkey = unhex(?)"),
    vanish: q("INSERT INTO vanished (pubkey, until) VALUES (unhex(?), ?) ON CONFLICT DO UPDATE SET until = max(until, excluded.until)"),
    // Purges (NIP-62, NIP-86 banpubkey)
    addPurge: q("INSERT INTO purges (pubkey, until, keep, upto, wraps, listed) VALUES (unhex(?), ?, ?, ?, ?, ?)"),
    purgeById: q("SELECT id, lower(hex(pubkey)) AS pubkey, until, keep, upto, wraps, listed FROM purges WHERE id = ?"),
    nextPurge: q("SELECT id, lower(hex(pubkey)) AS pubkey, until, keep, upto, wraps, listed FROM purges ORDER BY id LIMIT 1"),
    endPurge: q("DELETE FROM purges WHERE id = ?"),
    // NIP-09 purges: the events a deletion deletes, by seq and id (a reused seq is not a target).
    addTarget: q("INSERT OR IGNORE INTO purge_targets (purge, seq, id) VALUES (?, ?, unhex(?))"),
    listedTargets: q(
      "SELECT t.seq AS target, e.seq FROM purge_targets t LEFT JOIN events e ON e.seq = t.seq AND e.id = t.id WHERE t.purge = ?1 ORDER BY t.seq LIMIT ?2",
    ),
    dropTarget: q("DELETE FROM purge_targets WHERE purge = ? AND seq = ?"),
    // Oldest first, about ascending seq: FTS5 was measured here deleting descending rowids
    // up to 5x slower than ascending ones.
    purgeAuthored: q(
      `SELECT seq, created_at, json, ${keySql("events")} FROM events WHERE pubkey = unhex(?1) AND created_at <= ?2 AND seq <> ?3 AND seq <= ?4 AND NOT (${GROUP_RECORD_SQL}) ORDER BY created_at LIMIT ?5`,
    ),
    // The join skips a tag row without its event, were there one: a purge never loops on it.
    purgeWraps: q(
      `SELECT e.seq, e.created_at, e.json, ${keySql("e")} FROM tags t, events e WHERE t.name = 'p' AND t.value = unhex(?1) AND t.kind = 1059 AND t.seq <= ?2 AND e.seq = t.seq AND e.created_at = t.created_at LIMIT ?3`,
    ),
    maxSeq: q("SELECT coalesce(max(seq), 0) AS s FROM events"),
    maxCreatedAt: q("SELECT coalesce(max(created_at), -1) AS t FROM events"),
    dataVersion: q("PRAGMA data_version"),
    // NIP-29 (db.ts schema 14): raised with the event that gates; set by the state, unless a later
    // commit raised it since (a row set at a seq past every stored event is stale: the newest
    // events deleted since, or a tool).
    raiseGate: q(RAISE_GATE_SQL),
    setGate: q(
      `INSERT INTO group_gates (value, events, metadata, seq) VALUES (?1, ?2, ?3, ?4)
       ON CONFLICT DO UPDATE SET events = excluded.events, metadata = excluded.metadata, seq = excluded.seq
       WHERE seq <= excluded.seq OR seq > (SELECT coalesce(max(seq), 0) FROM events)`,
    ),
    // Issue 34: what bans hide (db.ts schema 16).
    hide: q("INSERT INTO hidden (what, key, since) VALUES (?, unhex(?), ?) ON CONFLICT DO NOTHING"),
    unhide: q("DELETE FROM hidden WHERE what = ? AND key = unhex(?)"),
    hiddenRow: q("SELECT purging FROM hidden WHERE what = ? AND key = unhex(?)"),
    startPurgeHidden: q("UPDATE hidden SET purging = 1 WHERE what = ? AND key = unhex(?)"),
    purgingAuthor: q("SELECT 1 FROM purges WHERE pubkey = unhex(?) AND listed = 0 LIMIT 1"),
    // NIP-40
    expired: q("SELECT seq FROM events WHERE expiration IS NOT NULL AND expiration <= ? ORDER BY expiration LIMIT ?"),
  };
}
type WriterStatements = ReturnType<typeof writerStatements>;

export class SqliteWriter {
  private readonly st: WriterStatements;
  /** The tombstone tables, as semantics.ts asks about them. */
  private readonly tombstones: Tombstones;
  private readonly txn: (batch: PendingWrite[], rules: WriteRules) => WriteOutcome[];
  seq: number;
  /** Purges are recorded and not yet done (set at start from the table). */
  private purging: boolean;
  /** Purges recorded by the call under way, and purges it finished. */
  private newPurges: number[] = [];
  private ended: number[] = [];
  /** Purge work (ms) the call under way may still do at once (PURGE_FIRST_MS at its start). */
  private purgeLeftMs = 0;
  /** Expired events (NIP-40) up to this time are being swept in purge steps; 0: no sweep. */
  private expireUpTo = 0;
  /**
   * NIP-09 purges' targets left, by purge: every other purge step goes to the one with fewest,
   * so a small deletion's held OK does not wait for every bigger purge recorded before it. A
   * hint only (a purge missing here is stepped in its turn, oldest first).
   */
  private readonly targetsLeft = new Map<number, number>();
  /** Whether the next purge step goes to the purge with fewest targets left (else the oldest). */
  private smallestTurn = true;
  /** Called when purge work is left (after its transaction: from a timer), so someone runs purgeStep. */
  onPurge?: () => void;
  /** Told, after the call that committed it, which purges are done (a deletion's OK waits for its own). */
  onPurged?: (ids: number[]) => void;
  /** Events purges have deleted (removeByAuthor reports its share). */
  private purgedEvents = 0;
  /** Told, after each call that changed more than its answer shows, what (set by the store). */
  onChanges?: (c: Changes) => void;
  /** Deletions of the call under way, named (see Changes), and whether there were too many to name. */
  private deleted: string[] = [];
  private tooMany = false;
  /** data_version as this connection last read it: our own commits never change it, others' do. */
  private seenVersion: number;

  constructor(private readonly db: Database) {
    this.st = writerStatements(db);
    this.tombstones = {
      vanishedUntil: (pubkey) => (this.st.vanishedUntil.get(pubkey) as { until: number } | null)?.until,
      deleted: (id, by) => this.st.deletedId.get(id, by) !== null,
      addressDeletedUntil: (a) => (this.st.deletedAddress.get(a.pubkey, a.kind, a.d) as { until: number } | null)?.until,
    };
    this.seq = (db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
    this.purging = db.query("SELECT 1 FROM purges LIMIT 1").get() !== null;
    if (this.purging)
      for (const r of db.query("SELECT purge, count(*) AS n FROM purge_targets GROUP BY purge").all() as { purge: number; n: number }[])
        this.targetsLeft.set(r.purge, r.n);
    this.seenVersion = this.dataVersion();
    this.txn = db.transaction((batch: PendingWrite[], rules: WriteRules) => {
      this.purgeLeftMs = PURGE_FIRST_MS;
      const outcomes = batch.map((w) => this.writeOne(w, rules));
      outcomes.forEach((o, i) => o.stored && this.raiseGate(batch[i]!.event, o.seq));
      // A small purge (most requests to vanish) is done before the commit, so before the OK.
      if (this.newPurges.length > 0) this.runPurges(this.newPurges);
      for (const o of outcomes) if (o.stored && o.purge !== undefined && this.ended.includes(o.purge)) delete o.purge;
      return outcomes;
    });
  }

  has(id: string): boolean {
    return this.st.hasId.get(id) !== null;
  }

  /** NIP-29: what the stored `e` may gate, in its own transaction (nips/nip29.ts raisedGate). */
  private raiseGate(e: NostrEvent, seq: number): void {
    const g = raisedGate(e);
    if (g) this.st.raiseGate.run(tagValue(g.group), g.events ? 1 : 0, g.metadata ? 1 : 0, seq);
  }

  /** NIP-29: the group state's gates (AdminStore.setGroupGates), each unless a commit after `asOf` raised it since. */
  setGates(gates: readonly GroupGate[], asOf: GateAsOf): void {
    this.db
      .transaction(() => {
        const seq = "seq" in asOf ? asOf.seq : ((this.st.eventById.get(asOf.id) as { seq: number } | null)?.seq ?? 0);
        for (const g of gates) this.st.setGate.run(tagValue(g.group), g.events ? 1 : 0, g.metadata ? 1 : 0, seq);
      })
      .immediate();
  }

  writeBatch(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] {
    return this.told(() => this.txn(batch, rules), true);
  }

  /**
   * writeBatch with the write lock taken at BEGIN (IMMEDIATE), waiting up to busy_timeout for it.
   * For a second process writing beside a running relay (bunstr import): a deferred transaction
   * that reads first fails at once with SQLITE_BUSY if the other process commits between its
   * first read and its first write.
   */
  writeBatchImmediate(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] {
    type Txn = SqliteWriter["txn"];
    return this.told(() => (this.txn as Txn & { immediate: Txn }).immediate(batch, rules), true);
  }

  /**
   * Runs a call that may commit, then tells onChanges what it deleted (or that another connection
   * committed since the last call). A call that fails rolled back: its deletions did not happen.
   */
  private told<T>(call: () => T, batch = false): T {
    const seq = this.seq;
    const named = this.deleted.length;
    let result: T;
    try {
      result = call();
    } catch (e) {
      this.seq = seq;
      this.deleted.length = named;
      for (const id of this.newPurges) this.targetsLeft.delete(id);
      this.newPurges = [];
      this.ended = [];
      throw e;
    }
    this.checkChanges(batch);
    this.tellPurges();
    return result;
  }

  /** After a commit: asks for purge steps if the call left purge work, and tells which purges it finished. */
  private tellPurges(): void {
    const { newPurges, ended } = this;
    this.newPurges = [];
    this.ended = [];
    if (newPurges.some((id) => !ended.includes(id))) {
      this.purging = true;
      if (this.onPurge) setTimeout(this.onPurge, 0);
    }
    if (ended.length > 0) this.onPurged?.(ended);
  }

  /**
   * Looks whether another connection committed (bunstr import, the other relay of a restart):
   * then seq follows what is stored. And tells onChanges that, or what was deleted since it was
   * last told; `batch`: after a writeBatch, whose events the relay fans out next.
   */
  checkChanges(batch = false): void {
    const version = this.dataVersion();
    const foreign = version !== this.seenVersion;
    this.seenVersion = version;
    if (foreign) this.seq = Math.max(this.seq, (this.st.maxSeq.get() as { s: number }).s);
    if (!this.onChanges) return;
    const deleted = this.deleted;
    const unknown = foreign || this.tooMany;
    this.deleted = [];
    this.tooMany = false;
    if (unknown) this.onChanges({ unknown: (this.st.maxCreatedAt.get() as { t: number }).t, batch });
    else if (deleted.length > 0) this.onChanges({ deleted });
  }

  private dataVersion(): number {
    return (this.st.dataVersion.get() as { data_version: number }).data_version;
  }

  /**
   * NIP-40: deletes the events expired at `now`, for about `budgetMs` here and the rest in
   * purgeSteps (an expired event is already hidden from every read: only its space is taken
   * back); returns how many were deleted here. ~420 events of many tags expiring in the same
   * second were one transaction of ~15 s.
   */
  sweepExpired(now: number, budgetMs = PURGE_FIRST_MS): number {
    this.expireUpTo = Math.max(this.expireUpTo, now);
    // IMMEDIATE, as writeBatchImmediate: another process may be writing to the same file.
    return this.told(() =>
      this.db
        .transaction(() => {
          const before = this.purgedEvents;
          if (!this.expire(performance.now() + budgetMs) && this.onPurge) setTimeout(this.onPurge, 0);
          return this.purgedEvents - before;
        })
        .immediate(),
    );
  }

  /** Deletes expired events (up to expireUpTo) until the deadline; true when none is left. */
  private expire(deadline: number): boolean {
    for (;;) {
      // Seqs only: a row is read as it is deleted (32 events of 100 KB read for the one a step
      // has time to delete cost more than the delete).
      const rows = this.st.expired.all(this.expireUpTo, PURGE_ROWS) as { seq: number }[];
      if (rows.length === 0) {
        this.expireUpTo = 0;
        return true;
      }
      for (const r of rows) {
        if (performance.now() >= deadline) return false;
        this.remove(r.seq);
        this.purgedEvents++;
      }
    }
  }

  /** NIP-86 banevent: deletes the event with this id; false if it was not stored. `keepOut`: and tombstones it (AdminStore.deleteEvent). */
  removeById(id: string, keepOut = false): boolean {
    return this.told(() =>
      this.db
        .transaction(() => {
          const target = this.st.eventById.get(id) as { seq: number; pubkey: string } | null;
          if (target) this.remove(target.seq);
          if (target && keepOut) this.st.tombstoneId.run(id, target.pubkey);
          return target !== null;
        })
        .immediate(),
    );
  }

  /**
   * NIP-86 banpubkey: deletes every event of this author stored now, as a purge: what fits in
   * PURGE_FIRST_MS at once, the rest in purgeSteps. Returns how many were deleted at once.
   * `also` runs in the same transaction (purgeHidden marks its row there).
   */
  removeByAuthor(pubkey: string, also?: () => void): number {
    return this.told(() =>
      this.db
        .transaction(() => {
          also?.();
          const upto = (this.st.maxSeq.get() as { s: number }).s;
          const before = this.purgedEvents;
          this.purgeLeftMs = PURGE_FIRST_MS;
          this.runPurges([this.addPurge(pubkey, null, null, upto, false)]);
          return this.purgedEvents - before;
        })
        .immediate(),
    );
  }

  /**
   * Issue 34: a ban hides (or an unban shows again) what is stored: told as an unknown change,
   * so the answers memory holds (the ring's feeds, the replaceable and tag answers) start over.
   */
  setHidden(what: HiddenWhat, key: string, since: number | null): void {
    this.told(() => {
      if (since === null) this.st.unhide.run(what, key);
      else this.st.hide.run(what, key, since);
      if (this.onChanges) this.tooMany = true;
    });
  }

  /**
   * The purge of a hidden row after its retention: an event deleted at once; an author's events
   * as banpubkey's purge (removeByAuthor, in steps), the row kept (and hiding what is left) until
   * a later call finds that purge finished. True once the row is gone.
   */
  purgeHidden(what: HiddenWhat, key: string): boolean {
    const row = this.st.hiddenRow.get(what, key) as { purging: number } | null;
    if (!row) return true;
    if (what === "event") {
      this.removeById(key);
      this.setHidden(what, key, null);
      return true;
    }
    // The mark and the purge commit together: a row marked purging always has its purge recorded.
    if (!row.purging) this.removeByAuthor(key, () => this.st.startPurgeHidden.run(what, key));
    if (this.st.purgingAuthor.get(key) !== null) return false;
    // What the purge leaves (a group's moderation records, as banpubkey's) is served again.
    this.setHidden(what, key, null);
    return true;
  }

  /**
   * One bounded step of the waiting purges, oldest first, in its own (IMMEDIATE) transaction of
   * about `budgetMs`; true if some work remains. The relay runs steps between write batches
   * (store/queue.ts), so other clients' EVENTs and REQs go on while a big key vanishes.
   */
  purgeStep(budgetMs: number): boolean {
    if (!this.purging && this.expireUpTo === 0) return false;
    return this.told(() =>
      this.db
        .transaction(() => {
          const deadline = performance.now() + budgetMs;
          for (;;) {
            const p = this.nextPurge();
            if (!p) break;
            if (!this.purge(p, deadline)) return true;
          }
          this.purging = false;
          // The NIP-40 sweep after the deletions that were asked for.
          return this.expireUpTo !== 0 && !this.expire(deadline);
        })
        .immediate(),
    );
  }

  /**
   * The purge a step works on: by turns the one with fewest targets left (a small deletion's OK
   * waits for a step or two, not for every purge before it) and the oldest (so every purge,
   * a vanish's or a ban's too, goes on).
   */
  private nextPurge(): Purge | null {
    this.smallestTurn = !this.smallestTurn;
    if (this.smallestTurn) {
      for (;;) {
        let smallest: number | undefined;
        let fewest = Number.POSITIVE_INFINITY;
        for (const [id, n] of this.targetsLeft)
          if (n < fewest) {
            fewest = n;
            smallest = id;
          }
        if (smallest === undefined) break;
        const p = this.st.purgeById.get(smallest) as Purge | null;
        if (p) return p;
        this.targetsLeft.delete(smallest); // gone (a rolled-back call's)
      }
    }
    return this.st.nextPurge.get() as Purge | null;
  }

  /** Records a purge (the caller's transaction); told (onPurge) once committed, if not finished then. */
  private addPurge(pubkey: string, until: number | null, keep: number | null, upto: number | null, wraps: boolean, listed = false): number {
    const id = Number(this.st.addPurge.run(pubkey, until, keep, upto, wraps ? 1 : 0, listed ? 1 : 0).lastInsertRowid);
    this.newPurges.push(id);
    return id;
  }

  /** Runs these purges (those not done yet) within the call's purgeLeftMs (each its first PURGE_MIN_EVENTS). */
  private runPurges(ids: number[]): void {
    for (const id of ids) {
      const p = this.st.purgeById.get(id) as Purge | null;
      if (p) this.purgeAtOnce(p);
    }
  }

  /** Runs a purge within what is left of the call's purgeLeftMs, its first PURGE_MIN_EVENTS anyway; true when it is done. */
  private purgeAtOnce(p: Purge): boolean {
    const started = performance.now();
    const done = this.purge(p, started + this.purgeLeftMs);
    this.purgeLeftMs -= performance.now() - started;
    return done;
  }

  /** Deletes what a purge covers until the deadline (its first PURGE_MIN_EVENTS rows whatever the time); true when it is done (and forgotten). */
  private purge(p: Purge, deadline: number): boolean {
    let free = PURGE_MIN_EVENTS;
    if (p.listed) return this.purgeListed(p, deadline, free);
    for (;;) {
      let rows = this.st.purgeAuthored.all(p.pubkey, p.until ?? NO_LIMIT, p.keep ?? -1, p.upto ?? NO_LIMIT, PURGE_ROWS) as Row[];
      if (rows.length === 0 && p.wraps) rows = this.st.purgeWraps.all(p.pubkey, p.upto ?? NO_LIMIT, PURGE_ROWS) as Row[];
      if (rows.length === 0) return this.endPurge(p);
      for (const r of rows) {
        if (free > 0) free--;
        else if (performance.now() >= deadline) return false;
        this.removeRow(r);
        this.purgedEvents++;
      }
    }
  }

  /** A NIP-09 purge: its listed events (those still stored), until the deadline. */
  private purgeListed(p: Purge, deadline: number, free: number): boolean {
    for (;;) {
      const rows = this.st.listedTargets.all(p.id, PURGE_ROWS) as Target[];
      if (rows.length === 0) return this.endPurge(p);
      for (const r of rows) {
        if (free > 0) free--;
        else if (performance.now() >= deadline) return false;
        if (r.seq !== null) {
          this.remove(r.seq);
          this.purgedEvents++;
        }
        this.st.dropTarget.run(p.id, r.target);
        const left = this.targetsLeft.get(p.id);
        if (left !== undefined) this.targetsLeft.set(p.id, left - 1);
      }
    }
  }

  private endPurge(p: Purge): true {
    this.st.endPurge.run(p.id);
    this.targetsLeft.delete(p.id);
    this.ended.push(p.id);
    return true;
  }

  /** One event, in the steps and order of store/write-steps.ts, each answered here in SQL. */
  private writeOne(w: PendingWrite, rules: WriteRules): WriteOutcome {
    const e = w.event;
    return runSteps<Existing>(writeSteps(w, rules), (s) => {
      switch (s.step) {
        case "stored":
          return this.has(e.id);
        case "vanish":
          return this.applyVanish(e, s.keep);
        case "tombstoned":
          return this.tombstoned(e);
        case "versions":
          return (
            isAddressable(e.kind) ? this.st.findAddressable.all(e.pubkey, e.kind, dTag(e)) : this.st.findReplaceable.all(e.pubkey, e.kind)
          ) as Existing[];
        case "replace":
          for (const old of s.versions) this.remove(old.seq);
          return;
        case "insert":
          return this.insert(e, w.json, rules);
        case "delete":
          return this.applyDeletion(e, s.seq);
      }
    });
  }

  /** The event, its tag rows and its search text; its seq, or undefined when the id is stored. */
  private insert(e: NostrEvent, json: string, rules: WriteRules): number | undefined {
    const stored = storedJson(e, json);
    const d = isAddressable(e.kind) ? dTag(e) : null;
    const r = this.st.insertEvent.run(e.id, e.pubkey, e.created_at, e.kind, d, expirationOf(e) ?? null, stored.json, stored.sig);
    if (r.changes === 0) return undefined;
    const seq = Number(r.lastInsertRowid);
    this.indexTags(e, seq);
    if (rules.search) {
      const text = indexText(e, rules.searchSkipKinds);
      if (text) this.st.insertText.run(seq, text);
    }
    this.seq = seq;
    return seq;
  }

  /** Why an event may not (re)enter (semantics.ts tombstoneRefusal), from the tombstone tables. */
  private tombstoned(e: NostrEvent): Refusal | undefined {
    return tombstoneRefusal(e, this.tombstones);
  }

  /**
   * NIP-09: delete the requester's own referenced events, and gift wraps addressed to the
   * requester, and keep them deleted (semantics.ts deletionOf). The tombstones are written here;
   * the events go as a purge of the listed targets: at once, within what is left of the batch's
   * PURGE_FIRST_MS, and the rest in steps between batches. Returns the purge when it is not
   * finished: the request's OK waits for it (WriteOutcome.purge), so nothing it deletes is served
   * after its OK.
   */
  private applyDeletion(req: NostrEvent, seq: number): number | undefined {
    const { ids, addresses } = deletionTargets(req);
    const doomed: { seq: number; id: string }[] = [];
    for (const id of ids) {
      const target = this.st.deletionTarget.get(id, req.pubkey) as {
        seq: number;
        kind: number;
        pubkey: string;
        tagsRequester: number;
        inGroup: number;
      } | null;
      const { remove, tombstone } = deletionOf(
        req,
        target && { ...target, tagsRequester: target.tagsRequester === 1, inGroup: target.inGroup === 1 },
      );
      if (remove && target) doomed.push({ seq: target.seq, id });
      if (tombstone) this.st.tombstoneId.run(id, req.pubkey);
    }
    for (const a of addresses) this.deleteAddress(a, req.created_at, doomed);
    if (doomed.length === 0) return undefined;
    const purge = this.addPurge(req.pubkey, null, seq, null, false, true);
    for (const d of doomed) this.st.addTarget.run(purge, d.seq, d.id);
    this.targetsLeft.set(purge, doomed.length);
    return this.purgeAtOnce(this.st.purgeById.get(purge) as Purge) ? undefined : purge;
  }

  private deleteAddress(a: Address, until: number, doomed: { seq: number; id: string }[]): void {
    for (const r of this.st.addressUpTo.all(a.pubkey, a.kind, a.d, until) as { seq: number; id: string }[]) doomed.push(r);
    this.st.tombstoneAddress.run(a.pubkey, a.kind, a.d, until);
  }

  /**
   * NIP-62: everything of the pubkey up to the request (the request itself, `keep`, stays), and
   * gift wraps to it. The tombstone is written here, in the request's transaction, so nothing it
   * covers is accepted again from its commit (and OK) on; the deletion is a purge: done at once
   * when small, else carried out in steps right after (purgeStep).
   */
  private applyVanish(req: NostrEvent, keep: number | null): void {
    this.st.vanish.run(req.pubkey, req.created_at);
    const upto = (this.st.maxSeq.get() as { s: number }).s;
    this.addPurge(req.pubkey, req.created_at, keep, upto, true);
  }

  private indexTags(e: NostrEvent, seq: number): void {
    for (const t of e.tags) if (indexedTag(t)) this.st.insertTag.run(t[0], tagValue(t[1]), e.created_at, seq, e.kind);
  }

  private remove(seq: number): void {
    const r = this.st.rowBySeq.get(seq) as Row | null;
    if (r) this.removeRow(r);
  }

  /** Deletes an event and its index rows: its tag rows by the values they were written with. */
  private removeRow({ seq, created_at, json, key }: Row): void {
    if (this.onChanges) {
      if (this.deleted.length < MAX_NAMED) this.deleted.push(key);
      else this.tooMany = true;
    }
    for (const t of (JSON.parse(json) as NostrEvent).tags) if (indexedTag(t)) this.st.deleteTag.run(t[0], tagValue(t[1]), created_at, seq);
    this.st.deleteEvent.run(seq);
    this.st.deleteText.run(seq);
  }
}
