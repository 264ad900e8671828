// The operator commands on the Postgres store, as real processes (issue 31 item 4): import,
// export, stats, backup (pg_dump), compact (VACUUM), sync and stream each run against a
// database of the local server and do what they do on SQLite (test/ops-*.test.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../../src/protocol/event.ts";
import { Client, now, signer } from "../helpers.ts";
import { bunstr, importFile, writeLines } from "../ops-helpers.ts";
import { createDatabase, dropDatabase, databaseFor } from "../postgres-env.ts";
import { spawnRelay, type RelayProcess } from "../process-helpers.ts";
import { spawnBunstr, type Bunstr } from "../relay-process.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-pg-ops-"));
const names: string[] = [];
const procs: (RelayProcess | Bunstr)[] = [];

/** A fresh database and a config file naming it. */
async function pgConfig(tag: string): Promise<{ config: string; url: string; name: string }> {
  const name = databaseFor(join(dir, tag));
  await dropDatabase(name);
  const url = await createDatabase(name);
  names.push(name);
  const config = join(dir, `${tag}.toml`);
  writeFileSync(config, `[database]\nengine = "postgres"\npostgres_url = "${url}"\n`);
  return { config, url, name };
}

const a = signer();
const b = signer();
const t = now();
const events: NostrEvent[] = [
  ...Array.from({ length: 30 }, (_, i) =>
    a.sign({ kind: 1, content: `note ${i}`, created_at: t - 100 + i, tags: [["t", i % 2 ? "odd" : "even"]] }),
  ),
  ...Array.from({ length: 10 }, (_, i) => b.sign({ kind: 7, content: "+", created_at: t - 50 + i })),
  a.sign({ kind: 0, content: "{}", created_at: t - 10 }),
];
const lines = (text: string): NostrEvent[] =>
  text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as NostrEvent);
let main: { config: string; url: string; name: string };

beforeAll(async () => {
  main = await pgConfig("main");
  const s = await importFile(["--config", main.config], writeLines(join(dir, "events.jsonl"), events));
  expect(s.accepted).toBe(events.length);
});

afterAll(async () => {
  for (const p of procs) {
    p.proc.kill("SIGKILL");
    await p.proc.exited;
  }
  for (const n of names) await dropDatabase(n);
  rmSync(dir, { recursive: true, force: true });
});

test("export: every event in commit order; filters in SQL and on the event", async () => {
  const all = await bunstr(["export", "--config", main.config]);
  expect(all.code).toBe(0);
  expect(lines(all.stdout)).toEqual(events);
  expect(all.stderr).toContain(`exported ${events.length} events`);
  const kinds = await bunstr(["export", "--config", main.config, "--filter", JSON.stringify({ kinds: [7], authors: [b.pubkey] })]);
  expect(kinds.stdout.trim().split("\n").length).toBe(10);
  const tagged = await bunstr([
    "export",
    "--config",
    main.config,
    "--filter",
    JSON.stringify({ "#t": ["odd"] }),
    "--since",
    String(t - 90),
  ]);
  const ids = tagged.stdout
    .trim()
    .split("\n")
    .map((l) => (JSON.parse(l) as NostrEvent).id);
  expect(ids).toEqual(events.filter((e, i) => i < 30 && i % 2 === 1 && e.created_at >= t - 90).map((e) => e.id));
});

test("stats: counts, kinds and the database's size", async () => {
  const r = await bunstr(["stats", "--json", "--config", main.config]);
  expect(r.code).toBe(0);
  const st = JSON.parse(r.stdout);
  expect(st.events).toBe(events.length);
  expect(st.authors).toBe(2);
  expect(st.kinds[0]).toEqual({ kind: 1, count: 30 });
  expect(st.distinct_kinds).toBe(3);
  expect(st.oldest).toBe(t - 100);
  expect(st.newest).toBe(t - 10);
  expect(st.tag_rows).toBe(30);
  expect(st.file_bytes).toBeGreaterThan(0);
  expect(st.free_bytes).toBeNull();
  const text = await bunstr(["stats", "--config", main.config]);
  expect(text.stdout).toMatch(/events\s+41/);
});

test("backup: pg_dump of one snapshot, which pg_restore puts back whole (the same export, byte for byte)", async () => {
  const file = join(dir, "backups", "pg.dump");
  const r = await bunstr(["backup", file, "--config", main.config]);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(new RegExp(`backup of postgres .* written to .*pg\\.dump: [\\d.]+ [KMG]?B, ${events.length} events, in `));
  expect(r.stdout).toContain("pg_dump --format=custom");
  expect(existsSync(file)).toBe(true);
  const again = await bunstr(["backup", file, "--config", main.config]);
  expect(again.code).toBe(1);
  // Restored into an empty database: the same events.
  const restored = await pgConfig("restored");
  const pr = Bun.spawnSync(["pg_restore", "--no-owner", `--dbname=${restored.url}`, file], { stderr: "pipe" });
  expect(pr.stderr.toString()).toBe("");
  expect(pr.exitCode).toBe(0);
  const out = await bunstr(["export", "--config", restored.config]);
  expect(out.stdout).toBe((await bunstr(["export", "--config", main.config])).stdout);
  expect(lines(out.stdout)).toEqual(events);
});

test("compact: VACUUM (ANALYZE), the events stay", async () => {
  const r = await bunstr(["compact", "--config", main.config]);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/^compacted postgres .* by VACUUM \(ANALYZE\): database .* -> /);
  expect(JSON.parse((await bunstr(["stats", "--json", "--config", main.config])).stdout).events).toBe(events.length);
});

test("sync both ways with a relay: each side then holds the union", async () => {
  const local = await pgConfig("sync");
  const c = signer();
  const shared = Array.from({ length: 5 }, (_, i) => c.sign({ kind: 1, content: `shared ${i}`, created_at: t - 20 + i }));
  const mine = Array.from({ length: 4 }, (_, i) => c.sign({ kind: 1, content: `mine ${i}`, created_at: t - 30 + i }));
  const theirs = Array.from({ length: 6 }, (_, i) => c.sign({ kind: 1, content: `theirs ${i}`, created_at: t - 40 + i }));
  expect((await importFile(["--config", local.config], writeLines(join(dir, "mine.jsonl"), [...shared, ...mine]))).accepted).toBe(9);
  const remote = await spawnRelay(
    [process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts")],
    ["--data-dir", join(dir, "remote")],
    dir,
  );
  procs.push(remote);
  const client = await Client.connect(remote.url);
  for (const e of [...shared, ...theirs]) expect((await client.publish(e))[2]).toBe(true);
  const r = await bunstr(["sync", remote.url, "--config", local.config, "--json"]);
  expect(r.code).toBe(0);
  const s = JSON.parse(r.stdout);
  expect(s.method).toBe("negentropy");
  expect([s.local, s.have, s.need, s.uploaded]).toEqual([9, 4, 6, 4]);
  expect(s.imported.accepted).toBe(6);
  const union = new Set([...shared, ...mine, ...theirs].map((e) => e.id));
  const there = (await client.req("all", { authors: [c.pubkey] })).events.map((e) => e.id);
  expect(new Set(there)).toEqual(union);
  client.close();
  const here = (await bunstr(["export", "--config", local.config])).stdout.trim().split("\n");
  expect(new Set(here.map((l) => (JSON.parse(l) as NostrEvent).id))).toEqual(union);
});

test("stream: a remote relay's new events land in Postgres; SIGINT ends it with a summary", async () => {
  const local = await pgConfig("stream");
  const remote = await spawnRelay(
    [process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts")],
    ["--data-dir", join(dir, "stream-remote")],
    dir,
  );
  procs.push(remote);
  const stream = await spawnBunstr(["stream", remote.url, "--config", local.config], dir, false);
  procs.push(stream);
  await stream.waitFor("subscribed to", 15_000);
  const d = signer();
  const live = [d.sign({ kind: 1, content: "live 1" }), d.sign({ kind: 1, content: "live 2" })];
  const client = await Client.connect(remote.url);
  for (const e of live) expect((await client.publish(e))[2]).toBe(true);
  client.close();
  const deadline = Date.now() + 15_000;
  let stored = 0;
  while (stored < live.length && Date.now() < deadline) {
    await Bun.sleep(200);
    stored = JSON.parse((await bunstr(["stats", "--json", "--config", local.config])).stdout).events;
  }
  expect(stored).toBe(live.length);
  stream.proc.kill("SIGINT");
  expect(await stream.proc.exited).toBe(0);
  expect(stream.output()).toContain("stored 2, duplicate 0");
}, 60_000);
