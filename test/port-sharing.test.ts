// reuse_port lets two processes listen on one port: only for the hand-over between processes
// serving the same database (docs/operations.md, Zero-downtime restart). A second relay on the
// port with another database refuses to start; one with the same database joins, and takes over
// when the first drains. (The full hand-over under load is zero-downtime.test.ts.)
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, signer } from "./helpers.ts";
import { freePort } from "./process-helpers.ts";
import { signalAndWait, spawnBunstr } from "./relay-process.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-port-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const args = (port: number, data: string) => ["--host", "127.0.0.1", "--port", String(port), "--data-dir", data];
const claims = (data: string) => (existsSync(data) ? readdirSync(data).filter((f) => f.startsWith("bunstr.sqlite.serving.")) : []);

test("a second relay with another database on the same port refuses to start (exit 3)", async () => {
  const port = freePort();
  const a = await spawnBunstr(args(port, join(dir, "d1")), dir);
  try {
    expect(claims(join(dir, "d1"))).toEqual([`bunstr.sqlite.serving.${a.proc.pid}`]);
    const b = await spawnBunstr(args(port, join(dir, "d2")), dir, false);
    expect(await b.proc.exited).toBe(3);
    expect(b.output().trimEnd().split("\n")).toEqual([
      `error: port ${port} is in use by another bunstr relay with another database; stop it or choose another port (--port). Only processes serving the same database share a port (zero-downtime restart, docs/operations.md)`,
    ]);
    // Refused before opening anything: no empty database beside the real one.
    expect(existsSync(join(dir, "d2"))).toBe(false);
    // An in-memory database is never the one being served.
    const m = await spawnBunstr([...args(port, join(dir, "d1")), "--config", memoryConfig()], dir, false);
    expect(await m.proc.exited).toBe(3);
    expect(m.output()).toContain(`error: port ${port} is in use by another bunstr relay with another database`);
  } finally {
    a.proc.kill("SIGTERM");
    expect(await a.proc.exited).toBe(0);
  }
  // Its claim goes with it.
  expect(claims(join(dir, "d1"))).toEqual([]);
}, 60_000);

function memoryConfig(): string {
  const file = join(dir, "memory.toml");
  writeFileSync(file, "[database]\nin_memory = true\n");
  return file;
}

test("the same database: the second joins the port, and serves it after SIGUSR2 to the first", async () => {
  const port = freePort();
  const data = join(dir, "same");
  const a = await spawnBunstr(args(port, data), dir);
  const b = await spawnBunstr(args(port, data), dir);
  expect(b.output()).toContain(
    `note: bunstr (pid ${a.proc.pid}) serves this database on port ${port}; sharing the port for a zero-downtime restart: now send it SIGUSR2 (docs/operations.md)`,
  );
  expect(claims(data).sort()).toEqual([`bunstr.sqlite.serving.${a.proc.pid}`, `bunstr.sqlite.serving.${b.proc.pid}`].sort());
  await signalAndWait(a, "SIGUSR2", "bye");
  expect(await a.proc.exited).toBe(0);
  expect(claims(data)).toEqual([`bunstr.sqlite.serving.${b.proc.pid}`]);
  const c = await Client.connect(`ws://127.0.0.1:${port}/`);
  const ok = await c.publish(signer().sign({ kind: 1, content: "after the hand-over" }));
  expect(ok[2]).toBe(true);
  c.close();
  b.proc.kill("SIGTERM");
  expect(await b.proc.exited).toBe(0);
}, 60_000);

test("a claim left by a process that is gone does not count, nor one whose pid another process has now", async () => {
  const port = freePort();
  const data = join(dir, "stale");
  const a = await spawnBunstr(args(port, join(dir, "other")), dir);
  try {
    // A claim on this port in `data` by a pid that no longer runs (a relay killed with -9).
    const dead = Bun.spawnSync(["true"]).pid;
    mkdirSync(data);
    writeFileSync(join(data, `bunstr.sqlite.serving.${dead}`), `${JSON.stringify({ pid: dead, port })}\n`);
    // One whose pid runs again, but is another process (started at another time).
    writeFileSync(join(data, `bunstr.sqlite.serving.${process.pid}`), `${JSON.stringify({ pid: process.pid, port, start: "1" })}\n`);
    const b = await spawnBunstr(args(port, data), dir, false);
    expect(await b.proc.exited).toBe(3);
    expect(b.output()).toContain(`error: port ${port} is in use by another bunstr relay with another database`);
  } finally {
    a.proc.kill("SIGTERM");
    await a.proc.exited;
  }
}, 60_000);
