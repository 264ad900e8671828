// `bunstr backup`, `bunstr compact` and `bunstr stats` as real processes, on real files, with a
// relay running and writing where that is the point.
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakePubkey, unsignedEvent } from "../bench/lib/events.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now } from "./helpers.ts";
import { bunstr, importFile, writeLines } from "./ops-helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-ops-maint-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const SOURCE = [process.execPath, join(import.meta.dir, "..", "src", "main.ts")];
const t = now();

function openReadonly(file: string): Database {
  return new Database(file, { readonly: true });
}

const storedIds = (db: Database): Set<string> =>
  new Set((db.query("SELECT lower(hex(id)) AS id FROM events").all() as { id: string }[]).map((r) => r.id));

/** `n` unsigned events of one author (for --no-verify), newest first. */
const eventsOf = (pubkey: string, n: number, label: string): NostrEvent[] =>
  Array.from({ length: n }, (_, i) =>
    unsignedEvent(pubkey, { content: `${label} ${i} ${"lorem ipsum ".repeat(20)}`, created_at: t - 10_000 + i, tags: [["t", label]] }),
  );

test("backup while the relay takes writes: opens, passes integrity_check, holds every event acknowledged before it began", async () => {
  const data = join(dir, "live");
  // Some volume first, so the copy takes a while and the writes overlap it.
  const bulk = writeLines(join(dir, "bulk.jsonl"), eventsOf(fakePubkey(), 10_000, "bulk"));
  expect((await importFile(["--data-dir", data, "--no-verify"], bulk)).accepted).toBe(10_000);
  const relay = await spawnRelay(SOURCE, ["--data-dir", data, "--no-verify"], dir);
  const c = await Client.connect(relay.url);
  const author = fakePubkey();
  const acked: string[] = [];
  const failed: string[] = [];
  let stop = false;
  const publisher = (async () => {
    for (let i = 0; !stop; i++) {
      const e = unsignedEvent(author, { content: `live ${i}` });
      const ok = await c.publish(e);
      if (ok[2]) acked.push(e.id);
      else failed.push(ok[3]);
    }
  })();
  try {
    while (acked.length < 200) await Bun.sleep(5);
    const ackedBefore = [...acked];
    const file = join(dir, "backups", "live.sqlite");
    const r = await bunstr(["backup", file, "--data-dir", data]);
    const ackedDuring = acked.length - ackedBefore.length;
    stop = true;
    await publisher;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/backup of .* written to .*live\.sqlite: [\d.]+ [KMG]?B, [\d,]+ events, in /);
    expect(failed).toEqual([]);
    console.log(`[ops-maintenance] ${r.stdout.trim()}; relay acknowledged ${ackedDuring} events while it ran`);

    const db = openReadonly(file);
    expect(db.query("PRAGMA integrity_check").all()).toEqual([{ integrity_check: "ok" }]);
    expect((db.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode).toBe("delete");
    const ids = storedIds(db);
    db.close();
    expect(ackedBefore.filter((id) => !ids.has(id))).toEqual([]);
    expect(ids.size).toBeGreaterThanOrEqual(10_000 + ackedBefore.length);
    // One self-contained file: no WAL beside it, no temporary file left; and the relay key (NIP-29) beside it.
    expect(readdirSync(join(dir, "backups")).sort()).toEqual(["live.sqlite", "live.sqlite.key"]);

    // It is a bunstr database: stats reads it.
    const st = await bunstr(["stats", "--json", "--db", file]);
    expect(JSON.parse(st.stdout).events).toBe(ids.size);
  } finally {
    stop = true;
    await publisher;
    c.close();
    relay.proc.kill("SIGTERM");
    await relay.proc.exited;
  }
});

test("backup refuses to overwrite a file unless --force", async () => {
  const data = join(dir, "live");
  const file = join(dir, "backups", "live.sqlite");
  const before = readFileSync(file);
  const refused = await bunstr(["backup", file, "--data-dir", data]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("exists; use --force");
  expect(readFileSync(file).equals(before)).toBe(true);
  const forced = await bunstr(["backup", file, "--force", "--data-dir", data]);
  expect(forced.code).toBe(0);
  const db = openReadonly(file);
  expect(db.query("PRAGMA integrity_check").all()).toEqual([{ integrity_check: "ok" }]);
  db.close();
  const usage = await bunstr(["backup", "--data-dir", data]);
  expect(usage.code).toBe(2);
});

test("compact returns the space of deleted events; refuses while a relay has the file open unless --online, and then the relay only waits", async () => {
  const data = join(dir, "compact");
  const gone = fakePubkey();
  const kept = fakePubkey();
  const file = writeLines(join(dir, "compact.jsonl"), [...eventsOf(gone, 4000, "gone"), ...eventsOf(kept, 1000, "kept")]);
  expect((await importFile(["--data-dir", data, "--no-verify"], file)).accepted).toBe(5000);
  // A request to vanish deletes the 4,000 events of `gone`: their pages become free.
  const vanish = writeLines(join(dir, "vanish.jsonl"), [unsignedEvent(gone, { kind: 62, content: "", tags: [["relay", "ALL_RELAYS"]] })]);
  expect((await importFile(["--data-dir", data, "--no-verify"], vanish)).accepted).toBe(1);
  const before = JSON.parse((await bunstr(["stats", "--json", "--data-dir", data])).stdout);
  expect(before.events).toBe(1001);
  expect(before.free_bytes).toBeGreaterThan(1_000_000);

  const relay = await spawnRelay(SOURCE, ["--data-dir", data, "--no-verify"], dir);
  const c = await Client.connect(relay.url);
  try {
    // A relay has the file open: compact refuses unless told to go ahead.
    const refused = await bunstr(["compact", "--data-dir", data]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("another process has");
    const during = Array.from({ length: 50 }, (_, i) => unsignedEvent(kept, { content: `during compact ${i}` }));
    const compacting = bunstr(["compact", "--online", "--data-dir", data]);
    const oks = [];
    for (const e of during) oks.push(await c.publish(e));
    const r = await compacting;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^compacted .* in .*\(write lock held .* by VACUUM\): file .* -> .*, WAL .* -> .*, [\d,]+ free pages returned/,
    );
    expect(oks.filter((ok) => !ok[2])).toEqual([]);
    console.log(`[ops-maintenance] ${r.stdout.trim()}`);
  } finally {
    c.close();
    relay.proc.kill("SIGTERM");
    await relay.proc.exited;
  }
  // Stopped relay: the WAL is folded back; compact again to see the final numbers.
  const again = await bunstr(["compact", "--data-dir", data]);
  expect(again.code).toBe(0);
  const after = JSON.parse((await bunstr(["stats", "--json", "--data-dir", data])).stdout);
  expect(after.events).toBe(1051);
  expect(after.free_bytes).toBe(0);
  expect(after.file_bytes).toBeLessThan(before.file_bytes / 2);
  const db = openReadonly(join(data, "bunstr.sqlite"));
  expect(db.query("PRAGMA integrity_check").all()).toEqual([{ integrity_check: "ok" }]);
  db.close();
});

test("stats: counts, kinds, authors, time range and sizes of a known database", async () => {
  const data = join(dir, "stats");
  const [p1, p2, p3] = [fakePubkey(), fakePubkey(), fakePubkey()];
  const events = [
    ...Array.from({ length: 30 }, (_, i) => unsignedEvent(p1, { kind: 1, content: `n${i}`, created_at: 1_700_000_000 + i })),
    ...Array.from({ length: 12 }, (_, i) => unsignedEvent(p2, { kind: 7, content: "+", created_at: 1_700_000_100 + i })),
    unsignedEvent(p3, { kind: 0, content: "{}", created_at: 1_699_999_000 }),
    unsignedEvent(p3, { kind: 3, content: "", created_at: 1_700_000_500, tags: [["expiration", String(t + 86_400)]] }),
  ];
  expect((await importFile(["--data-dir", data, "--no-verify"], writeLines(join(dir, "stats.jsonl"), events))).accepted).toBe(44);
  const r = await bunstr(["stats", "--json", "--data-dir", data]);
  expect(r.code).toBe(0);
  const s = JSON.parse(r.stdout);
  const dbFile = join(data, "bunstr.sqlite");
  const wal = existsSync(`${dbFile}-wal`) ? statSync(`${dbFile}-wal`).size : 0;
  expect(s).toMatchObject({
    database: dbFile,
    events: 44,
    authors: 3,
    oldest: 1_699_999_000,
    newest: 1_700_000_500,
    kinds: [
      { kind: 1, count: 30 },
      { kind: 7, count: 12 },
      { kind: 0, count: 1 },
      { kind: 3, count: 1 },
    ],
    distinct_kinds: 4,
    file_bytes: statSync(dbFile).size,
    wal_bytes: wal,
    expiring: 1,
    deleted_ids: 0,
    vanished_pubkeys: 0,
  });
  expect(s.bytes_per_event).toBe(Math.round((s.file_bytes + s.wal_bytes) / 44));
  const top1 = JSON.parse((await bunstr(["stats", "--json", "--top", "1", "--data-dir", data])).stdout);
  expect(top1.kinds).toEqual([{ kind: 1, count: 30 }]);
  const text = await bunstr(["stats", "--data-dir", data]);
  expect(text.stdout).toMatch(/^events\s+44$/m);
  expect(text.stdout).toMatch(/^authors\s+3$/m);
  expect(text.stdout).toMatch(/^oldest\s+2023-11-14T21:56:40Z \(1699999000\)$/m);
  const missing = await bunstr(["stats", "--data-dir", join(dir, "none")]);
  expect(missing.code).toBe(1);
});
