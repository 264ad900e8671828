// The relay's own key (NIP-11 `self`): what it signs its NIP-29 group metadata and moderation
// with. Found in this order: [info] relay_secret_key, [info] relay_key_file, then the engine's
// place: a file beside the SQLite database (created on first start, 0600), or a row of the
// Postgres database that every node shares. A relay in memory gets a fresh key each start.
import {
  closeSync,
  constants,
  existsSync,
  fchmodSync,
  fstatSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  writeSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Config } from "../config/schema.ts";
import { freshRelayKey, relayKeyFromHex, type RelayKey } from "../protocol/schnorr.ts";
import type { GroupRecords } from "../store/types.ts";
import { databasePath } from "./options.ts";
import { EXIT, StartupError } from "./startup.ts";

/** The key cannot be used, in one line; the command exits 1. */
export class RelayKeyError extends StartupError {
  constructor(message: string) {
    super(EXIT.failed, message);
  }
}

const HEX64 = /^[0-9a-f]{64}$/;
const toHex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

/** Where a SQLite relay keeps its key when relay_key_file is empty: beside the database file. */
export function defaultKeyFile(databaseFile: string): string {
  return join(dirname(databaseFile), "relay.key");
}

/**
 * config hex > relay_key_file > the engine's place (SQLite: `relay.key` beside the database
 * file, by default <data_directory>/relay.key; Postgres: the `relay_key` row; in memory: fresh,
 * not saved). Then [info] self, when set, must be its pubkey. `log` says where a key was created
 * (once, on first start).
 */
export async function resolveRelayKey(config: Config, store: { groups?: GroupRecords }, log: (line: string) => void): Promise<RelayKey> {
  const key = await findKey(config, store, databasePath(config), log);
  checkSelf(config, key);
  return key;
}

async function findKey(
  config: Config,
  store: { groups?: GroupRecords },
  databaseFile: string,
  log: (line: string) => void,
): Promise<RelayKey> {
  const i = config.info;
  if (i.relay_secret_key) return fromHex(i.relay_secret_key, "config", "[info] relay_secret_key is not a valid secp256k1 secret key");
  if (i.relay_key_file) return readOrCreateKeyFile(resolve(i.relay_key_file), log);
  if (config.database.engine === "postgres") {
    const claim = store.groups?.claimRelayKey;
    if (!claim) throw new RelayKeyError("this database cannot keep the relay key: set [info] relay_key_file");
    const stored = await claim.call(store.groups, toHex(freshRelayKey().secret));
    return fromHex(stored, "database", "the relay_key row of the database holds no valid secret key: fix it or set [info] relay_key_file");
  }
  if (config.database.in_memory || databaseFile === ":memory:") return freshRelayKey("memory");
  return readOrCreateKeyFile(defaultKeyFile(databaseFile), log);
}

function fromHex(hex: string, where: string, error: string): RelayKey {
  try {
    return relayKeyFromHex(hex, where);
  } catch {
    throw new RelayKeyError(error);
  }
}

/** [info] self names the relay's pubkey: when set, it must be the key's (checked at start and on a reload). */
export function checkSelf(config: Config, key: RelayKey): void {
  const self = config.info.self;
  if (self && self !== key.pubkey)
    throw new RelayKeyError(`[info] self ${self} is not the relay key's pubkey ${key.pubkey} (${key.where}): remove it or fix it`);
}

/** How long a reader waits for another process that has just created the file to write it. */
const CREATING_MS = 2000;

/**
 * The file form: 64 hex and a newline, created with mode 0600 and O_EXCL (two relays starting at
 * once do not both create one: the loser reads the winner's); refused when others may read it.
 */
export function readOrCreateKeyFile(path: string, log: (line: string) => void): RelayKey {
  const created = createKeyFile(path);
  if (created) {
    log(`relay key created: ${path} (pubkey ${created.pubkey}); it is in backups (bunstr backup writes <dest>.key), keep it private`);
    return created;
  }
  return readKeyFile(path);
}

/** A new key written to `path`, or undefined when the file exists. */
function createKeyFile(path: string): RelayKey | undefined {
  mkdirSync(dirname(path), { recursive: true });
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  } catch (err) {
    if ((err as { code?: string }).code === "EEXIST") return undefined;
    throw new RelayKeyError(`cannot create the relay key file ${path}: ${(err as Error).message}`);
  }
  const key = freshRelayKey(path);
  try {
    writeSync(fd, `${toHex(key.secret)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  // The file's name too: after a power loss without it the next start would make a new identity,
  // and the groups this key created would lose their only authority.
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
  return key;
}

function readKeyFile(path: string): RelayKey {
  const deadline = Date.now() + CREATING_MS;
  for (;;) {
    let text = "";
    let mode: number;
    let not: string | undefined;
    try {
      // Non-blocking: a FIFO put there would otherwise hang the start.
      const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
      try {
        const st = fstatSync(fd);
        mode = st.mode & 0o777;
        not = keyFileRefusal(st);
        if (!not) text = readFileSync(fd, "utf8");
      } finally {
        closeSync(fd);
      }
    } catch (err) {
      throw new RelayKeyError(`cannot read the relay key file ${path}: ${(err as Error).message}`);
    }
    if (not) throw new RelayKeyError(`relay key file ${path} ${not}`);
    if ((mode & 0o077) !== 0)
      throw new RelayKeyError(`relay key file ${path} is readable by others (mode 0${mode.toString(8)}): run chmod 600 ${path}`);
    const hex = text.trim();
    // Empty: another process created it an instant ago and is writing it.
    if (hex === "" && Date.now() < deadline && Date.now() - statSync(path).mtimeMs < CREATING_MS) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      continue;
    }
    if (!HEX64.test(hex)) throw new RelayKeyError(`relay key file ${path} must hold 64 hex characters`);
    return fromHex(hex, path, `relay key file ${path} must hold 64 hex characters`);
  }
}

/** Why a relay key file is not to be trusted: not a regular file, or another user's (who could replace the relay's identity). */
function keyFileRefusal(st: { isFile(): boolean; uid: number }): string | undefined {
  if (!st.isFile()) return "is not a regular file";
  const me = process.getuid?.();
  if (me !== undefined && st.uid !== me) return `is owned by uid ${st.uid}, not by the user running bunstr (uid ${me})`;
  return undefined;
}

/** The file holding a SQLite relay's key, or undefined when the key is in the config or the database (or memory). */
export function keyFileOf(config: Config): string | undefined {
  if (config.info.relay_secret_key || config.database.engine === "postgres" || config.database.in_memory) return undefined;
  return config.info.relay_key_file ? resolve(config.info.relay_key_file) : defaultKeyFile(databasePath(config));
}

/**
 * `bunstr backup`: the relay key file copied to `<dest>.key` (mode 0600), so a restore keeps the
 * relay's identity and its groups. Returns the path written, or undefined when there is no file
 * to copy (a key in the config is the operator's; Postgres keeps it in the dump).
 */
export function backupKeyFile(config: Config, dest: string): string | undefined {
  const from = keyFileOf(config);
  if (!from || !existsSync(from)) return undefined;
  const key = readKeyFile(from);
  const to = `${dest}.key`;
  let fd: number;
  try {
    // Not through a symlink put there: the secret would go wherever it points.
    fd = openSync(to, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new RelayKeyError(
      code === "ELOOP" ? `${to} is a symbolic link: not followed for the relay key` : `cannot write ${to}: ${(err as Error).message}`,
    );
  }
  try {
    if (!fstatSync(fd).isFile()) throw new RelayKeyError(`${to} is not a regular file`);
    // An existing file (--force) keeps its mode through open: set it.
    fchmodSync(fd, 0o600);
    writeSync(fd, `${toHex(key.secret)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return to;
}
