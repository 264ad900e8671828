// Schemas 7 and 10: the events table holds an event's JSON without its sig (a column holds it as
// 64 bytes) and without its id, pubkey, created_at and kind (the row's columns), and every read
// puts back the bytes that were accepted: the wire text must round-trip, so a client can check
// the signature of what it is served.
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { eventBytesSql, eventJsonSql, openDatabase, storedJson } from "../src/store/sqlite/db.ts";
import { exportPager } from "../src/store/sqlite/maintenance.ts";
import { runQuery, StatementCache } from "../src/store/sqlite/query.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { now, signer } from "./helpers.ts";

const RULES = { deletion: true, vanish: false, search: false, searchSkipKinds: new Set<number>() };

/** Events whose JSON holds what tends to break a text splice: escapes, control characters, non-ASCII, a lone surrogate, braces. */
function oddEvents(): NostrEvent[] {
  const a = signer();
  const t = now();
  const contents = [
    "",
    "plain",
    'quote " and \\ backslash',
    "tab\there\nnewline\u0001ctl",
    "ü日本語🙂",
    "lone \ud800 surrogate",
    '{"id":"x"}',
    '","sig":"',
  ];
  return contents.map((content, i) =>
    a.sign({
      kind: 1,
      content,
      created_at: t - i,
      tags:
        i % 2
          ? [
              ["t", content],
              ["p", a.pubkey],
            ]
          : [],
    }),
  );
}

test("every read path serves the accepted JSON byte for byte, and its byte count", () => {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-stored-json-"));
  try {
    const db = openDatabase({ path: join(dir, "db.sqlite"), synchronous: "normal" });
    const events = oddEvents();
    const jsons = events.map((e) => serializeEvent(e));
    // Two events whose JSON is not the serializeEvent form (an older bunstr's, say): kept whole.
    // The first has the sig elsewhere, the second its pubkey before its id.
    const [odd, odd2, odd3] = [events[0]!, events[1]!, events[2]!];
    const oddJson = `{"id":"${odd.id}","pubkey":"${odd.pubkey}","created_at":${odd.created_at},"kind":1,"tags":[],"sig":"${odd.sig}","content":""}`;
    const odd2Json = `{"pubkey":"${odd2.pubkey}","id":"${odd2.id}","created_at":${odd2.created_at},"kind":1,"tags":[],"content":"","sig":"${odd2.sig}"}`;
    expect(storedJson(odd, oddJson).sig).toBeNull();
    expect(storedJson(odd2, odd2Json).sig).toBeNull();
    // Head and tail as serializeEvent writes them, a member more and a "}" before the sig:
    // shortened, and put back as it was.
    const odd3Json = `{"id":"${odd3.id}","pubkey":"${odd3.pubkey}","created_at":${odd3.created_at},"kind":1,"tags":[],"content":"","x":{},"sig":"${odd3.sig}"}`;
    expect(storedJson(odd3, odd3Json).json).toBe('{"tags":[],"content":"","x":{}}');
    const want = [oddJson, odd2Json, odd3Json, ...jsons.slice(3)];
    new SqliteWriter(db).writeBatch(
      events.map((event, i) => ({ event, json: want[i]! })),
      RULES,
    );
    // Stored without the sig, id and pubkey (all but the odd ones), and still a JSON object.
    const rows = db.query("SELECT json, sig FROM events ORDER BY seq").all() as { json: string; sig: Uint8Array | null }[];
    expect(rows.map((r) => r.sig === null)).toEqual(want.map((_, i) => i < 2));
    for (const [i, r] of rows.entries()) {
      const e = events[i]!;
      if (i >= 2) for (const x of [e.sig, e.id, '"pubkey"', '"created_at"', '"kind"']) expect(r.json).not.toContain(x);
      if (i >= 2) expect(r.json.startsWith('{"tags":')).toBe(true);
      const parsed = JSON.parse(r.json) as NostrEvent;
      expect(parsed.content).toBe(i < 3 ? "" : e.content);
      expect(parsed.tags).toEqual(i < 3 ? [] : e.tags);
    }
    // SQL read, byte counts, REQ, export.
    const back = db.query(`SELECT ${eventJsonSql("e")} AS j, ${eventBytesSql("e")} AS b FROM events e ORDER BY seq`).all() as {
      j: string;
      b: number;
    }[];
    expect(back.map((r) => r.j)).toEqual(want.map((j) => j.toWellFormed()));
    // Exact but for the rows kept whole, which it counts a head and a sig over.
    const over = (e: NostrEvent) => 307 + String(e.created_at).length + String(e.kind).length;
    expect(back.map((r) => r.b)).toEqual(want.map((j, i) => Buffer.byteLength(j.toWellFormed()) + (i < 2 ? over(events[i]!) : 0)));
    const maxSeq = events.length;
    const served = runQuery(new StatementCache(db), { filters: [{}], limits: [100], maxSeq, now: 0 });
    expect(new Set(served)).toEqual(new Set(want.map((j) => j.toWellFormed())));
    expect(exportPager(db, { now: 0 })(0, maxSeq, 100).map((r) => r.json)).toEqual(want.map((j) => j.toWellFormed()));
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a database of schema 6 (whole JSON) migrates to schemas 7 and 10 in steps, and reads the same", () => {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-stored-json-"));
  try {
    const path = join(dir, "db.sqlite");
    const db = openDatabase({ path, synchronous: "normal" });
    const events = oddEvents();
    new SqliteWriter(db).writeBatch(
      events.map((event) => ({ event, json: serializeEvent(event) })),
      RULES,
    );
    const before = db.query(`SELECT seq, ${eventJsonSql("e")} AS j FROM events e ORDER BY seq`).all();
    // Back to schema 6: whole JSON, no sig column; plus a row of another shape, and a gap in seq.
    db.exec(
      `UPDATE events SET json = ${eventJsonSql("events")}, sig = NULL; ALTER TABLE events DROP COLUMN sig; DROP TABLE purge_targets; ALTER TABLE purges DROP COLUMN listed; DROP INDEX tags_h; DROP TABLE group_gates; DROP TABLE admissions; DROP TABLE invoices; DROP TABLE balances; DROP TABLE nip05; DROP TABLE invites; DROP TABLE hidden; PRAGMA user_version = 6`,
    );
    db.query("INSERT INTO events (seq, id, pubkey, created_at, kind, json) VALUES (25000, randomblob(32), randomblob(32), 1, 1, ?)").run(
      '{"kind":1}',
    );
    // A sig last, but after a "}": kept whole.
    const braced = db
      .query(
        "INSERT INTO events (seq, id, pubkey, created_at, kind, json) VALUES (25001, randomblob(32), randomblob(32), 1, 1, '') RETURNING lower(hex(id)) AS id, lower(hex(pubkey)) AS pubkey",
      )
      .get() as { id: string; pubkey: string };
    const bracedJson = `{"id":"${braced.id}","pubkey":"${braced.pubkey}","kind":1,"x":{},"sig":"${"ab".repeat(64)}"}`;
    db.query("UPDATE events SET json = ? WHERE seq = 25001").run(bracedJson);
    // The sig last, the pubkey before the id: schema 7 takes its sig, schema 10 makes it whole again.
    const swapped = db
      .query(
        "INSERT INTO events (seq, id, pubkey, created_at, kind, json) VALUES (25002, randomblob(32), randomblob(32), 7, 1, '') RETURNING lower(hex(id)) AS id, lower(hex(pubkey)) AS pubkey",
      )
      .get() as { id: string; pubkey: string };
    const swappedJson = `{"pubkey":"${swapped.pubkey}","id":"${swapped.id}","created_at":7,"kind":1,"tags":[],"content":"","sig":"${"cd".repeat(64)}"}`;
    db.query("UPDATE events SET json = ? WHERE seq = 25002").run(swappedJson);
    db.close();
    const old = new Database(path);
    expect(old.query('SELECT count(*) AS n FROM events WHERE json LIKE \'%"sig":"%\'').get()).toEqual({ n: events.length + 2 });
    old.close();
    const again = openDatabase({ path, synchronous: "normal" });
    expect((again.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(16);
    expect(again.query("SELECT count(*) AS n FROM events WHERE sig IS NOT NULL").get()).toEqual({ n: events.length });
    expect(again.query("SELECT count(*) AS n FROM events WHERE json LIKE '{\"tags\":%'").get()).toEqual({ n: events.length });
    // Schema 9: the time index carries pubkey and kind (a feed's candidates are checked from it);
    // schema 11: its tie is the seq, not the id.
    expect((again.query("PRAGMA index_info(events_created)").all() as { name: string }[]).map((c) => c.name)).toEqual([
      "created_at",
      "seq",
      "pubkey",
      "kind",
    ]);
    const after = again.query(`SELECT seq, ${eventJsonSql("e")} AS j FROM events e ORDER BY seq`).all();
    expect(after).toEqual([...before, { seq: 25000, j: '{"kind":1}' }, { seq: 25001, j: bracedJson }, { seq: 25002, j: swappedJson }]);
    const maxSeq = 25002;
    const served = runQuery(new StatementCache(again), { filters: [{}], limits: [100], maxSeq, now: 0 });
    expect(new Set(served)).toEqual(new Set(after.map((r) => (r as { j: string }).j)));
    again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
