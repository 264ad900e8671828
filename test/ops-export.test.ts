// `bunstr export` of a running relay's database: every stored event byte for byte in commit
// order, filters, stdout for data only, and an export taken while the relay keeps writing.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { eventJsonSql } from "../src/store/sqlite/db.ts";
import { accepted, Client, now, signer } from "./helpers.ts";
import { bunstr, importFile } from "./ops-helpers.ts";
import { spawnRelay, type RelayProcess } from "./process-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-ops-export-"));
const data = join(dir, "data");
const dbFile = join(data, "bunstr.sqlite");
let relay: RelayProcess;
let c: Client;
const alice = signer();
const bob = signer();
const t = now();
const published: NostrEvent[] = [];

beforeAll(async () => {
  relay = await spawnRelay([process.execPath, join(import.meta.dir, "..", "src", "main.ts")], ["--data-dir", data], dir);
  c = await Client.connect(relay.url);
  for (let i = 0; i < 20; i++) {
    const s = i % 2 ? alice : bob;
    const e = s.sign({ kind: 1, content: `note ${i}`, tags: i % 3 === 0 ? [["t", "three"]] : [], created_at: t - 1000 + i * 10 });
    await accepted(c, e);
    published.push(e);
  }
  const profile1 = alice.sign({ kind: 0, content: '{"name":"a1"}', created_at: t - 500 });
  const profile2 = alice.sign({ kind: 0, content: '{"name":"a2"}', created_at: t - 400 });
  await accepted(c, profile1);
  await accepted(c, profile2); // replaces profile1
  const deletion = alice.sign({ kind: 5, tags: [["e", published[1]!.id]], created_at: t - 300 });
  await accepted(c, deletion); // deletes note 1
  published.push(profile2, deletion);
});

afterAll(async () => {
  c?.close();
  relay?.proc.kill("SIGTERM");
  await relay?.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

/** What the relay's database holds, in commit order, read directly. */
function storedJson(file = dbFile): string[] {
  const db = new Database(file, { readonly: true });
  const rows = db.query(`SELECT ${eventJsonSql("events")} AS json FROM events ORDER BY seq`).all() as { json: string }[];
  db.close();
  return rows.map((r) => r.json);
}

const exportLines = (stdout: string) => (stdout === "" ? [] : stdout.replace(/\n$/, "").split("\n"));

test("with the relay running: every stored event, byte for byte, in commit order; data on stdout only", async () => {
  const r = await bunstr(["export", "--data-dir", data]);
  expect(r.code).toBe(0);
  const lines = exportLines(r.stdout);
  expect(lines).toEqual(storedJson());
  expect(lines.length).toBe(21); // 20 notes - 1 deleted + profile2 + deletion
  expect(lines.map((l) => JSON.parse(l).id)).not.toContain(published[1]!.id);
  // Not a terminal: no progress, one summary line on stderr.
  expect(r.stderr.trim().split("\n")).toHaveLength(1);
  expect(r.stderr).toContain("exported 21 events");
});

test("filters: the same events as a REQ with that filter", async () => {
  const cases: Record<string, unknown>[] = [
    { kinds: [0, 5] },
    { authors: [alice.pubkey], kinds: [1] },
    { "#t": ["three"] },
    { since: t - 900, until: t - 850 },
    { ids: [published[0]!.id, published[4]!.id] },
  ];
  for (const f of cases) {
    const r = await bunstr(["export", "--data-dir", data, "--filter", JSON.stringify(f)]);
    expect(r.code).toBe(0);
    const exported = exportLines(r.stdout)
      .map((l) => JSON.parse(l).id)
      .sort();
    const { events } = await c.req(`f${JSON.stringify(f).length}`, { ...f, limit: 1000 });
    expect(exported).toEqual(events.map((e) => e.id).sort());
    expect(exported.length).toBeGreaterThan(0);
  }
  // --since/--until flags narrow a filter further.
  const r = await bunstr([
    "export",
    "--data-dir",
    data,
    "--filter",
    JSON.stringify({ kinds: [1] }),
    "--since",
    String(t - 900),
    "--until",
    String(t - 850),
  ]);
  expect(exportLines(r.stdout).map((l) => JSON.parse(l).created_at)).toEqual([t - 900, t - 890, t - 880, t - 870, t - 860, t - 850]);
});

test("round trip: export, import into a fresh data dir, export again: the same bytes", async () => {
  const first = await bunstr(["export", "--data-dir", data]);
  const file = join(dir, "round.jsonl");
  await Bun.write(file, first.stdout);
  const s = await importFile(["--data-dir", join(dir, "copy")], file);
  expect(s.accepted).toBe(21);
  const second = await bunstr(["export", "--data-dir", join(dir, "copy")]);
  expect(second.stdout).toBe(first.stdout);
});

test("while the relay takes writes: whole lines only, and everything acknowledged before the export began", async () => {
  const writer = signer();
  // Signing costs ~1 ms per event: sign ahead, publish as fast as acknowledged during the export.
  const events = Array.from({ length: 300 }, (_, i) => writer.sign({ kind: 1, content: `during export ${i}`, created_at: t - i }));
  const ackedBefore: string[] = [];
  for (const e of events.slice(0, 100)) {
    await accepted(c, e);
    ackedBefore.push(e.id);
  }
  const publishing = (async () => {
    for (const e of events.slice(100)) await accepted(c, e);
  })();
  const r = await bunstr(["export", "--data-dir", data]);
  await publishing;
  expect(r.code).toBe(0);
  const ids = new Set(exportLines(r.stdout).map((l) => (JSON.parse(l) as NostrEvent).id));
  expect(ackedBefore.filter((id) => !ids.has(id))).toEqual([]);
  // Once writes stop, a new export has them all.
  const after = await bunstr(["export", "--data-dir", data, "--filter", JSON.stringify({ authors: [writer.pubkey] })]);
  expect(exportLines(after.stdout)).toHaveLength(300);
});

test("a missing database is an error (exit 1), not an empty export", async () => {
  const r = await bunstr(["export", "--data-dir", join(dir, "nothing-here")]);
  expect(r.code).toBe(1);
  expect(r.stdout).toBe("");
  expect(r.stderr).toContain("no database at");
  // Where it looked, and what to give instead.
  expect(r.stderr.trim()).toBe(
    `error: no database at ${join(dir, "nothing-here", "bunstr.sqlite")}; give the relay's --config, --data-dir or --db (a relative path is read from here, ${process.cwd()})`,
  );
  const bad = await bunstr(["export", "--data-dir", data, "--filter", "{"]);
  expect(bad.code).toBe(2);
});
