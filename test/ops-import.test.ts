// `bunstr import` as a real process: what it counts, what it stores (the relay's own rules), and
// that a relay serves what was imported, whether it was started afterwards or was running.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakePubkey, unsignedEvent } from "../bench/lib/events.ts";
import { importParsed } from "../src/ops/import.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { BulkStore } from "../src/store/types.ts";
import { Client, now, signer, testConfig } from "./helpers.ts";
import { bunstr, importFile, writeLines } from "./ops-helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-ops-import-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const a = signer();
const b = signer();
const t = now();
const e1 = a.sign({ kind: 1, content: "hello import", tags: [["t", "ops"]], created_at: t - 50 });
const e2 = a.sign({ kind: 1, content: "to be deleted", created_at: t - 40 });
const e3 = a.sign({ kind: 1, content: "bad signature", created_at: t - 30 });
const e4 = a.sign({ kind: 1, content: "bad id", created_at: t - 30 });
const profileNew = b.sign({ kind: 0, content: JSON.stringify({ name: "new" }), created_at: t - 10 });
const profileOld = b.sign({ kind: 0, content: JSON.stringify({ name: "old" }), created_at: t - 100 });
const deletion = a.sign({ kind: 5, tags: [["e", e2.id]], created_at: t - 5 });
const ephemeral = a.sign({ kind: 20001, content: "gone", created_at: t });
const expired = a.sign({ kind: 1, content: "expired", tags: [["expiration", String(t - 1)]], created_at: t - 60 });
const articleNew = b.sign({
  kind: 30023,
  content: "v2",
  tags: [
    ["d", "post"],
    ["title", "Operating relays"],
  ],
  created_at: t - 20,
});
const articleOld = b.sign({ kind: 30023, content: "v1", tags: [["d", "post"]], created_at: t - 200 });
const e5 = a.sign({ kind: 1, content: "crlf line", created_at: t - 1 });

/** The counting fixture: each line has one expected fate. */
const lines: (NostrEvent | string)[] = [
  e1, // 1 accepted
  e2, // 2 accepted, then deleted by line 10
  e1, // 3 duplicate
  "{not json", // 4 bad JSON
  { ...e3, sig: (e3.sig[0] === "0" ? "1" : "0") + e3.sig.slice(1) }, // 5 bad signature
  { ...e4, content: "changed after signing" }, // 6 bad id
  '{"id":"abc","kind":1}', // 7 not an event
  profileNew, // 8 accepted
  profileOld, // 9 older than the stored version
  deletion, // 10 accepted
  e2, // 11 deleted by its author
  ephemeral, // 12 ephemeral, not stored
  expired, // 13 refused: already expired
  "", // 14 blank: not counted
  articleNew, // 15 accepted
  articleOld, // 16 older
  JSON.stringify(e5) + "\r", // 17 CRLF: accepted
];

test("counts every line's fate, reports failing lines by number, stores what the relay would", async () => {
  const file = writeLines(join(dir, "mixed.jsonl"), lines);
  const data = join(dir, "mixed");
  const s = await importFile(["--data-dir", data], file);
  expect({
    lines: s.lines,
    accepted: s.accepted,
    duplicate: s.duplicate,
    older: s.older,
    deleted: s.deleted,
    refused: s.refused,
    ephemeral: s.ephemeral,
    badJson: s.badJson,
    badEvent: s.badEvent,
    badId: s.badId,
    badSig: s.badSig,
  }).toEqual({
    lines: 16,
    accepted: 6,
    duplicate: 1,
    older: 2,
    deleted: 1,
    refused: 1,
    ephemeral: 1,
    badJson: 1,
    badEvent: 1,
    badId: 1,
    badSig: 1,
  });
  expect(s.verified).toBe(true);
  const byLine = Object.fromEntries(s.problems.map((p: { line: number; reason: string }) => [p.line, p.reason]));
  expect(byLine[4]).toBe("not JSON");
  expect(byLine[5]).toBe("invalid: signature verification failed");
  expect(byLine[6]).toBe("invalid: event id does not match the event");
  expect(byLine[7]).toStartWith("invalid:");
  expect(byLine[11]).toStartWith("blocked:");
  expect(byLine[13]).toStartWith("invalid:");

  // Stored: exactly the winners, as the relay serializes them.
  const out = await bunstr(["export", "--data-dir", data]);
  expect(out.code).toBe(0);
  const ids = out.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l).id);
  expect(ids).toEqual([e1.id, profileNew.id, deletion.id, articleNew.id, e5.id]);

  // The same again: everything is now a duplicate (or still refused), nothing stored twice.
  const again = await importFile(["--data-dir", data], file);
  expect(again.accepted).toBe(0);
  expect(again.duplicate).toBe(6); // e1 twice, profileNew, deletion, articleNew, e5
  expect(again.deleted).toBe(2); // e2 on lines 2 and 11: its deletion is remembered

  // The human summary names the counts and the first failing lines.
  const text = await bunstr(["import", "--data-dir", data], { stdinFile: file });
  expect(text.code).toBe(0);
  expect(text.stdout).toContain("accepted 0, duplicate 6");
  expect(text.stdout).toContain("line 4: not JSON");
});

test("--no-verify: dummy signatures are stored; without it they are counted as bad signatures", async () => {
  const pk = fakePubkey();
  const events = Array.from({ length: 50 }, (_, i) => unsignedEvent(pk, { content: `unsigned ${i}`, created_at: t - i }));
  const file = writeLines(join(dir, "unsigned.jsonl"), events);
  const data = join(dir, "unsigned");
  const checked = await importFile(["--data-dir", data], file);
  expect([checked.accepted, checked.badSig]).toEqual([0, 50]);
  const trusted = await importFile(["--data-dir", data, "--no-verify"], file);
  expect([trusted.accepted, trusted.badSig, trusted.verified]).toEqual([50, 0, false]);
});

test("into a fresh data dir: a relay started on it serves the events, search finds them, deletions hold", async () => {
  const file = writeLines(join(dir, "fresh.jsonl"), [e1, e2, deletion, articleNew, profileNew]);
  const data = join(dir, "fresh");
  const s = await importFile(["--data-dir", data], file);
  expect(s.accepted).toBe(5);
  const relay = await spawnRelay([process.execPath, join(import.meta.dir, "..", "src", "main.ts")], ["--data-dir", data], dir);
  try {
    const c = await Client.connect(relay.url);
    const all = await c.req("all", { authors: [a.pubkey, b.pubkey] });
    expect(new Set(all.events.map((e) => e.id))).toEqual(new Set([e1.id, deletion.id, articleNew.id, profileNew.id]));
    const found = await c.req("search", { search: "operating relays" });
    expect(found.events.map((e) => e.id)).toEqual([articleNew.id]);
    const tagged = await c.req("t", { "#t": ["ops"] });
    expect(tagged.events.map((e) => e.id)).toEqual([e1.id]);
    // The import kept the deletion's tombstone: the deleted event cannot come back.
    const ok = await c.publish(e2);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("blocked:");
    c.close();
  } finally {
    relay.proc.kill("SIGTERM");
    await relay.proc.exited;
  }
});

test("the summary says when the database was new: a config's relative data_directory read from another directory", async () => {
  // Issue 34: `./data` is the service's /var/lib/bunstr/data but /root/data for a command run from
  // /root; an import there fills a database no relay serves, and used to say nothing of it.
  const file = writeLines(join(dir, "where.jsonl"), [e1]);
  const cfg = join(dir, "where.toml");
  writeFileSync(cfg, '[database]\ndata_directory = "./data"\n');
  const cwd = join(dir, "elsewhere");
  mkdirSync(cwd);
  const first = await bunstr(["import", file, "--config", cfg], { cwd });
  expect(first.code).toBe(0);
  expect(first.stdout).toContain(`into ${join(cwd, "data", "bunstr.sqlite")} (a new database: there was none) in `);
  const again = await bunstr(["import", file, "--config", cfg], { cwd });
  expect(again.stdout).toContain(`into ${join(cwd, "data", "bunstr.sqlite")} in `);
  expect(again.stdout).not.toContain("a new database");
});

test("while a relay runs on the same database: it serves the imported events at once, and its own writes all succeed", async () => {
  const data = join(dir, "live");
  const relay = await spawnRelay(
    [process.execPath, join(import.meta.dir, "..", "src", "main.ts")],
    ["--data-dir", data, "--no-verify"],
    dir,
  );
  try {
    const c = await Client.connect(relay.url);
    const live = fakePubkey();
    const before = unsignedEvent(live, { content: "before the import" });
    expect((await c.publish(before))[2]).toBe(true);

    // Publish on the relay all through the import: none may fail or wait long.
    let stop = false;
    const failures: string[] = [];
    const latencies: number[] = [];
    const publisher = (async () => {
      for (let i = 0; !stop; i++) {
        const started = performance.now();
        const ok = await c.publish(unsignedEvent(live, { content: `during ${i}` }));
        latencies.push(performance.now() - started);
        if (!ok[2]) failures.push(ok[3]);
      }
    })();

    const imported = fakePubkey();
    const N = 3000;
    const events = Array.from({ length: N }, (_, i) =>
      unsignedEvent(imported, { content: `imported ${i}`, created_at: t - i, tags: [["t", "imported"]] }),
    );
    const file = writeLines(join(dir, "live.jsonl"), events);
    const s = await importFile(["--data-dir", data, "--no-verify"], file);
    stop = true;
    await publisher;
    expect(s.accepted).toBe(N);
    expect(failures).toEqual([]);
    latencies.sort((x, y) => x - y);
    console.log(
      `[ops-import] relay publishes during the import: ${latencies.length}, p50 ${latencies[latencies.length >> 1]!.toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms; import ${s.seconds.toFixed(2)} s`,
    );

    // Right after the import, with no write of the relay's own in between.
    expect(await c.count("n", [{ authors: [imported] }])).toEqual(["COUNT", "n", { count: N }]);
    const newest = await c.req("newest", { authors: [imported], limit: 3 });
    expect(newest.events.map((e) => e.id)).toEqual(events.slice(0, 3).map((e) => e.id));
    c.close();
  } finally {
    relay.proc.kill("SIGTERM");
    expect(await relay.proc.exited).toBe(0);
  }
});

test("a request to vanish the lists refuse is carried out (NIP-62), counted refused, and not stored", async () => {
  const v = signer();
  const notes = [v.sign({ kind: 1, content: "first", created_at: t - 30 }), v.sign({ kind: 1, content: "second", created_at: t - 20 })];
  const data = join(dir, "vanish");
  expect((await importFile(["--data-dir", data], writeLines(join(dir, "vanish-1.jsonl"), notes))).accepted).toBe(2);
  const config = join(dir, "deny.toml");
  writeFileSync(config, `[authorization]\npubkey_denylist = ["${v.pubkey}"]\n`);
  const vanish = v.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]], created_at: t - 10 });
  const s = await importFile(["--data-dir", data, "--config", config], writeLines(join(dir, "vanish-2.jsonl"), [vanish]));
  expect([s.accepted, s.refused]).toEqual([0, 1]);
  expect(s.problems[0].reason).toStartWith("blocked: this pubkey may not publish here; the request to vanish was carried out");
  const out = await bunstr(["export", "--data-dir", data]);
  expect(out.stdout.trim()).toBe("");
});

test("exit status: 1 when the input cannot be read or the database cannot be opened; 2 for usage", async () => {
  const missing = await bunstr(["import", join(dir, "no-such.jsonl"), "--data-dir", join(dir, "x")]);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain("cannot read the input");
  const notADb = join(dir, "a-directory");
  mkdirSync(notADb, { recursive: true });
  const file = writeLines(join(dir, "one.jsonl"), [e1]);
  const badDb = await bunstr(["import", "--db", notADb], { stdinFile: file });
  expect(badDb.code).toBe(1);
  expect(badDb.stderr).toContain("cannot open the database");
  const usage = await bunstr(["import", "a", "b"]);
  expect(usage.code).toBe(2);
});

test("a failed commit ends the import at once: the rest of the input is not read", async () => {
  // A store whose disk is full: every write throws.
  const store = {
    writer: async () => ({
      adminEntries: async () => [],
      has: () => false,
      txnSize: 1000,
      commit: async () => {
        throw new Error("database or disk is full");
      },
    }),
  } as unknown as BulkStore;
  const author = fakePubkey();
  let pulled = 0;
  function* batches() {
    for (let i = 0; i < 50; i++) {
      const batch = [];
      for (let j = 0; j < 1000; j++) batch.push(unsignedEvent(author, { content: `full ${i}:${j}`, created_at: t - 100 }));
      pulled += batch.length;
      yield batch;
    }
  }
  await expect(importParsed(store, batches(), { config: testConfig() })).rejects.toThrow("database or disk is full");
  // The first transaction (1,000 events) and what was read ahead of it; never the 50,000.
  expect(pulled).toBeLessThan(10_000);
});
