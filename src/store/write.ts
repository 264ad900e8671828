// The single writer: NIP-01/09/40/50/62 storage semantics inside one transaction per batch.
import type { Database, Statement } from "bun:sqlite";
import { deletionTargets, DELETION_KIND, undeletable, type Address } from "../nips/nip09.ts";
import { expirationOf } from "../nips/nip40.ts";
import { indexText } from "../nips/nip50.ts";
import { VANISH_KIND } from "../nips/nip62.ts";
import { dTag, type NostrEvent } from "../protocol/event.ts";
import { isAddressable, isReplaceable } from "../protocol/kinds.ts";
import type { PendingWrite, WriteOutcome } from "./types.ts";

/** Which NIPs shape storage right now (read per batch, so a config reload applies at once). */
export interface WriteRules {
  deletion: boolean;
  vanish: boolean;
  search: boolean;
  /** Kinds whose content is not indexed for search (encrypted DMs and the like). */
  searchSkipKinds: ReadonlySet<number>;
}

/** Only the first value of single-letter tags is indexed (NIP-01); its size is bounded by max_message_bytes. */
const SINGLE_LETTER = /^[a-zA-Z]$/;
const GIFT_WRAP = 1059;

interface Existing {
  seq: number;
  created_at: number;
  id: string;
}

const refused = (reason: string): WriteOutcome => ({ stored: false, duplicate: false, reason });

export class SqliteWriter {
  private readonly st: Record<string, Statement>;
  private readonly txn: (batch: PendingWrite[], rules: WriteRules) => WriteOutcome[];
  seq: number;

  constructor(private readonly db: Database) {
    const q = (sql: string) => db.prepare(sql);
    this.st = {
      insertEvent: q(
        "INSERT INTO events (id, pubkey, created_at, kind, d, expiration, json) VALUES (unhex(?1), unhex(?2), ?3, ?4, ?5, ?6, ?7) ON CONFLICT(id) DO NOTHING",
      ),
      insertTag: q("INSERT OR IGNORE INTO tags (name, value, created_at, seq, kind) VALUES (?, ?, ?, ?, ?)"),
      insertText: q("INSERT INTO events_fts (rowid, text) VALUES (?, ?)"),
      findReplaceable: q("SELECT seq, created_at, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ?"),
      findAddressable: q("SELECT seq, created_at, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ? AND d = ?"),
      deleteEvent: q("DELETE FROM events WHERE seq = ?"),
      // Through the tag table's primary key, from the event's own tags (no index by seq: it
      // would cost ~360 bytes and a b-tree insert per tag). Run before the event row goes.
      deleteTags: q(
        "DELETE FROM tags WHERE (name, value, created_at, seq) IN (SELECT j.value ->> 0, j.value ->> 1, e.created_at, e.seq FROM events e, json_each(e.json, '$.tags') j WHERE e.seq = ?1)",
      ),
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
      tagged: q("SELECT 1 FROM events e, tags t WHERE e.seq = ?1 AND t.name = 'p' AND t.value = ?2 AND t.created_at = e.created_at AND t.seq = e.seq"),
      addressUpTo: q("SELECT seq FROM events WHERE pubkey = unhex(?) AND kind = ? AND coalesce(d, '') = ? AND created_at <= ?"),
      // NIP-62
      vanishedUntil: q("SELECT until FROM vanished WHERE pubkey = unhex(?)"),
      vanish: q("INSERT INTO vanished (pubkey, until) VALUES (unhex(?), ?) ON CONFLICT DO UPDATE SET until = max(until, excluded.until)"),
      authoredUpTo: q("SELECT seq FROM events WHERE pubkey = unhex(?) AND created_at <= ? AND seq <> ?"),
      wrapsFor: q("SELECT seq FROM tags WHERE name = 'p' AND value = ? AND kind = 1059"),
      // NIP-86
      authored: q("SELECT seq FROM events WHERE pubkey = unhex(?)"),
      // NIP-40
      expired: q("SELECT seq FROM events WHERE expiration IS NOT NULL AND expiration <= ? LIMIT ?"),
    };
    this.seq = (db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
    this.txn = db.transaction((batch: PendingWrite[], rules: WriteRules) => batch.map((w) => this.writeOne(w, rules)));
  }

  has(id: string): boolean {
    return this.st.hasId!.get(id) !== null;
  }

  writeBatch(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] {
    const before = this.seq;
    try {
      return this.txn(batch, rules);
    } catch (e) {
      this.seq = before; // the transaction rolled back
      throw e;
    }
  }

  /**
   * writeBatch with the write lock taken at BEGIN (IMMEDIATE), waiting up to busy_timeout for it.
   * For a second process writing beside a running relay (bunstr import): a deferred transaction
   * that reads first fails at once with SQLITE_BUSY if the other process commits between its
   * first read and its first write.
   */
  writeBatchImmediate(batch: PendingWrite[], rules: WriteRules): WriteOutcome[] {
    const before = this.seq;
    try {
      type Txn = SqliteWriter["txn"];
      return (this.txn as Txn & { immediate: Txn }).immediate(batch, rules);
    } catch (e) {
      this.seq = before;
      throw e;
    }
  }

  /** Deletes up to `max` expired events (NIP-40); returns how many. */
  sweepExpired(now: number, max = 5000): number {
    // IMMEDIATE, as writeBatchImmediate: another process may be writing to the same file.
    return this.db.transaction(() => {
      const rows = this.st.expired!.all(now, max) as { seq: number }[];
      for (const r of rows) this.remove(r.seq);
      return rows.length;
    }).immediate();
  }

  /** NIP-86 banevent: deletes the event with this id; false if it was not stored. */
  removeById(id: string): boolean {
    return this.db.transaction(() => {
      const target = this.st.eventById!.get(id) as { seq: number } | null;
      if (target) this.remove(target.seq);
      return target !== null;
    }).immediate();
  }

  /** NIP-86 banpubkey: deletes every event of this author; returns how many. */
  removeByAuthor(pubkey: string): number {
    return this.db.transaction(() => {
      const rows = this.st.authored!.all(pubkey) as { seq: number }[];
      for (const r of rows) this.remove(r.seq);
      return rows.length;
    }).immediate();
  }

  private writeOne({ event: e, json }: PendingWrite, rules: WriteRules): WriteOutcome {
    const gone = this.tombstoned(e);
    if (gone) return refused(gone);
    const addressable = isAddressable(e.kind);
    const d = addressable ? dTag(e) : null;
    if (addressable || isReplaceable(e.kind)) {
      const existing = (addressable ? this.st.findAddressable!.all(e.pubkey, e.kind, d) : this.st.findReplaceable!.all(e.pubkey, e.kind)) as Existing[];
      for (const old of existing) {
        if (old.id === e.id) return { stored: false, duplicate: true };
        // Newest wins; on equal created_at the lowest id is kept (NIP-01).
        if (old.created_at > e.created_at || (old.created_at === e.created_at && old.id < e.id))
          return refused("duplicate: a newer version of this replaceable event is already stored");
      }
      for (const old of existing) this.remove(old.seq);
    }
    const r = this.st.insertEvent!.run(e.id, e.pubkey, e.created_at, e.kind, d, expirationOf(e) ?? null, json);
    if (r.changes === 0) return { stored: false, duplicate: true };
    const seq = Number(r.lastInsertRowid);
    this.indexTags(e, seq);
    if (rules.search) {
      const text = indexText(e, rules.searchSkipKinds);
      if (text) this.st.insertText!.run(seq, text);
    }
    this.seq = seq;
    if (e.kind === DELETION_KIND && rules.deletion) this.applyDeletion(e);
    if (e.kind === VANISH_KIND && rules.vanish) this.applyVanish(e, seq);
    return { stored: true, seq };
  }

  /** Why an event may not (re)enter: deleted by its author, or its author vanished. */
  private tombstoned(e: NostrEvent): string | undefined {
    const vanished = this.st.vanishedUntil!.get(e.pubkey) as { until: number } | null;
    if (vanished && e.created_at <= vanished.until) return "blocked: this pubkey asked to vanish from this relay";
    if (e.kind === GIFT_WRAP) {
      for (const t of e.tags) {
        if (t[0] !== "p" || t[1] === undefined || !/^[0-9a-f]{64}$/.test(t[1])) continue;
        const v = this.st.vanishedUntil!.get(t[1]) as { until: number } | null;
        if (v && e.created_at <= v.until) return "blocked: the recipient asked to vanish from this relay";
      }
    }
    if (undeletable(e.kind)) return undefined;
    if (this.st.deletedId!.get(e.id, e.pubkey)) return "blocked: this event was deleted by its author";
    if (e.kind === GIFT_WRAP)
      for (const t of e.tags)
        if (t[0] === "p" && t[1] !== undefined && /^[0-9a-f]{64}$/.test(t[1]) && this.st.deletedId!.get(e.id, t[1]))
          return "blocked: this gift wrap was deleted by its recipient";
    if (isAddressable(e.kind) || isReplaceable(e.kind)) {
      const a = this.st.deletedAddress!.get(e.pubkey, e.kind, isAddressable(e.kind) ? dTag(e) : "") as { until: number } | null;
      if (a && e.created_at <= a.until) return "blocked: this address was deleted by its author";
    }
    return undefined;
  }

  /**
   * NIP-09: delete the requester's own referenced events, and gift wraps addressed to the
   * requester (NIP-59: their signing keys are random), and keep them deleted.
   */
  private applyDeletion(req: NostrEvent): void {
    const { ids, addresses } = deletionTargets(req);
    for (const id of ids) {
      const target = this.st.eventById!.get(id) as { seq: number; kind: number; pubkey: string } | null;
      if (target && undeletable(target.kind)) continue;
      const mayDelete = target && (target.pubkey === req.pubkey || (target.kind === GIFT_WRAP && this.st.tagged!.get(target.seq, req.pubkey)));
      if (mayDelete) this.remove(target.seq);
      this.st.tombstoneId!.run(id, req.pubkey);
    }
    for (const a of addresses) this.deleteAddress(a, req.created_at);
  }

  private deleteAddress(a: Address, until: number): void {
    for (const r of this.st.addressUpTo!.all(a.pubkey, a.kind, a.d, until) as { seq: number }[]) this.remove(r.seq);
    this.st.tombstoneAddress!.run(a.pubkey, a.kind, a.d, until);
  }

  /** NIP-62: everything of the pubkey up to the request (the request itself stays), and gift wraps to it. */
  private applyVanish(req: NostrEvent, keep: number): void {
    for (const r of this.st.authoredUpTo!.all(req.pubkey, req.created_at, keep) as { seq: number }[]) this.remove(r.seq);
    for (const r of this.st.wrapsFor!.all(req.pubkey) as { seq: number }[]) this.remove(r.seq);
    this.st.vanish!.run(req.pubkey, req.created_at);
  }

  private indexTags(e: NostrEvent, seq: number): void {
    for (const t of e.tags) {
      const name = t[0];
      const value = t[1];
      if (name === undefined || value === undefined || !SINGLE_LETTER.test(name)) continue;
      this.st.insertTag!.run(name, value, e.created_at, seq, e.kind);
    }
  }

  private remove(seq: number): void {
    this.st.deleteTags!.run(seq); // reads the event's tags: first
    this.st.deleteEvent!.run(seq);
    this.st.deleteText!.run(seq);
  }
}
