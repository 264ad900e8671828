// Schema 7: the events table holds an event's JSON without its sig (a column holds it as 64
// bytes), and every read puts back the bytes that were accepted: the wire text must round-trip,
// so a client can check the signature of what it is served.
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
    // The first has the sig elsewhere, the second has it last but after a "}" (rtrim would eat it).
    const [odd, odd2] = [events[0]!, events[1]!];
    const oddJson = `{"id":"${odd.id}","pubkey":"${odd.pubkey}","created_at":${odd.created_at},"kind":1,"tags":[],"sig":"${odd.sig}","content":""}`;
    const odd2Json = `{"id":"${odd2.id}","pubkey":"${odd2.pubkey}","created_at":${odd2.created_at},"kind":1,"tags":[],"content":"","x":{},"sig":"${odd2.sig}"}`;
    expect(storedJson(odd, oddJson).sig).toBeNull();
    expect(storedJson(odd2, odd2Json).sig).toBeNull();
    const want = [oddJson, odd2Json, ...jsons.slice(2)];
    new SqliteWriter(db).writeBatch(
      events.map((event, i) => ({ event, json: want[i]! })),
      RULES,
    );
    // Stored without the sig (all but the odd ones), and still a JSON object.
    const rows = db.query("SELECT json, sig FROM events ORDER BY seq").all() as { json: string; sig: Uint8Array | null }[];
    expect(rows.map((r) => r.sig === null)).toEqual(want.map((_, i) => i < 2));
    for (const [i, r] of rows.entries()) {
      if (i >= 2) expect(r.json).not.toContain(events[i]!.sig);
      expect((JSON.parse(r.json) as NostrEvent).content).toBe(i < 2 ? "" : events[i]!.content);
    }
    // SQL read, byte counts, REQ, export.
    const back = db.query(`SELECT ${eventJsonSql("e")} AS j, ${eventBytesSql("e")} AS b FROM events e ORDER BY seq`).all() as {
      j: string;
      b: number;
    }[];
    expect(back.map((r) => r.j)).toEqual(want.map((j) => j.toWellFormed()));
    // Exact but for the rows kept whole, which it counts 137 bytes over.
    expect(back.map((r) => r.b)).toEqual(want.map((j, i) => Buffer.byteLength(j.toWellFormed()) + (i < 2 ? 137 : 0)));
    const maxSeq = events.length;
    const served = runQuery(new StatementCache(db), { filters: [{}], limits: [100], maxSeq, now: 0 });
    expect(new Set(served)).toEqual(new Set(want.map((j) => j.toWellFormed())));
    expect(exportPager(db, { now: 0 })(0, maxSeq, 100).map((r) => r.json)).toEqual(want.map((j) => j.toWellFormed()));
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a database of schema 6 (whole JSON) migrates to schema 7 in steps, and reads the same", () => {
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
    db.exec(`UPDATE events SET json = ${eventJsonSql("events")}, sig = NULL; ALTER TABLE events DROP COLUMN sig; PRAGMA user_version = 6`);
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
    db.close();
    const old = new Database(path);
    expect(old.query('SELECT count(*) AS n FROM events WHERE json LIKE \'%"sig":"%\'').get()).toEqual({ n: events.length + 1 });
    old.close();
    const again = openDatabase({ path, synchronous: "normal" });
    expect((again.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(9);
    expect(again.query("SELECT count(*) AS n FROM events WHERE sig IS NOT NULL").get()).toEqual({ n: events.length });
    // Schema 9: the time index carries pubkey and kind (a feed's candidates are checked from it).
    expect((again.query("PRAGMA index_info(events_created)").all() as { name: string }[]).map((c) => c.name)).toEqual([
      "created_at",
      "id",
      "pubkey",
      "kind",
    ]);
    const after = again.query(`SELECT seq, ${eventJsonSql("e")} AS j FROM events e ORDER BY seq`).all();
    expect(after).toEqual([...before, { seq: 25000, j: '{"kind":1}' }, { seq: 25001, j: bracedJson }]);
    again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
