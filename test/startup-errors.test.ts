// A relay that cannot start says why in one line (`error: …`, what is wrong and what to do), with
// the exit code of its class (docs/operations.md, Exit codes), and never a stack or a source
// excerpt unless --debug: the address, the port, the rights, the data directory and the database.
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needInCI } from "./ci.ts";
import { freePort } from "./process-helpers.ts";

const ROOT = join(import.meta.dir, "..");
const dir = mkdtempSync(join(tmpdir(), "bunstr-startup-"));
// Traversable by the unprivileged user the rights tests run as.
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  code: number | null;
  out: string;
}

/** Runs bunstr (after `prefix`, e.g. setpriv) and returns its exit code and everything it printed. */
async function bunstr(args: string[], prefix: string[] = [], timeoutMs = 20_000): Promise<Run> {
  const proc = Bun.spawn([...prefix, process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: dir,
    env: { ...process.env, HOME: dir },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  // A relay that starts instead of failing must not hang the suite.
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code: proc.signalCode ? null : code, out: stdout + stderr };
}

/** The run printed exactly this one error line (nothing else: no stack, no source excerpt). */
function expectOneLine(r: Run, code: number, message: string): void {
  expect(r.out.trimEnd().split("\n")).toEqual([`error: ${message}`]);
  expect(r.code).toBe(code);
}

const data = (name: string) => join(dir, name);
const serveArgs = (port: number, dataDir: string, host = "127.0.0.1") => ["--host", host, "--port", String(port), "--data-dir", dataDir];

describe("the listen address", () => {
  test("a port another program holds: exit 3, no database created", async () => {
    const port = freePort();
    const other: Server = createServer();
    await new Promise<void>((ok) => other.listen(port, "127.0.0.1", ok));
    try {
      const r = await bunstr(serveArgs(port, data("busy")));
      expectOneLine(r, 3, `port ${port} is in use by another program; stop it or choose another port (--port)`);
      expect(existsSync(data("busy"))).toBe(false);
    } finally {
      other.close();
    }
  }, 30_000);

  test("a host name that is not this machine's: exit 3", async () => {
    const r = await bunstr(serveArgs(freePort(), data("name"), "relay.example.com"));
    expect(r.code).toBe(3);
    expect(r.out.trimEnd().split("\n")).toHaveLength(1);
    expect(r.out).toStartWith('error: host "relay.example.com" is not an address of this machine');
    expect(r.out.trimEnd()).toEndWith("; use 0.0.0.0 (every address) or 127.0.0.1 behind a proxy");
  }, 30_000);

  const nonlocal = readFileSync("/proc/sys/net/ipv4/ip_nonlocal_bind", "utf8").trim() === "1";
  test.skipIf(nonlocal)(
    "an IP address that is not this machine's: exit 3",
    async () => {
      const r = await bunstr(serveArgs(freePort(), data("ip"), "10.255.255.1"));
      expectOneLine(r, 3, 'host "10.255.255.1" is not an address of this machine; use 0.0.0.0 (every address) or 127.0.0.1 behind a proxy');
    },
    30_000,
  );

  test("a port in the host: exit 2", async () => {
    const r = await bunstr(serveArgs(7447, data("hostport"), "localhost:7447"));
    // The wording of config errors is config/load.ts's: what matters here is the key, the reason and one line.
    expect(r.code).toBe(2);
    expect(r.out.trimEnd().split("\n")).toHaveLength(1);
    expect(r.out).toStartWith('error: network.host = "localhost:7447": expected');
    expect(r.out).toContain("without a port");
  }, 30_000);

  test('config check refuses host = "999.1.1.1" (exit 2); names and addresses pass', async () => {
    const bad = data("bad-host.toml");
    writeFileSync(bad, '[network]\nhost = "999.1.1.1"\n');
    const r = await bunstr(["config", "check", bad]);
    expect(r.code).toBe(2);
    expect(r.out).toContain(`${bad}:2: [network] host = "999.1.1.1": expected`);
    expect(r.out).toContain("an IP address or a host name, without a port");
    for (const host of ["127.0.0.1", "::1", "::", "fe80::1%eth0", "localhost", "relay.example.com", ""]) {
      const good = data("good-host.toml");
      writeFileSync(good, `[network]\nhost = ${JSON.stringify(host)}\n`);
      expect((await bunstr(["config", "check", good])).code).toBe(0);
    }
  }, 60_000);
});

// Without the rights: as an unprivileged user (root runs the command through setpriv as nobody).
const unprivileged: string[] | undefined =
  process.getuid?.() !== 0 ? [] : Bun.which("setpriv") ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] : undefined;
const firstFreePort = Number(readFileSync("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8").trim());
const asUser = needInCI("setpriv (to run bunstr without root)", unprivileged ? undefined : "not found, and the tests run as root");

describe.if(asUser)("without the rights", () => {
  test.skipIf(firstFreePort === 0)(
    "a port below 1024: exit 3",
    async () => {
      const port = Math.min(firstFreePort, 1024) - 1;
      const dataDir = data("low-port");
      mkdirSync(dataDir, { mode: 0o777 });
      chmodSync(dataDir, 0o777);
      const r = await bunstr(serveArgs(port, dataDir), unprivileged);
      expectOneLine(
        r,
        3,
        `port ${port} needs root or the CAP_NET_BIND_SERVICE capability; use a port from 1024 up behind a proxy, or grant it (systemd: AmbientCapabilities=CAP_NET_BIND_SERVICE)`,
      );
    },
    30_000,
  );

  test("a data directory that cannot be created, or written: exit 4", async () => {
    const locked = data("not-mine");
    mkdirSync(locked, { mode: 0o755 });
    const uid = process.getuid?.() === 0 ? 65534 : process.getuid?.();
    const create = await bunstr(serveArgs(freePort(), join(locked, "data")), unprivileged);
    expectOneLine(
      create,
      4,
      `cannot create ${join(locked, "data")}: permission denied; make the data directory writable by this user (uid ${uid}) or choose another with --data-dir`,
    );
    const write = await bunstr(serveArgs(freePort(), locked), unprivileged);
    expectOneLine(
      write,
      4,
      `cannot open ${join(locked, "bunstr.sqlite")} for writing (unable to open database file); make the data directory and the files in it writable by this user (uid ${uid}) or choose another with --data-dir`,
    );
  }, 30_000);
});

describe("the data directory and the database", () => {
  test("a data directory under a file: exit 4", async () => {
    writeFileSync(data("a-file"), "");
    const r = await bunstr(serveArgs(freePort(), join(data("a-file"), "data")));
    expectOneLine(
      r,
      4,
      `cannot create the data directory for ${join(data("a-file"), "data", "bunstr.sqlite")}: part of the path is a file, not a directory; choose another with --data-dir`,
    );
  }, 30_000);

  test("a database from a newer bunstr: exit 4, the file untouched", async () => {
    const dataDir = data("newer");
    mkdirSync(dataDir);
    const file = join(dataDir, "bunstr.sqlite");
    const db = new Database(file);
    db.exec("PRAGMA user_version = 999");
    db.close();
    const r = await bunstr(serveArgs(freePort(), dataDir));
    expect(r.code).toBe(4);
    expect(r.out.trimEnd().split("\n")).toHaveLength(1);
    expect(r.out).toMatch(
      new RegExp(
        `^error: database ${file} was written by a newer bunstr \\(schema version 999; this one knows up to \\d+\\); run that version or a later one, or restore a backup made with this one\\n$`,
      ),
    );
    const after = new Database(file, { readonly: true });
    expect(after.query("PRAGMA user_version").get()).toEqual({ user_version: 999 });
    after.close();
  }, 30_000);

  test("a file that is not a database, or a damaged one: exit 4", async () => {
    const garbage = data("garbage");
    mkdirSync(garbage);
    writeFileSync(join(garbage, "bunstr.sqlite"), Buffer.alloc(8192, "not a database "));
    const r = await bunstr(serveArgs(freePort(), garbage));
    expectOneLine(
      r,
      4,
      `database ${join(garbage, "bunstr.sqlite")} is damaged or not a SQLite database (file is not a database); restore it from a backup, or move it away to start with an empty one`,
    );
    // A SQLite header with its schema page overwritten.
    const damaged = data("damaged");
    mkdirSync(damaged);
    const file = join(damaged, "bunstr.sqlite");
    const db = new Database(file);
    db.exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)");
    db.close();
    const bytes = readFileSync(file);
    bytes.fill(0xa5, 100, 4096);
    writeFileSync(file, bytes);
    const r2 = await bunstr(serveArgs(freePort(), damaged));
    expect(r2.code).toBe(4);
    expect(r2.out.trimEnd().split("\n")).toHaveLength(1);
    expect(r2.out).toStartWith(`error: database ${file} is damaged or not a SQLite database (`);
  }, 30_000);

  test("a database another process holds the write lock of: exit 4", async () => {
    const dataDir = data("locked");
    mkdirSync(dataDir);
    const file = join(dataDir, "bunstr.sqlite");
    const db = new Database(file);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("BEGIN IMMEDIATE");
    try {
      const r = await bunstr(serveArgs(freePort(), dataDir));
      expectOneLine(
        r,
        4,
        `database ${file} is locked by another process (a sqlite3 shell with an open transaction, \`bunstr compact\`); stop it and start again`,
      );
    } finally {
      db.exec("ROLLBACK");
      db.close();
    }
  }, 30_000);

  test("a Postgres server that cannot be reached: exit 4", async () => {
    const config = data("pg.toml");
    writeFileSync(config, '[database]\nengine = "postgres"\npostgres_url = "postgres://bunstr:secret@127.0.0.1:1/relay"\n');
    const r = await bunstr(["--config", config, "--port", String(freePort())]);
    expect(r.code).toBe(4);
    expect(r.out.trimEnd().split("\n")).toHaveLength(1);
    expect(r.out).toStartWith("error: cannot use the Postgres database 127.0.0.1:1/relay (");
    expect(r.out.trimEnd()).toEndWith("); check [database] postgres_url (or DATABASE_URL) and that the server accepts connections");
    expect(r.out).not.toContain("secret");
  }, 30_000);

  test("--debug prints the error itself as well", async () => {
    writeFileSync(data("debug-file"), "");
    const r = await bunstr([...serveArgs(freePort(), join(data("debug-file"), "data")), "--debug"]);
    expect(r.code).toBe(4);
    expect(r.out).toContain("cannot create the data directory for");
    expect(r.out).toContain("ENOTDIR");
    expect(r.out.trimEnd().split("\n").length).toBeGreaterThan(1);
  }, 30_000);
});
