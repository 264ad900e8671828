// Who already listens on the port. With reuse_port two processes can bind one port and the kernel
// spreads clients over both: right for the zero-downtime hand-over between two processes serving
// the same database, wrong for two relays with different databases. Each serving process leaves a
// claim beside its SQLite file (`<database>.serving.<pid>`, naming the port), so a new process
// sees whether a listener on its port serves its own database.
import { log } from "../log.ts";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Config } from "../config/schema.ts";
import { SOFTWARE_URL } from "../nips/nip11.ts";
import { EXIT, StartupError } from "./startup.ts";

interface Claim {
  pid: number;
  port: number;
  /** The process's start time (Linux, /proc/<pid>/stat), so a pid used again later is not taken for it. */
  start?: string;
}

/** When process `pid` started, in clock ticks since boot; undefined where /proc is not there. */
function startTime(pid: number | "self"): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 22; the command name (field 2) is in parentheses and may hold spaces.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** The claims' common path prefix for this database, or undefined when it has no file (in memory, Postgres). */
export function claimPrefix(config: Config, dbPath: string): string | undefined {
  if (config.database.engine !== "sqlite" || dbPath === ":memory:") return undefined;
  return `${dbPath}.serving.`;
}

/** Is the claim's process still running (and not another process that got its pid since)? */
const alive = ({ pid, start }: Claim): boolean => {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as { code?: string }).code !== "EPERM") return false;
  }
  const now = start === undefined ? undefined : startTime(pid);
  return now === undefined || now === start;
};

/** Live processes other than this one that serve this database on `port`. */
function liveClaims(prefix: string, port: number): Claim[] {
  const dir = dirname(prefix);
  const name = basename(prefix);
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.startsWith(name));
  } catch {
    return [];
  }
  const claims: Claim[] = [];
  for (const f of files) {
    try {
      const c = JSON.parse(readFileSync(join(dir, f), "utf8")) as Claim;
      if (c.port === port && c.pid !== process.pid && alive(c)) claims.push(c);
    } catch {
      // Half written or removed meanwhile: not a claim.
    }
  }
  return claims;
}

/** Notes that this process serves the database on `port`, until it exits. */
export function claimPort(prefix: string, port: number): void {
  const file = `${prefix}${process.pid}`;
  try {
    const claim: Claim = { pid: process.pid, port, start: startTime("self") };
    writeFileSync(file, `${JSON.stringify(claim)}\n`);
  } catch (err) {
    log.warn(`warning: could not write ${file} (${(err as Error).message}); a restart on this port will be refused`);
    return;
  }
  process.on("exit", () => rmSync(file, { force: true }));
}

const loopbackFor = (host: string) => (host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host);

/** Does something accept TCP connections on host:port? */
async function someoneListens(host: string, port: number): Promise<boolean> {
  const probe = Bun.connect({ hostname: loopbackFor(host), port, socket: { data() {} } }).then(
    (s) => (s.end(), true),
    () => false,
  );
  return Promise.race([probe, Bun.sleep(500).then(() => false)]);
}

/** Is the listener a bunstr relay (its NIP-11 document names bunstr)? */
async function isBunstr(host: string, port: number, path: string): Promise<boolean> {
  const h = loopbackFor(host);
  const url = `http://${h.includes(":") ? `[${h}]` : h}:${port}${path}`;
  try {
    const res = await fetch(url, { headers: { Accept: "application/nostr+json" }, signal: AbortSignal.timeout(1000) });
    const doc = (await res.json()) as { software?: unknown };
    return doc.software === SOFTWARE_URL;
  } catch {
    return false;
  }
}

/**
 * Before listening: refuses a port something else listens on, unless it is a process serving the
 * same database and reuse_port lets this one join it (the hand-over: then a note says so).
 */
export async function checkPort(config: Config, prefix: string | undefined): Promise<void> {
  const { host, port, path, reuse_port } = config.network;
  if (port === 0 || !(await someoneListens(host, port))) return;
  const inUse = `port ${port} is in use by another program; stop it or choose another port (--port)`;
  // Postgres nodes on one machine share the database by design: they may share a port as before.
  if (config.database.engine === "postgres") {
    if (!reuse_port) throw new StartupError(EXIT.listen, inUse);
    log.warn(`note: another process already listens on ${host}:${port}; sharing the port (reuse_port) (docs/operations.md)`);
    return;
  }
  const same = prefix === undefined ? [] : liveClaims(prefix, port);
  const pids = same.map((c) => c.pid).join(", ");
  if (same.length > 0 && reuse_port) {
    log.warn(
      `note: bunstr (pid ${pids}) serves this database on port ${port}; sharing the port for a zero-downtime restart: now send it SIGUSR2 (docs/operations.md)`,
    );
    return;
  }
  if (same.length > 0)
    throw new StartupError(
      EXIT.listen,
      `port ${port} is in use by bunstr (pid ${pids}) serving this database, and [network] reuse_port = false; stop it first, or set reuse_port = true on both for a zero-downtime restart`,
    );
  if (await isBunstr(host, port, path))
    throw new StartupError(
      EXIT.listen,
      `port ${port} is in use by another bunstr relay with another database; stop it or choose another port (--port). Only processes serving the same database share a port (zero-downtime restart, docs/operations.md)`,
    );
  throw new StartupError(EXIT.listen, inUse);
}
