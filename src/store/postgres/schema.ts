// The Postgres schema and its versioned migrations, run at start under an advisory lock so that
// nodes starting together migrate once. The same semantics as SQLite's (store/sqlite/db.ts), enforced
// by the database where several nodes write at once: one row per replaceable key and per
// address (partial unique indexes), a single-row sequence whose row lock orders every write
// batch of every node (commit order = seq order, no gaps by rollback).
import type { SQL } from "bun";

const migrations: string[] = [
  `CREATE TABLE relay_seq (one boolean PRIMARY KEY DEFAULT true CHECK (one), value bigint NOT NULL);
   INSERT INTO relay_seq VALUES (true, 0);
   CREATE TABLE events (
     seq        bigint  PRIMARY KEY,
     id         bytea   NOT NULL UNIQUE,
     pubkey     bytea   NOT NULL,
     created_at bigint  NOT NULL,
     kind       integer NOT NULL,
     d          text,
     expiration bigint,
     json       text    NOT NULL,
     fts        tsvector
   );
   CREATE INDEX events_created ON events (created_at DESC, id);
   CREATE INDEX events_pubkey ON events (pubkey, created_at DESC);
   CREATE INDEX events_pubkey_kind ON events (pubkey, kind, created_at DESC);
   CREATE INDEX events_kind ON events (kind, created_at DESC);
   CREATE INDEX events_expiration ON events (expiration) WHERE expiration IS NOT NULL;
   CREATE INDEX events_fts ON events USING gin (fts) WHERE fts IS NOT NULL;
   CREATE UNIQUE INDEX events_replaceable ON events (pubkey, kind) WHERE kind IN (0, 3) OR (kind >= 10000 AND kind < 20000);
   CREATE UNIQUE INDEX events_address ON events (pubkey, kind, d) WHERE kind >= 30000 AND kind < 40000;
   -- One row per single-letter tag (first value), with created_at and kind for ordered tag scans.
   CREATE TABLE tags (
     name       text    NOT NULL,
     value      text    NOT NULL,
     created_at bigint  NOT NULL,
     seq        bigint  NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
     kind       integer NOT NULL,
     PRIMARY KEY (name, value, created_at, seq)
   );
   CREATE INDEX tags_seq ON tags (seq);
   CREATE TABLE deleted_ids (id bytea NOT NULL, pubkey bytea NOT NULL, PRIMARY KEY (id, pubkey));
   CREATE TABLE deleted_addresses (pubkey bytea NOT NULL, kind integer NOT NULL, d text NOT NULL, until bigint NOT NULL, PRIMARY KEY (pubkey, kind, d));
   CREATE TABLE vanished (pubkey bytea PRIMARY KEY, until bigint NOT NULL);
   CREATE TABLE admin_entries (list text NOT NULL, key text NOT NULL, value text NOT NULL, at bigint NOT NULL, PRIMARY KEY (list, key));
   CREATE TABLE admin_tokens (id text PRIMARY KEY, expires bigint NOT NULL);
   CREATE TABLE admin_log (seq bigserial PRIMARY KEY, at bigint NOT NULL, pubkey text NOT NULL, method text NOT NULL, params text NOT NULL, result text NOT NULL);`,
  // 2: the database's identity, which names its channels on the bus: two relays (or test
  // databases) sharing one Redis never read each other's batches.
  `CREATE TABLE relay_identity (one boolean PRIMARY KEY DEFAULT true CHECK (one), id text NOT NULL);
   INSERT INTO relay_identity (id) VALUES (md5(random()::text || clock_timestamp()::text));`,
  // 3: a counter of admin changes: nodes that missed the bus message (or run without a bus)
  // see it move when they poll, and reload their admin state.
  `CREATE TABLE admin_version (one boolean PRIMARY KEY DEFAULT true CHECK (one), value bigint NOT NULL);
   INSERT INTO admin_version (value) VALUES (0);`,
  // 4: deletions too big for one write batch (requests to vanish), carried out in steps outside
  // the sequence lock (postgres/write.ts purgeStep), as SQLite's (store/sqlite/db.ts, schema 5).
  `CREATE TABLE purges (
     id     bigserial PRIMARY KEY,
     pubkey bytea     NOT NULL,
     until  bigint,                   -- events created up to this; NULL: all
     keep   bigint,                   -- seq of an event that stays (the request to vanish)
     upto   bigint,                   -- only events with a seq up to this
     wraps  boolean   NOT NULL        -- also gift wraps p-tagged to the pubkey
   );`,
  // 5: a NIP-09 deletion of many events is a purge too (postgres/write.ts), of the events listed
  // here by seq and id, as SQLite's (store/sqlite/db.ts, schema 12).
  `CREATE TABLE purge_targets (
     purge bigint NOT NULL,
     seq   bigint NOT NULL,
     id    bytea  NOT NULL,
     PRIMARY KEY (purge, seq)
   );
   ALTER TABLE purges ADD COLUMN listed boolean NOT NULL DEFAULT false;`,
  // 6: NIP-29. The relay's own key (NIP-11 self, group metadata signatures), one row every node
  // reads (cli/relay-key.ts): the first node to start stores one, the others take it.
  // And an event's h tags by its seq, for the reads that hide the events of groups a reader may
  // not see (query.ts groupResidual): an index-only probe per candidate, of group events only.
  `CREATE TABLE relay_key (id smallint PRIMARY KEY CHECK (id = 1), secret text NOT NULL);
   CREATE INDEX tags_h ON tags (seq, value) WHERE name = 'h';`,
  // 7: NIP-29: the groups the read rule gates, as SQLite's (store/sqlite/db.ts, schema 14): kept
  // by the writer in the transaction of the 9002 or 9008 that gates (nips/nip29.ts raisedGate),
  // corrected by the group state (setGroupGates), reconciled with it at each node's start. A
  // read's residual asks it for each h value instead of being sent the id of every group its
  // reader may not read. Filled at the first start after this (relay/groups.ts), before a read
  // is served.
  `CREATE TABLE group_gates (
     value    text    PRIMARY KEY,   -- the group id (its h rows' value, its 39xxx's d)
     events   boolean NOT NULL,      -- its events (h) for members only (private, or deleted)
     metadata boolean NOT NULL,      -- the relay's 39000-39009 of it (d) for members only (hidden, or deleted)
     seq      bigint  NOT NULL       -- the commit that set it last (raised, or corrected as of)
   );`,
  // 8: issue 33, who may write and why (postgres/admission.ts), as SQLite's (store/sqlite/db.ts, schema 15).
  `CREATE TABLE admissions (pubkey text NOT NULL, basis text NOT NULL, since bigint NOT NULL, until bigint,
     evidence text NOT NULL, PRIMARY KEY (pubkey, basis));
   CREATE TABLE invoices (payment_hash text PRIMARY KEY, pubkey text NOT NULL, purpose text NOT NULL,
     amount_sats bigint NOT NULL, bolt11 text NOT NULL, status text NOT NULL, created_at bigint NOT NULL,
     expires_at bigint NOT NULL, paid_at bigint, checked_at bigint);
   CREATE INDEX invoices_pubkey ON invoices (pubkey, created_at);
   CREATE INDEX invoices_unpaid ON invoices (checked_at) WHERE status = 'unpaid';
   CREATE TABLE balances (pubkey text PRIMARY KEY, sats bigint NOT NULL);
   CREATE TABLE nip05 (pubkey text PRIMARY KEY, address text NOT NULL, verified_at bigint, checked_at bigint NOT NULL,
     failures bigint NOT NULL, error text NOT NULL);
   CREATE INDEX nip05_due ON nip05 (checked_at);
   CREATE TABLE invites (code text PRIMARY KEY, issuer text NOT NULL, created_at bigint NOT NULL, expires_at bigint NOT NULL,
     used_by text, used_at bigint);
   CREATE INDEX invites_issuer ON invites (issuer);`,
  // 9: issue 33 (issue 33 review, M7), which pubkeys' admissions changed, in order: nodes read those rows
  // again rather than the whole table (postgres/store.ts admissionsSince); pruned after an hour.
  `CREATE TABLE admission_changes (seq bigserial PRIMARY KEY, pubkey text NOT NULL, at bigint NOT NULL);
   CREATE INDEX admission_changes_at ON admission_changes (at);`,
  // 10: issue 34, what bans hide until their retention ends, as SQLite's (store/sqlite/db.ts,
  // schema 16): every read leaves out what a row names (query.ts hiddenResidual).
  `CREATE TABLE hidden (what text NOT NULL, key bytea NOT NULL, since bigint NOT NULL, purging boolean NOT NULL DEFAULT false,
     PRIMARY KEY (what, key));`,
];

/** Any fixed number: the advisory lock that serializes migrations of nodes starting together. */
const MIGRATION_LOCK = 0x6275_6e73;

export async function migrate(sql: SQL): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS bunstr_schema (version integer NOT NULL)`;
    const rows = await tx`SELECT version FROM bunstr_schema`;
    let current = rows.length > 0 ? Number(rows[0].version) : 0;
    if (rows.length === 0) await tx`INSERT INTO bunstr_schema VALUES (0)`;
    if (current > migrations.length) throw new Error(`database schema version ${current} is newer than this bunstr (${migrations.length})`);
    for (; current < migrations.length; current++) {
      await tx.unsafe(migrations[current]!);
      await tx`UPDATE bunstr_schema SET version = ${current + 1}`;
    }
  });
}
