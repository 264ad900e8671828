// The single writer: NIP-01 storage semantics inside one transaction per batch.
import type { Database, Statement } from "bun:sqlite";
import { dTag, type NostrEvent } from "../protocol/event.ts";
import { isAddressable, isReplaceable } from "../protocol/kinds.ts";
import type { PendingWrite, WriteOutcome } from "./types.ts";

/** Only the first value of single-letter tags is indexed (NIP-01); its size is bounded by max_message_bytes. */
const SINGLE_LETTER = /^[a-zA-Z]$/;

interface Existing {
  seq: number;
  created_at: number;
  id: string;
}

export class SqliteWriter {
  private readonly insertEvent: Statement;
  private readonly insertTag: Statement;
  private readonly findReplaceable: Statement;
  private readonly findAddressable: Statement;
  private readonly deleteEvent: Statement;
  private readonly deleteTags: Statement;
  private readonly hasId: Statement;
  private readonly txn: (batch: PendingWrite[]) => WriteOutcome[];
  seq: number;

  constructor(private readonly db: Database) {
    this.insertEvent = db.prepare(
      "INSERT INTO events (id, pubkey, created_at, kind, d, json) VALUES (unhex(?1), unhex(?2), ?3, ?4, ?5, ?6) ON CONFLICT(id) DO NOTHING",
    );
    this.insertTag = db.prepare("INSERT OR IGNORE INTO tags (name, value, created_at, seq, kind) VALUES (?, ?, ?, ?, ?)");
    this.findReplaceable = db.prepare("SELECT seq, created_at, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ?");
    this.findAddressable = db.prepare("SELECT seq, created_at, lower(hex(id)) AS id FROM events WHERE pubkey = unhex(?) AND kind = ? AND d = ?");
    this.deleteEvent = db.prepare("DELETE FROM events WHERE seq = ?");
    this.deleteTags = db.prepare("DELETE FROM tags WHERE seq = ?");
    this.hasId = db.prepare("SELECT 1 FROM events WHERE id = unhex(?)");
    this.seq = (db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
    this.txn = db.transaction((batch: PendingWrite[]) => batch.map((w) => this.writeOne(w)));
  }

  has(id: string): boolean {
    return this.hasId.get(id) !== null;
  }

  writeBatch(batch: PendingWrite[]): WriteOutcome[] {
    const before = this.seq;
    try {
      return this.txn(batch);
    } catch (e) {
      this.seq = before; // the transaction rolled back
      throw e;
    }
  }

  private writeOne({ event: e, json }: PendingWrite): WriteOutcome {
    const addressable = isAddressable(e.kind);
    const d = addressable ? dTag(e) : null;
    if (addressable || isReplaceable(e.kind)) {
      const existing = (addressable ? this.findAddressable.all(e.pubkey, e.kind, d) : this.findReplaceable.all(e.pubkey, e.kind)) as Existing[];
      for (const old of existing) {
        if (old.id === e.id) return { stored: false, duplicate: true };
        // Newest wins; on equal created_at the lowest id is kept (NIP-01).
        if (old.created_at > e.created_at || (old.created_at === e.created_at && old.id < e.id))
          return { stored: false, duplicate: false, reason: "duplicate: a newer version of this replaceable event is already stored" };
      }
      for (const old of existing) this.remove(old.seq);
    }
    const r = this.insertEvent.run(e.id, e.pubkey, e.created_at, e.kind, d, json);
    if (r.changes === 0) return { stored: false, duplicate: true };
    const seq = Number(r.lastInsertRowid);
    this.indexTags(e, seq);
    this.seq = seq;
    return { stored: true, seq };
  }

  private indexTags(e: NostrEvent, seq: number): void {
    for (const t of e.tags) {
      const name = t[0];
      const value = t[1];
      if (name === undefined || value === undefined || !SINGLE_LETTER.test(name)) continue;
      this.insertTag.run(name, value, e.created_at, seq, e.kind);
    }
  }

  private remove(seq: number): void {
    this.deleteEvent.run(seq);
    this.deleteTags.run(seq);
  }
}
