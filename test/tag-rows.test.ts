// Issue 13 item 7 over a real websocket: tag rows are deleted with their event, whatever the
// tag values hold. A lone UTF-16 surrogate is valid (escaped) in an event's JSON; SQLite stores
// the row's value as U+FFFD, and a delete that read the values back with json_each missed it:
// the row stayed, and matched the next event that reused the seq (a replaceable event's newer
// version, when the old one was the last stored). Here every test ends by comparing the tags
// table with what the stored events index (no orphan rows).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { dropOrphanTagRows, eventJsonSql, openDatabase, tagValueText } from "../src/store/sqlite/db.ts";
import { PostgresStore } from "../src/store/postgres/store.ts";
import { runQuery, StatementCache } from "../src/store/sqlite/query.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { serializeEvent } from "../src/protocol/event.ts";
import type { SqliteStore } from "../src/store/sqlite/store.ts";
import { accepted, Client, failOnRelayErrors, now, signer, startTestRelay, type TestRelay } from "./helpers.ts";
import { onPostgres } from "./postgres-env.ts";

failOnRelayErrors();

let relay: TestRelay;
let c: Client;
beforeAll(async () => {
  relay = await startTestRelay();
  c = await Client.connect(relay.url);
});
afterAll(async () => {
  c?.close();
  await relay?.stop();
});

let n = 0;
const ids = async (...filters: object[]) => (await c.req(`q${n++}`, ...filters)).events.map((e) => e.id);

/** Tag rows that no stored event indexes, and indexed tags without their row. */
async function tagRowMismatch(r: TestRelay): Promise<{ orphans: number; missing: number }> {
  const key = (name: string, value: string, createdAt: number, seq: number) => JSON.stringify([name, value, createdAt, seq]);
  let rows: { name: string; value: string; created_at: number; seq: number }[];
  let events: { seq: number; created_at: number; json: string }[];
  const store = r.ctx.store;
  if (store instanceof PostgresStore) {
    rows = [...(await store.sql`SELECT name, value, created_at::float8 AS created_at, seq::float8 AS seq FROM tags`)];
    events = [...(await store.sql`SELECT seq::float8 AS seq, created_at::float8 AS created_at, json FROM events`)];
  } else {
    const db = (store as SqliteStore).db;
    rows = db.query(`SELECT name, ${tagValueText("value")} AS value, created_at, seq FROM tags`).all() as typeof rows;
    events = db.query("SELECT seq, created_at, json FROM events").all() as typeof events;
  }
  const expected = new Set<string>();
  for (const e of events)
    for (const t of (JSON.parse(e.json) as NostrEvent).tags)
      if (t[1] !== undefined && /^[a-zA-Z]$/.test(t[0]!) && (!onPostgres || t[1].isWellFormed()))
        expected.add(key(t[0]!, t[1].toWellFormed(), e.created_at, e.seq));
  const actual = new Set(rows.map((x) => key(x.name, x.value, x.created_at, x.seq)));
  return { orphans: [...actual].filter((k) => !expected.has(k)).length, missing: [...expected].filter((k) => !actual.has(k)).length };
}

describe("tag rows go with their event", () => {
  test('a replaced 10002 with ["t","spoof\\ud800"] is not served to {"#t":["spoof\\ud800"]}, and leaves no tag row', async () => {
    const v = signer();
    const t = now();
    const old = v.sign({
      kind: 10002,
      tags: [
        ["t", "spoof\ud800"],
        ["r", "wss://a.example.com"],
      ],
      created_at: t - 10,
    });
    expect(old.tags[0]![1]).toBe("spoof\ud800"); // a lone surrogate, as the wire's "\ud800" parses
    await accepted(c, old);
    // Postgres does not index a value its text cannot hold (store/postgres/text.ts).
    expect(await ids({ "#t": ["spoof\ud800"] })).toEqual(onPostgres ? [] : [old.id]);
    const fresh = v.sign({ kind: 10002, tags: [["r", "wss://b.example.com"]], created_at: t });
    await accepted(c, fresh);
    expect(await ids({ authors: [v.pubkey], kinds: [10002] })).toEqual([fresh.id]);
    expect(await ids({ "#t": ["spoof\ud800"] })).toEqual([]);
    expect(await tagRowMismatch(relay)).toEqual({ orphans: 0, missing: 0 });
  });

  test("lone surrogates and U+FFFD runs in every deletion path: replacement chains, NIP-09, NIP-62", async () => {
    const values = ["\ud800", "a\udc00b", "\udfff\ud800", "x\ud83d", "\uFFFD\uFFFD", "ok"];
    const v = signer();
    const t = now() - 100;
    // A replacement chain: each version replaces the one before, and was the last one stored.
    for (let i = 0; i < values.length; i++) {
      const e = v.sign({
        kind: 30000,
        tags: [
          ["d", "list"],
          ["t", values[i]!],
          ["p", "ab".repeat(32)],
          ["x", values[(i + 1) % values.length]!],
        ],
        created_at: t + i,
      });
      await accepted(c, e);
    }
    expect(await tagRowMismatch(relay)).toEqual({ orphans: 0, missing: 0 });
    // NIP-09 by id and by address.
    const w = signer();
    const notes = values.map((x, i) => w.sign({ kind: 1, tags: [["t", x]], created_at: t + i }));
    for (const e of notes) await accepted(c, e);
    await accepted(c, w.sign({ kind: 5, tags: notes.slice(0, 3).map((e) => ["e", e.id]), created_at: t + 50 }));
    const addr = w.sign({
      kind: 30001,
      tags: [
        ["d", "\ud800"],
        ["t", "\udc00"],
      ],
      created_at: t,
    });
    await accepted(c, addr);
    await accepted(c, w.sign({ kind: 5, tags: [["a", `30001:${w.pubkey}:\ud800`]], created_at: t + 51 }));
    expect(await tagRowMismatch(relay)).toEqual({ orphans: 0, missing: 0 });
    // NIP-62.
    await accepted(
      c,
      w.sign({
        kind: 62,
        tags: [
          ["relay", "ALL_RELAYS"],
          ["t", "\ud800"],
        ],
        created_at: t + 60,
      }),
    );
    expect(await ids({ authors: [w.pubkey], kinds: [1, 30001] })).toEqual([]);
    expect(await tagRowMismatch(relay)).toEqual({ orphans: 0, missing: 0 });
  });
});

if (!onPostgres)
  describe("schema 5 drops the orphan rows already on disk", () => {
    test("orphans left by the old delete are gone after opening, and every real row stays", () => {
      const dir = mkdtempSync(join(tmpdir(), "bunstr-orphans-"));
      try {
        const path = join(dir, "db.sqlite");
        const db = openDatabase({ path, synchronous: "normal" });
        // What the old writer left: a row of a deleted event (seq 7 now another event), beside
        // real rows holding U+FFFD (a lone surrogate stored, and a real U+FFFD).
        const ev = (seq: number, createdAt: number, tags: string[][]) =>
          db
            .query("INSERT INTO events (seq, id, pubkey, created_at, kind, json) VALUES (?, randomblob(32), randomblob(32), ?, 1, ?)")
            .run(seq, createdAt, JSON.stringify({ tags }));
        const tag = db.prepare("INSERT INTO tags (name, value, created_at, seq, kind) VALUES (?, ?, ?, ?, 1)");
        ev(7, 200, [["r", "x"]]);
        tag.run("r", "x", 200, 7);
        tag.run("t", "spoof\ud800", 100, 7); // the old event at seq 7, created at 100
        tag.run("t", "gone\uFFFD", 150, 9); // no event 9 at all
        ev(8, 300, [
          ["t", "a\ud800"],
          ["t", "b\uFFFD"],
        ]);
        tag.run("t", "a\ud800", 300, 8);
        tag.run("t", "b\uFFFD", 300, 8);
        tag.run("u", "c\uFFFD", 300, 8); // event 8 has no such tag
        expect(dropOrphanTagRows(db)).toBe(3);
        const left = db.query("SELECT name, value, seq FROM tags ORDER BY seq, name, value").all();
        expect(left).toEqual([
          { name: "r", value: "x", seq: 7 },
          { name: "t", value: "a\uFFFD", seq: 8 },
          { name: "t", value: "b\uFFFD", seq: 8 },
        ]);
        db.close();
        // And the migration runs it: a database at schema 4 with an orphan.
        const old = new Database(path);
        old.exec(
          "DROP TABLE purges; DROP TABLE purge_targets; ALTER TABLE events DROP COLUMN sig; DROP TABLE group_gates; DROP TABLE admissions; DROP TABLE invoices; DROP TABLE balances; DROP TABLE nip05; DROP TABLE invites; DROP TABLE hidden; PRAGMA user_version = 4",
        );
        old.query("INSERT INTO tags (name, value, created_at, seq, kind) VALUES ('t', 'spoof\uFFFD', 100, 7, 1)").run();
        old.close();
        const again = openDatabase({ path, synchronous: "normal" });
        expect((again.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(16);
        expect(again.query("SELECT count(*) AS n FROM tags").get()).toEqual({ n: 3 });
        again.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

if (!onPostgres)
  describe("schema 6 holds hex tag values as 32-byte blobs", () => {
    test("a database of schema 5 (hex as text) migrates; every filter finds what it found, deletes leave no row", () => {
      const dir = mkdtempSync(join(tmpdir(), "bunstr-tagblobs-"));
      try {
        const path = join(dir, "db.sqlite");
        const rules = { deletion: true, vanish: false, search: false, searchSkipKinds: new Set<number>() };
        const a = signer();
        const b = signer();
        const t = now();
        const root = a.sign({ kind: 1, content: "root", created_at: t - 5 });
        const upper = "AB".repeat(32); // 64 hex digits, not lowercase: stays text
        const reply = b.sign({
          kind: 1,
          content: "reply",
          created_at: t - 4,
          tags: [
            ["e", root.id],
            ["p", a.pubkey],
            ["t", "nostr"],
            ["x", upper],
            ["k", "1"],
          ],
        });
        const other = b.sign({
          kind: 1,
          content: "other",
          created_at: t - 3,
          tags: [
            ["p", b.pubkey],
            ["x", "ab".repeat(32)],
          ],
        });
        const filters: object[] = [
          { "#e": [root.id] },
          { "#p": [a.pubkey] },
          { "#p": [a.pubkey, b.pubkey] },
          { "#p": [...Array.from({ length: 9 }, (_, i) => String(i).repeat(64)), b.pubkey] }, // ten walks
          { "#t": ["nostr"], "#p": [b.pubkey, a.pubkey] }, // a residual IN (?, ?)
          { "#t": ["nostr"], "#p": [...Array.from({ length: 9 }, (_, i) => String(i).repeat(64)), a.pubkey] },
          { "#t": ["nostr"] },
          { "#x": [upper] },
          { "#x": ["ab".repeat(32)] },
          { "#k": ["1"] },
          { "#p": [a.pubkey], "#t": ["nostr"], "#e": [root.id] }, // tag residuals
        ];
        const run = (db: Database) => {
          const cache = new StatementCache(db);
          const maxSeq = (db.query("SELECT max(seq) AS s FROM events").get() as { s: number }).s;
          return filters.map((f) => runQuery(cache, { filters: [f as never], limits: [100], maxSeq, now: 0 }).map((j) => JSON.parse(j).id));
        };
        const db = openDatabase({ path, synchronous: "normal" });
        new SqliteWriter(db).writeBatch(
          [root, reply, other].map((event) => ({ event, json: serializeEvent(event) })),
          rules,
        );
        const expected = [
          [reply.id],
          [reply.id],
          [other.id, reply.id],
          [other.id],
          [reply.id],
          [reply.id],
          [reply.id],
          [reply.id],
          [other.id],
          [reply.id],
          [reply.id],
        ];
        expect(run(db)).toEqual(expected);
        expect(db.query("SELECT count(*) AS n FROM tags WHERE typeof(value) = 'blob'").get()).toEqual({ n: 4 });
        // Back to schema 5: the same rows, hex as text.
        db.exec(
          `UPDATE tags SET value = lower(hex(value)) WHERE typeof(value) = 'blob'; UPDATE events SET json = ${eventJsonSql("events")}, sig = NULL; ALTER TABLE events DROP COLUMN sig; DROP TABLE purge_targets; ALTER TABLE purges DROP COLUMN listed; DROP TABLE group_gates; DROP TABLE admissions; DROP TABLE invoices; DROP TABLE balances; DROP TABLE nip05; DROP TABLE invites; DROP TABLE hidden; PRAGMA user_version = 5`,
        );
        db.close();
        const again = openDatabase({ path, synchronous: "normal" });
        expect((again.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(16);
        expect(again.query("SELECT typeof(value) AS t, count(*) AS n FROM tags GROUP BY 1 ORDER BY 1").all()).toEqual([
          { t: "blob", n: 4 },
          { t: "text", n: 3 },
        ]);
        expect(run(again)).toEqual(expected);
        // A deletion of the reply removes its rows, blobs and text alike.
        const del = b.sign({ kind: 5, content: "", created_at: t - 2, tags: [["e", reply.id]] });
        new SqliteWriter(again).writeBatch([{ event: del, json: serializeEvent(del) }], rules);
        const left = again.query("SELECT name, seq FROM tags WHERE seq = 2").all();
        expect(left).toEqual([]);
        again.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
