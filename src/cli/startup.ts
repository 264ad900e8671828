// What can stop `bunstr serve` from starting, each said in one line with what to do, and the
// exit code of its class (docs/operations.md, Exit codes): the listen address, the port, the
// data directory and the database.
import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { SchemaTooNewError } from "../store/sqlite/db.ts";

/** Exit codes of the commands. */
export const EXIT = {
  ok: 0,
  /** Anything else: a failure the relay did not expect (run with --debug for the details). */
  failed: 1,
  /** A command-line or config-file mistake. */
  usage: 2,
  /** The relay cannot listen: the host, the port, or another relay on the port. */
  listen: 3,
  /** The data directory or the database cannot be used. */
  database: 4,
} as const;

/** A failure to start, said in one line; main.ts prints it as `error: …` and exits with `exitCode`. */
export class StartupError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

const HOST_HINT = "use 0.0.0.0 (every address) or 127.0.0.1 behind a proxy";
const errno = (err: unknown): string => String((err as { code?: unknown } | null)?.code ?? "");
const text = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Linux lets a process bind addresses it does not have when this is 1 (floating IPs, keepalived). */
function nonlocalBind(v6: boolean): boolean {
  try {
    return readFileSync(`/proc/sys/net/ipv${v6 ? 6 : 4}/ip_nonlocal_bind`, "utf8").trim() === "1";
  } catch {
    return false;
  }
}

/**
 * os.networkInterfaces(), or undefined where getifaddrs is refused: packaging/bunstr.service's
 * RestrictAddressFamilies has no AF_NETLINK, which glibc's getifaddrs needs, and there the call
 * threw ("getifaddrs returned an error") and the relay exited at start.
 */
export function machineInterfaces(): ReturnType<typeof networkInterfaces> | undefined {
  try {
    return networkInterfaces();
  } catch {
    return undefined;
  }
}

/** Is `address` one this machine can listen on: an interface's address, or loopback? (Unknown interfaces: yes; the bind then says.) */
function isLocalAddress(address: string): boolean {
  const a = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "").replace(/%.*$/, "");
  if (a === "0.0.0.0" || a === "::" || a === "::1" || /^127\./.test(a)) return true;
  const interfaces = machineInterfaces();
  if (!interfaces) return true;
  for (const list of Object.values(interfaces))
    for (const i of list ?? []) if (i.address.replace(/%.*$/, "").toLowerCase() === a.toLowerCase()) return true;
  return false;
}

/** The addresses a host name stands for ([] if it does not resolve within 3 s). */
async function resolveHost(host: string): Promise<string[]> {
  const found = lookup(host, { all: true }).then(
    (list) => list.map((a) => a.address),
    () => [] as string[],
  );
  return Promise.race([found, Bun.sleep(3000).then(() => [] as string[])]);
}

/**
 * [network] host must be an address of this machine (or a name for one): Bun's own errors for
 * anything else (ENOENT, EADDRNOTAVAIL, getaddrinfo) do not say what is wrong.
 */
export async function checkHost(host: string): Promise<void> {
  if (host === "" || host === "0.0.0.0" || host === "::") return;
  const addresses = isIP(host) ? [host] : await resolveHost(host);
  if (addresses.some(isLocalAddress)) return;
  if (addresses.some((a) => nonlocalBind(isIP(a) === 6))) return;
  const resolved = isIP(host) ? "" : addresses.length === 0 ? " (the name does not resolve)" : ` (it resolves to ${addresses.join(", ")})`;
  throw new StartupError(EXIT.listen, `host "${host}" is not an address of this machine${resolved}; ${HOST_HINT}`);
}

/** Bun.serve's error when it cannot listen, in one line. */
export function listenError(err: unknown, host: string, port: number): StartupError | undefined {
  const code = errno(err);
  if (code === "EADDRINUSE")
    return new StartupError(EXIT.listen, `port ${port} is in use by another program; stop it or choose another port (--port)`);
  if (code === "EACCES" || code === "EPERM")
    return new StartupError(
      EXIT.listen,
      port < 1024
        ? `port ${port} needs root or the CAP_NET_BIND_SERVICE capability; use a port from 1024 up behind a proxy, or grant it (systemd: AmbientCapabilities=CAP_NET_BIND_SERVICE)`
        : `not allowed to listen on ${host}:${port} (${code})`,
    );
  if (code === "EADDRNOTAVAIL" || code === "ENOENT" || code === "ENOTFOUND")
    return new StartupError(EXIT.listen, `host "${host}" is not an address of this machine; ${HOST_HINT}`);
  return undefined;
}

/** An error opening the data directory or the SQLite database, in one line. */
export function databaseError(err: unknown, path: string): StartupError | undefined {
  const code = errno(err);
  const where = (err as { path?: unknown }).path;
  if (err instanceof SchemaTooNewError)
    return new StartupError(
      EXIT.database,
      `database ${path} was written by a newer bunstr (schema version ${err.found}; this one knows up to ${err.known}); run that version or a later one, or restore a backup made with this one`,
    );
  if (["EACCES", "EPERM", "EROFS"].includes(code))
    return new StartupError(
      EXIT.database,
      `cannot create ${typeof where === "string" ? where : "the data directory"}: ${code === "EROFS" ? "read-only file system" : "permission denied"}; make the data directory writable by this user (uid ${process.getuid?.() ?? "?"}) or choose another with --data-dir`,
    );
  if (code === "ENOTDIR" || code === "EEXIST")
    return new StartupError(
      EXIT.database,
      `cannot create the data directory for ${path}: part of the path is a file, not a directory; choose another with --data-dir`,
    );
  if (code.startsWith("SQLITE_CANTOPEN") || code.startsWith("SQLITE_READONLY") || code.startsWith("SQLITE_PERM"))
    return new StartupError(
      EXIT.database,
      `cannot open ${path} for writing (${text(err)}); make the data directory and the files in it writable by this user (uid ${process.getuid?.() ?? "?"}) or choose another with --data-dir`,
    );
  if (code.startsWith("SQLITE_NOTADB") || code.startsWith("SQLITE_CORRUPT"))
    return new StartupError(
      EXIT.database,
      `database ${path} is damaged or not a SQLite database (${text(err)}); restore it from a backup, or move it away to start with an empty one`,
    );
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
    return new StartupError(
      EXIT.database,
      `database ${path} is locked by another process (a sqlite3 shell with an open transaction, \`bunstr compact\`); stop it and start again`,
    );
  return undefined;
}

/** An error connecting to Postgres at start, in one line (`url` without its password). */
export function postgresError(err: unknown, url: string): StartupError {
  const u = URL.canParse(url) ? new URL(url) : undefined;
  const code = errno(err);
  return new StartupError(
    EXIT.database,
    `cannot use the Postgres database ${u ? `${u.host}${u.pathname}` : "of [database] postgres_url"} (${text(err)}${code ? `, ${code}` : ""}); check [database] postgres_url (or DATABASE_URL) and that the server accepts connections`,
  );
}
