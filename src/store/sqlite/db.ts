// Opening the SQLite database: pragmas and schema migrations. Only store/ touches SQL.
import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { raisedGate } from "../../nips/nip29.ts";
import { isHex64, serializedHead, serializedTail, type NostrEvent } from "../../protocol/event.ts";

interface DbOptions {
  /** Absolute path, or ":memory:". */
  path: string;
  synchronous: "normal" | "full";
  readonly?: boolean;
}

/**
 * A tag value as the tags table holds it, and as a query binds it: 64 lowercase hex (an event id,
 * a pubkey: most tag rows) as its 32 bytes, anything else as text. The two forms never compare
 * equal, and no text row is 64 lowercase hex, so a match on either form is a match on the value.
 */
export const tagValue = (v: string): string | Uint8Array => (isHex64(v) ? Buffer.from(v, "hex") : v);

/** tagValue in SQL, of a text expression (a list's json_each value). */
export const tagValueSql = (x: string): string =>
  `CASE WHEN length(${x}) = 64 AND ${x} NOT GLOB '*[^0-9a-f]*' THEN unhex(${x}) ELSE ${x} END`;

/** A tags.value column back as the tag's text. Exported for tests that read the tags table directly. */
export const tagValueText = (col: string): string => `CASE WHEN typeof(${col}) = 'blob' THEN lower(hex(${col})) ELSE ${col} END`;

const HEX128 = /^[0-9a-f]{128}$/;

/**
 * An event's JSON as the events table holds it (schema 10): only its tags and content, as
 * {"tags":…,"content":…} (still a JSON object, readable with json_each and JSON.parse). The
 * stored and served form (protocol/event.ts serializeEvent) begins with the id, pubkey,
 * created_at and kind, which the row's columns hold, and ends with the sig, which the sig column
 * holds as 64 bytes: eventJson puts the same bytes back. JSON of any other shape is kept whole,
 * with sig NULL, and served as it is.
 */
export function storedJson(
  e: { id: string; pubkey: string; created_at: number; kind: number; sig: string },
  json: string,
): { json: string; sig: Uint8Array | null } {
  const head = serializedHead(e.id, e.pubkey, e.created_at, e.kind);
  const tail = serializedTail(e.sig);
  const whole = { json, sig: null };
  if (!HEX128.test(e.sig) || !Number.isSafeInteger(e.created_at) || !Number.isSafeInteger(e.kind)) return whole;
  if (json.length < head.length + tail.length || !json.startsWith(head) || !json.endsWith(tail)) return whole;
  return { json: `{${json.slice(head.length, json.length - tail.length)}}`, sig: Buffer.from(e.sig, "hex") };
}

/**
 * The columns of an events row `a` that eventJson reads, in SQL (id as hex, pubkey and sig as
 * bytes). All but the sig come before the JSON in the row, so reading them costs no page more.
 */
export const eventColsSql = (a: string): string =>
  `lower(hex(${a}.id)) AS id, ${a}.pubkey AS pk, ${a}.created_at AS ca, ${a}.kind AS k, ${a}.json AS j, ${a}.sig AS g`;

/** A row of eventColsSql read with .values(), after one leading column (the seq). */
export type EventColumns = [number, string, Uint8Array, number, number, string, Uint8Array | null];

/**
 * The event's JSON as accepted, from its row (storedJson undone). With sig NULL the row holds it
 * whole; else the id, pubkey, created_at and kind go before its tags and content, the sig after.
 */
export const eventJson = (id: string, pubkey: Uint8Array, createdAt: number, kind: number, json: string, sig: Uint8Array | null): string =>
  sig === null ? json : `${serializedHead(id, pubkey.toHex(), createdAt, kind)}${json.slice(1, -1)}${serializedTail(sig.toHex())}`;

/** eventJson of a row of eventColsSql read with .values() after its seq (EventColumns). */
export const rowJson = (r: EventColumns): string => eventJson(r[1], r[2], r[3], r[4], r[5], r[6]);

/**
 * eventJson in SQL, of the events row `a`. Exported for tests that read the table directly (or
 * write an older schema's rows); the relay's reads and `bunstr export` use eventJson.
 */
export const eventJsonSql = (a: string): string =>
  `CASE WHEN ${a}.sig IS NULL THEN ${a}.json ELSE ${headSql(a)} || substr(${a}.json, 2, length(${a}.json) - 2) || ',"sig":"' || lower(hex(${a}.sig)) || '"}' END`;

/** serializedHead in SQL, of the events row `a`'s columns. */
const headSql = (a: string): string =>
  `'{"id":"' || lower(hex(${a}.id)) || '","pubkey":"' || lower(hex(${a}.pubkey)) || '","created_at":' || ${a}.created_at || ',"kind":' || ${a}.kind || ','`;

/**
 * Bytes of eventJson, for batching reads (query.ts FETCH_BYTES): the head and the sig add 307
 * bytes and the digits of created_at and kind, for the two braces the stored form keeps. Exact
 * for every row storedJson shortened, over for one kept whole. It does not look at sig: a column
 * after the JSON, which SQLite reaches only through the JSON's overflow pages (the differential
 * test's 10,000 REQs took 64.6 s with that instead of 41 s).
 */
export const eventBytesSql = (a: string): string => `octet_length(${a}.json) + 307 + length(${a}.created_at) + length(${a}.kind)`;

/** Rows of a migration's UPDATE at a time: bounded memory whatever the table's size. */
const MIGRATION_ROWS = 10_000;

/** A schema step: SQL, or a function for what SQL alone cannot do. All pending ones run in one transaction. */
type Migration = string | ((db: Database) => void);

const migrations: Migration[] = [
  // 1: events with binary ids, a covering tag index and replaceable/addressable keys.
  `CREATE TABLE events (
     seq        INTEGER PRIMARY KEY,   -- commit order; REQ snapshots cut at a seq
     id         BLOB    NOT NULL,
     pubkey     BLOB    NOT NULL,
     created_at INTEGER NOT NULL,
     kind       INTEGER NOT NULL,
     d          TEXT,                  -- d tag of addressable events, NULL otherwise
     json       TEXT    NOT NULL
   );
   CREATE UNIQUE INDEX events_id ON events(id);
   CREATE INDEX events_created ON events(created_at DESC, id);
   CREATE INDEX events_pubkey ON events(pubkey, created_at DESC);
   CREATE INDEX events_pubkey_kind ON events(pubkey, kind, created_at DESC);
   CREATE INDEX events_kind ON events(kind, created_at DESC);
   CREATE INDEX events_address ON events(pubkey, kind, d) WHERE d IS NOT NULL;
   -- One row per single-letter tag (first value only, as NIP-01 says), carrying created_at and
   -- kind so tag queries are answered and ordered from this index alone.
   CREATE TABLE tags (
     name       TEXT    NOT NULL,
     value      TEXT    NOT NULL,
     created_at INTEGER NOT NULL,
     seq        INTEGER NOT NULL,
     kind       INTEGER NOT NULL,
     PRIMARY KEY (name, value, created_at, seq)
   ) WITHOUT ROWID;
   CREATE INDEX tags_seq ON tags(seq);`,
  // 2: NIP-40 expiration, NIP-09/62 tombstones (so deleted events stay deleted), NIP-50 search.
  `ALTER TABLE events ADD COLUMN expiration INTEGER;
   CREATE INDEX events_expiration ON events(expiration) WHERE expiration IS NOT NULL;
   -- Events deleted by id (kind 5 "e" tags): refused if the same author publishes them again.
   -- Keyed by both: anyone may ask to delete any id, only the author's request counts.
   CREATE TABLE deleted_ids (id BLOB NOT NULL, pubkey BLOB NOT NULL, PRIMARY KEY (id, pubkey)) WITHOUT ROWID;
   -- Addresses deleted up to a time (kind 5 "a" tags); d is "" for replaceable kinds.
   CREATE TABLE deleted_addresses (
     pubkey BLOB NOT NULL, kind INTEGER NOT NULL, d TEXT NOT NULL, until INTEGER NOT NULL,
     PRIMARY KEY (pubkey, kind, d)
   ) WITHOUT ROWID;
   -- Requests to vanish (kind 62): nothing of this pubkey up to \`until\` may come back.
   CREATE TABLE vanished (pubkey BLOB PRIMARY KEY, until INTEGER NOT NULL) WITHOUT ROWID;
   -- Full-text index of content and title-like tags; rowid = events.seq.
   CREATE VIRTUAL TABLE events_fts USING fts5(text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');`,
  // 3: no index of tags by seq (~360 bytes per event and a b-tree insert per tag): deletes and
  // tag checks go through the primary key with the event's created_at and seq.
  `DROP INDEX IF EXISTS tags_seq;`,
  // 4: NIP-86 admin state (bans, allow lists, kinds, blocked IPs, relay info, roles) in one
  // keyed table, NIP-98 tokens already used (replay protection) and the log of admin calls.
  `CREATE TABLE admin_entries (
     list  TEXT    NOT NULL,           -- e.g. banned_pubkeys, allowed_kinds, blocked_ips, info
     key   TEXT    NOT NULL,           -- pubkey, event id, kind, IP, info field, role id
     value TEXT    NOT NULL,           -- the reason, or the new value
     at    INTEGER NOT NULL,
     PRIMARY KEY (list, key)
   ) WITHOUT ROWID;
   CREATE TABLE admin_tokens (id TEXT PRIMARY KEY, expires INTEGER NOT NULL) WITHOUT ROWID;
   CREATE TABLE admin_log (
     seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, pubkey TEXT NOT NULL,
     method TEXT NOT NULL, params TEXT NOT NULL, result TEXT NOT NULL
   );`,
  // 5: deletions carried out in bounded steps between write batches (a request to vanish, a
  // ban: store/sqlite/write.ts, purgeStep); and the tag rows that deletes used to leave behind.
  (db) => {
    db.exec(`CREATE TABLE purges (
       id     INTEGER PRIMARY KEY,
       pubkey BLOB    NOT NULL,
       until  INTEGER,                -- events created up to this; NULL: all
       keep   INTEGER,                -- seq of an event that stays (the request to vanish)
       upto   INTEGER,                -- only events with a seq up to this
       wraps  INTEGER NOT NULL        -- also gift wraps p-tagged to the pubkey
     );`);
    dropOrphanTagRows(db);
  },
  // 6: tag values that are 64 lowercase hex (e and p tags: ids, pubkeys) as 32-byte blobs
  // (tagValue): 463 -> 300 bytes of tags table per event on the bench corpus. Copied in primary
  // key order, so SQLite streams it (bounded memory) and the new table's pages come out full.
  `CREATE TABLE tags_new (
     name       TEXT    NOT NULL,
     value      TEXT    NOT NULL,          -- or a BLOB (tagValue): TEXT affinity keeps blobs as they are
     created_at INTEGER NOT NULL,
     seq        INTEGER NOT NULL,
     kind       INTEGER NOT NULL,
     PRIMARY KEY (name, value, created_at, seq)
   ) WITHOUT ROWID;
   INSERT INTO tags_new (name, value, created_at, seq, kind)
     SELECT name, ${tagValueSql("value")}, created_at, seq, kind FROM tags ORDER BY name, value, created_at, seq;
   DROP TABLE tags;
   ALTER TABLE tags_new RENAME TO tags;`,
  // 7: the events' JSON without the sig, which a column holds as 64 bytes (storedJson): 138
  // bytes of text fewer per event, 65 more. In steps of seq (bounded memory).
  (db) => {
    db.exec("ALTER TABLE events ADD COLUMN sig BLOB");
    const last = (db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
    // Exactly … ,"sig":"<128 hex>"}: the last 138 characters, what comes before not ending with }.
    const step = db.prepare(
      `UPDATE events SET sig = unhex(substr(json, -130, 128)), json = substr(json, 1, length(json) - 138) || '}'
       WHERE seq > ?1 AND seq <= ?2 AND length(json) >= 138
         AND substr(json, -138, 8) = ',"sig":"' AND substr(json, -2) = '"}'
         AND length(substr(json, -130, 128)) = 128 AND substr(json, -130, 128) NOT GLOB '*[^0-9a-f]*'
         AND (length(json) = 138 OR substr(json, -139, 1) <> '}')`,
    );
    for (let s = 0; s < last; s += MIGRATION_ROWS) step.run(s, s + MIGRATION_ROWS);
  },
  // 8: the time indexes ascending in created_at, each tie order reversed to match (seq, once
  // implicit, now written out), walked backwards for the same order as before (query.ts). Events
  // come in about in created_at order: a descending index took each at the front of its range,
  // where every page split leaves two half-full pages; ascending, it lands at the end and pages
  // fill up. CREATE INDEX sorts in bounded memory (spilling to temporary files).
  `DROP INDEX events_created;
   DROP INDEX events_pubkey;
   DROP INDEX events_pubkey_kind;
   DROP INDEX events_kind;
   CREATE INDEX events_created ON events(created_at, id DESC);
   CREATE INDEX events_pubkey ON events(pubkey, created_at, seq DESC);
   CREATE INDEX events_pubkey_kind ON events(pubkey, kind, created_at, seq DESC);
   CREATE INDEX events_kind ON events(kind, created_at, seq DESC);`,
  // 9: the time index carries pubkey and kind, so a walk of it (a feed's newest events, a filter
  // with no better index) rejects candidates of other authors and kinds from the index entry,
  // without reading their rows (query.ts): +36 bytes per event (46 -> 82 on the bench corpus),
  // the feed's engine CPU -19% (bench/RESULTS.md).
  `DROP INDEX events_created;
   CREATE INDEX events_created ON events(created_at, id DESC, pubkey, kind);`,
  // 10: the events' JSON without the id, pubkey, created_at and kind too, which the row's
  // columns hold (storedJson): ~181 bytes of text fewer per event. A row of schema 7 is
  // head + tags and content + "}"; one whose head is not what its columns give is made whole again
  // (sig NULL). In steps of seq (bounded memory).
  (db) => {
    const last = (db.query("SELECT coalesce(max(seq), 0) AS s FROM events").get() as { s: number }).s;
    const head = headSql("events");
    const matches = `typeof(created_at) = 'integer' AND substr(json, 1, length(${head})) = ${head}`;
    const whole = db.prepare(
      `UPDATE events SET json = substr(json, 1, length(json) - 1) || ',"sig":"' || lower(hex(sig)) || '"}', sig = NULL
       WHERE seq > ?1 AND seq <= ?2 AND sig IS NOT NULL AND NOT (${matches})`,
    );
    const body = db.prepare(
      `UPDATE events SET json = '{' || substr(json, length(${head}) + 1)
       WHERE seq > ?1 AND seq <= ?2 AND sig IS NOT NULL`,
    );
    for (let s = 0; s < last; s += MIGRATION_ROWS) {
      whole.run(s, s + MIGRATION_ROWS);
      body.run(s, s + MIGRATION_ROWS);
    }
  },
  // 11: the time index's tie is the seq, as in the other time indexes, instead of the id: 32
  // bytes of id fewer per entry (the walk orders ties by id itself, query.ts).
  `DROP INDEX events_created;
   CREATE INDEX events_created ON events(created_at, seq DESC, pubkey, kind);`,
  // 12: a NIP-09 deletion of many events is a purge too (store/sqlite/write.ts): the events it
  // deletes are listed here by seq and id (a seq a later event reuses is not its target), and
  // the purge, \`listed\`, deletes only them, in steps between batches.
  `CREATE TABLE purge_targets (
     purge INTEGER NOT NULL,
     seq   INTEGER NOT NULL,
     id    BLOB    NOT NULL,
     PRIMARY KEY (purge, seq)
   ) WITHOUT ROWID;
   ALTER TABLE purges ADD COLUMN listed INTEGER NOT NULL DEFAULT 0;`,
  // 13: NIP-29: an event's h tags by its created_at and seq, so a read that hides the events of
  // groups a reader may not see (query.ts groupResidual) checks each candidate with one probe
  // of this index, without reading its row; only h rows (group events) are in it.
  `CREATE INDEX tags_h ON tags(created_at, seq, value) WHERE name = 'h';`,
  // 14: NIP-29: the groups the read rule gates (nips/nip29.ts GroupGate), kept by the writer in
  // the transaction of the 9002 or 9008 that gates (raisedGate) and corrected by the group state
  // (setGroupGates): a read's residual asks it for each h value instead of being sent the id of
  // every group its reader may not read (100,000 private groups: ~6.5 MB a job). Filled here from
  // the stored 9002s and 9008s as the writer would have raised it; the relay's start reconciles
  // it with the state it rebuilt before it serves a read (relay/groups.ts).
  (db) => {
    db.exec(`CREATE TABLE group_gates (
       value    TEXT    PRIMARY KEY,   -- the group id as its h rows hold it (tagValue)
       events   INTEGER NOT NULL,      -- 1: its events (h) for members only (private, or deleted)
       metadata INTEGER NOT NULL,      -- 1: the relay's 39000-39009 of it (d) for members only (hidden, or deleted)
       seq      INTEGER NOT NULL       -- the commit that set it last (raised, or corrected as of)
     ) WITHOUT ROWID;`);
    const rows = db.query(`SELECT e.seq, ${eventColsSql("e")} FROM events e WHERE e.kind IN (9002, 9008) ORDER BY e.seq`);
    for (const r of rows.values() as EventColumns[]) {
      const gate = raisedGate(JSON.parse(rowJson(r)) as NostrEvent);
      if (gate) raiseGate(db, gate.group, gate.events, gate.metadata, r[0]);
    }
  },
  // 15: issue 33, who may write and why (store/sqlite/admission.ts): admissions per basis,
  // Lightning invoices, balances, NIP-05 checks, NIP-43 invite codes.
  `CREATE TABLE admissions (pubkey TEXT NOT NULL, basis TEXT NOT NULL, since INTEGER NOT NULL, until INTEGER,
     evidence TEXT NOT NULL, PRIMARY KEY (pubkey, basis)) WITHOUT ROWID;
   CREATE TABLE invoices (payment_hash TEXT PRIMARY KEY, pubkey TEXT NOT NULL, purpose TEXT NOT NULL,
     amount_sats INTEGER NOT NULL, bolt11 TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
     expires_at INTEGER NOT NULL, paid_at INTEGER, checked_at INTEGER) WITHOUT ROWID;
   CREATE INDEX invoices_pubkey ON invoices (pubkey, created_at);
   CREATE INDEX invoices_unpaid ON invoices (checked_at) WHERE status = 'unpaid';
   CREATE TABLE balances (pubkey TEXT PRIMARY KEY, sats INTEGER NOT NULL) WITHOUT ROWID;
   CREATE TABLE nip05 (pubkey TEXT PRIMARY KEY, address TEXT NOT NULL, verified_at INTEGER, checked_at INTEGER NOT NULL,
     failures INTEGER NOT NULL, error TEXT NOT NULL) WITHOUT ROWID;
   CREATE INDEX nip05_due ON nip05 (checked_at);
   CREATE TABLE invites (code TEXT PRIMARY KEY, issuer TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
     used_by TEXT, used_at INTEGER) WITHOUT ROWID;
   CREATE INDEX invites_issuer ON invites (issuer);`,
  // 16: issue 34, what bans hide until their retention ends (admin/state.ts): every read leaves
  // out a hidden author's events and a hidden event (query.ts hiddenResidual: one probe of this
  // key per candidate, only while a row exists); the purge after it deletes them.
  `CREATE TABLE hidden (
     what    TEXT    NOT NULL,            -- 'pubkey': its author's events; 'event': one event
     key     BLOB    NOT NULL,            -- the pubkey or the event id
     since   INTEGER NOT NULL,            -- when the ban hid it (seconds)
     purging INTEGER NOT NULL DEFAULT 0,  -- 1: its purge has started
     PRIMARY KEY (what, key)
   ) WITHOUT ROWID;`,
];

/** The writer's raise of a gate (nips/nip29.ts raisedGate) by the event at seq ?4: a flag up stays up. */
export const RAISE_GATE_SQL = `INSERT INTO group_gates (value, events, metadata, seq) VALUES (?1, ?2, ?3, ?4)
  ON CONFLICT DO UPDATE SET events = max(events, excluded.events), metadata = max(metadata, excluded.metadata), seq = excluded.seq`;

function raiseGate(db: Database, group: string, events: boolean, metadata: boolean, seq: number): void {
  db.query(RAISE_GATE_SQL).run(tagValue(group), events ? 1 : 0, metadata ? 1 : 0, seq);
}

/**
 * Deletes tag rows whose event is gone or does not have that tag. Deletes once read tag values
 * back with json_each, which gives a lone surrogate (valid, escaped, in an event's JSON) as
 * itself while the row holds U+FFFD (how SQLite stores it from a JS string): such rows stayed
 * behind, and matched a later event that reused the seq. So only rows with a U+FFFD can be
 * orphans; each is checked against its event's tags as indexed (store/sqlite/write.ts). Returns how many.
 * Exported for tests: test/tag-rows.test.ts makes orphans and counts them gone.
 */
export function dropOrphanTagRows(db: Database): number {
  const suspects = db
    .query("SELECT name, value, created_at, seq FROM tags WHERE typeof(value) = 'text' AND instr(value, char(65533)) > 0")
    .all() as {
    name: string;
    value: string;
    created_at: number;
    seq: number;
  }[];
  const event = db.prepare("SELECT created_at, json FROM events WHERE seq = ?");
  const drop = db.prepare("DELETE FROM tags WHERE name = ? AND value = ? AND created_at = ? AND seq = ?");
  let dropped = 0;
  for (const r of suspects) {
    const e = event.get(r.seq) as { created_at: number; json: string } | null;
    const tags = e && e.created_at === r.created_at ? (JSON.parse(e.json) as { tags: string[][] }).tags : [];
    if (tags.some((t) => t[0] === r.name && t[1] !== undefined && t[1].toWellFormed() === r.value)) continue;
    drop.run(r.name, r.value, r.created_at, r.seq);
    dropped++;
  }
  return dropped;
}

export function openDatabase(opts: DbOptions): Database {
  if (opts.path !== ":memory:") mkdirSync(dirname(opts.path), { recursive: true });
  const db = new Database(opts.path, opts.readonly ? { readonly: true } : { create: true, readwrite: true, strict: true });
  db.exec("PRAGMA busy_timeout = 5000");
  if (!opts.readonly) {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(`PRAGMA synchronous = ${opts.synchronous === "full" ? "FULL" : "NORMAL"}`);
    // Fewer, larger checkpoints: the writer commits small batches many times a second.
    db.exec("PRAGMA wal_autocheckpoint = 10000");
    // After a checkpoint resets the WAL, shrink the file back rather than keep its peak size.
    db.exec("PRAGMA journal_size_limit = 67108864");
    migrate(db);
  }
  db.exec("PRAGMA mmap_size = 1073741824");
  // 32 MB. The writer thread keeps it too: at 300k stored events its indexes' pages no longer
  // fit in 8 MB, and 32 took 14% less CPU per event and gave 14% more events/s (three runs each,
  // bench/RESULTS.md, 2026-12-04); at 100k the two did alike.
  db.exec("PRAGMA cache_size = -32000");
  db.exec("PRAGMA temp_store = MEMORY");
  return db;
}

/** The file was written by a newer bunstr: its schema has steps this one does not know. */
export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`database schema version ${found} is newer than this bunstr (${known})`);
  }
}

function migrate(db: Database): void {
  // One write transaction from the start: a database whose write lock another process holds
  // (an open sqlite3 transaction, `bunstr compact`) fails here, after busy_timeout, rather than
  // at the relay's first write with clients connected.
  db.transaction(() => {
    const current = (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
    if (current > migrations.length) throw new SchemaTooNewError(current, migrations.length);
    for (let v = current; v < migrations.length; v++) {
      const m = migrations[v]!;
      if (typeof m === "string") db.exec(m);
      else m(db);
      db.exec(`PRAGMA user_version = ${v + 1}`);
    }
  }).immediate();
}

/**
 * Folds the WAL back into the main file (so a backup of the .sqlite alone is complete) and closes
 * the writer's connection; returns what went wrong, as warnings. This can fail (the main file may
 * need to grow on a full disk): nothing is lost, every committed event is in the -wal file, which
 * SQLite replays when the database is next opened.
 */
export function checkpointAndClose(db: Database): string[] {
  const warnings: string[] = [];
  const kept = "the -wal file is kept and replayed on the next start";
  try {
    const r = db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number } | null;
    if (r?.busy) warnings.push(`WAL checkpoint at shutdown was busy; ${kept}`);
  } catch (e) {
    warnings.push(`could not checkpoint the WAL at shutdown: ${whatFailed(e)}; ${kept}`);
  }
  try {
    db.close(true);
  } catch (e) {
    warnings.push(`closing the database: ${whatFailed(e)}; ${kept}`);
  }
  return warnings;
}

/** A SQLite error in a few words: "disk full" for SQLITE_FULL, else its message and code. */
function whatFailed(e: unknown): string {
  const code = String((e as { code?: unknown })?.code ?? "");
  if (code === "SQLITE_FULL") return "disk full";
  return `${e instanceof Error ? e.message : String(e)}${code ? ` (${code})` : ""}`;
}
