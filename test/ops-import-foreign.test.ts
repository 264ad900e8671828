// Moving from another relay: `bunstr import --from nostr-rs-relay nostr.db` reads its SQLite
// database directly (a file built here with its schema), and serve warns when the data directory
// holds another relay's database.
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now, signer } from "./helpers.ts";
import { bunstr } from "./ops-helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-import-foreign-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MAIN = [process.execPath, join(import.meta.dir, "..", "src", "main.ts")];

const a = signer();
const b = signer();
const t = now();
const note = a.sign({ kind: 1, content: "from nostr-rs-relay", tags: [["t", "moved"]], created_at: t - 50 });
const hiddenNote = a.sign({ kind: 1, content: "deleted there", created_at: t - 40 });
const deletion = a.sign({ kind: 5, tags: [["e", hiddenNote.id]], created_at: t - 30 });
const profile = b.sign({ kind: 0, content: JSON.stringify({ name: "bob" }), created_at: t - 20 });
const oldNote = b.sign({ kind: 1, content: "row written before hidden was set", created_at: t - 10 });

/** A nostr-rs-relay database at schema version 18 (its src/repo/sqlite_migration.rs), with these rows. */
function nostrRsRelayDb(path: string, rows: { e: NostrEvent; hidden: number | null }[]): string {
  const db = new Database(path, { create: true });
  db.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA application_id = 1654008667;
    PRAGMA user_version = 18;
    CREATE TABLE event (id INTEGER PRIMARY KEY, event_hash BLOB NOT NULL, first_seen INTEGER NOT NULL,
      created_at INTEGER NOT NULL, expires_at INTEGER, author BLOB NOT NULL, delegated_by BLOB,
      kind INTEGER NOT NULL, hidden INTEGER, content TEXT NOT NULL);
    CREATE UNIQUE INDEX event_hash_index ON event(event_hash);
    CREATE TABLE tag (id INTEGER PRIMARY KEY, event_id INTEGER NOT NULL, name TEXT, value TEXT,
      created_at INTEGER NOT NULL, kind INTEGER NOT NULL);
  `);
  const ins = db.query(
    "INSERT INTO event (event_hash, first_seen, created_at, author, kind, hidden, content) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  for (const { e, hidden } of rows)
    ins.run(Buffer.from(e.id, "hex"), t, e.created_at, Buffer.from(e.pubkey, "hex"), e.kind, hidden, JSON.stringify(e));
  db.close();
  return path;
}

test("import --from nostr-rs-relay: every shown event through admission, hidden rows skipped and counted, served by a relay on the data dir", async () => {
  const src = nostrRsRelayDb(join(dir, "nostr.db"), [
    { e: note, hidden: 0 },
    { e: hiddenNote, hidden: 1 },
    { e: deletion, hidden: 0 },
    { e: profile, hidden: 0 },
    { e: oldNote, hidden: null },
  ]);
  const before = readFileSync(src);
  const data = join(dir, "moved");
  const r = await bunstr(["import", "--json", "--from", "nostr-rs-relay", src, "--data-dir", data]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  const s = JSON.parse(r.stdout);
  expect(s).toMatchObject({ from: "nostr-rs-relay", schemaVersion: 18, hidden: 1, lines: 4, accepted: 4, verified: true });
  // Opened read-only: the other relay's file is as it was.
  expect(readFileSync(src).equals(before)).toBe(true);

  const text = await bunstr(["import", "--from", "nostr-rs-relay", src, "--data-dir", data]);
  expect(text.code).toBe(0);
  expect(text.stdout).toContain(
    `read 4 events from nostr-rs-relay's ${src} (schema v18); skipped 1 it marked hidden (deleted, or replaced by a newer version)`,
  );
  expect(text.stdout).toContain("duplicate 4");

  const relay = await spawnRelay(MAIN, ["--data-dir", data], dir);
  try {
    const c = await Client.connect(relay.url);
    const all = await c.req("all", { authors: [a.pubkey, b.pubkey] });
    expect(new Set(all.events.map((e) => e.id))).toEqual(new Set([note.id, deletion.id, profile.id, oldNote.id]));
    const tagged = await c.req("t", { "#t": ["moved"] });
    expect(tagged.events.map((e) => e.id)).toEqual([note.id]);
    // The deletion came along as a tombstone: the event deleted there cannot be published here.
    const ok = await c.publish(hiddenNote);
    expect(ok[2]).toBe(false);
    c.close();
  } finally {
    relay.proc.kill("SIGTERM");
    await relay.proc.exited;
  }
});

test("import --from: a bad signature is counted invalid; a file that is no nostr-rs-relay database, or an unknown relay, is an error", async () => {
  const forged = { ...note, content: "changed there" };
  const src = nostrRsRelayDb(join(dir, "forged.db"), [{ e: forged, hidden: 0 }]);
  const r = await bunstr(["import", "--json", "--from", "nostr-rs-relay", src, "--data-dir", join(dir, "forged")]);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout)).toMatchObject({ lines: 1, accepted: 0, badId: 1 });

  const other = join(dir, "other.sqlite");
  new Database(other, { create: true }).exec("CREATE TABLE events (id TEXT)");
  const bad = await bunstr(["import", "--from", "nostr-rs-relay", other, "--data-dir", join(dir, "x")]);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain(`error: cannot read the nostr-rs-relay database: ${other} is not a nostr-rs-relay database`);

  const unknown = await bunstr(["import", "--from", "strfry", src]);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('import --from reads nostr-rs-relay; "strfry" is not one of them');
  expect(unknown.stderr).toContain("strfry export > events.jsonl, then bunstr import events.jsonl");
});

test("serve warns when the data directory holds nostr-rs-relay's nostr.db or strfry's data.mdb, with the command to import it", async () => {
  const data = join(dir, "old-relay-dir");
  mkdirSync(data, { recursive: true });
  copyFileSync(join(dir, "nostr.db"), join(data, "nostr.db"));
  writeFileSync(join(data, "data.mdb"), "");
  const relay = await spawnRelay(MAIN, ["--data-dir", data], dir);
  try {
    const out = relay.output();
    const db = join(data, "bunstr.sqlite");
    expect(out).toContain(
      `warning: ${join(data, "nostr.db")} is a nostr-rs-relay database; bunstr does not serve it (it serves ${db}). ` +
        `To bring its events over: bunstr import --from nostr-rs-relay ${join(data, "nostr.db")} --db ${db}`,
    );
    expect(out).toContain(
      `warning: ${join(data, "data.mdb")} looks like a strfry (LMDB) database; bunstr cannot read it (it serves ${db}). ` +
        `To bring its events over: strfry export > events.jsonl, then bunstr import events.jsonl --db ${db}`,
    );
  } finally {
    relay.proc.kill("SIGTERM");
    await relay.proc.exited;
  }
});
