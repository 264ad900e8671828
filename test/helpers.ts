// Test helpers: a real relay on port 0 with a temp database, a raw websocket client that
// records every frame, and signed events.
import { afterAll, afterEach, beforeAll, expect, spyOn } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import { defaults, type Config } from "../src/config/schema.ts";
import { readOrCreateKeyFile } from "../src/cli/relay-key.ts";
import { startRelay, type Relay } from "../src/relay/server.ts";
import { PostgresStore } from "../src/store/postgres/store.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { createDatabase, databaseFor, dropDatabase, onPostgres, REDIS_URL } from "./postgres-env.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { relayKeyFromHex } from "../src/protocol/schnorr.ts";
import type { PendingWrite, QueryJob, Store, WriteRules } from "../src/store/types.ts";

export interface TestRelay extends Relay {
  dir: string;
  dbPath: string;
  /** Closes the relay and removes its directory. */
  stop(): Promise<void>;
}

export type ConfigPatch = { [S in keyof Config]?: Partial<Config[S]> };

export function testConfig(patch: ConfigPatch = {}): Config {
  const c = defaults();
  c.network.host = "127.0.0.1";
  c.network.port = 0;
  c.options.verify_workers = 1;
  c.database.reader_workers = 1;
  // Every test client comes from 127.0.0.1.
  c.limits.max_connections_per_ip = 100_000;
  // Rate limits off for the same reason; test/rate-limits.test.ts turns them on.
  for (const k of Object.keys(c.rate_limits)) if (k.endsWith("_per_minute")) (c.rate_limits as Record<string, unknown>)[k] = 0;
  // The per-address memory caps likewise (test/hostile-reads.test.ts turns them on).
  c.limits.max_filter_bytes_per_ip = 0;
  c.limits.max_negentropy_items_per_ip = 0;
  c.limits.max_counts_per_ip = 0;
  for (const [s, v] of Object.entries(patch)) Object.assign((c as any)[s], v);
  return c;
}

/**
 * The store a test relay in `dir` uses: the SQLite file there, or (BUNSTR_TEST_STORE=postgres)
 * the Postgres database named after `dir`, with the Redis bus.
 */
export async function openTestStore(dir: string, config: Config = testConfig()): Promise<Store> {
  if (onPostgres)
    return PostgresStore.open({
      url: await createDatabase(databaseFor(dir)),
      busUrl: REDIS_URL,
      poolSize: 4,
      queryTimeoutMs: config.database.query_timeout_ms,
    });
  return new SqliteStore({
    path: join(dir, "bunstr.sqlite"),
    synchronous: "normal",
    readerWorkers: config.database.reader_workers,
    queryTimeoutMs: config.database.query_timeout_ms,
    writerThread: true,
  });
}

export async function startTestRelay(patch: ConfigPatch = {}, opts: { dir?: string } = {}): Promise<TestRelay> {
  const config = testConfig(patch);
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "bunstr-test-"));
  const dbPath = join(dir, "bunstr.sqlite");
  const pgName = databaseFor(dir);
  const store = await openTestStore(dir, config);
  // The relay key: [info] relay_secret_key, else a file in the test's directory, so a restart on
  // the same `dir` keeps it.
  const relayKey = config.info.relay_secret_key
    ? relayKeyFromHex(config.info.relay_secret_key, "config")
    : readOrCreateKeyFile(join(dir, "relay.key"), () => {});
  const relay = startRelay({ config, store, relayKey });
  await relay.ready;
  return {
    ...relay,
    close: relay.close,
    dir,
    dbPath,
    async stop() {
      await relay.close();
      if (!opts.dir) {
        rmSync(dir, { recursive: true, force: true });
        if (onPostgres) await dropDatabase(pgName);
      }
    },
  };
}

/** A raw websocket client: every frame parsed and kept in order; waits by predicate. */
export class Client {
  readonly frames: any[] = [];
  private waiters: { pred: (f: any) => boolean; resolve: (f: any) => void }[] = [];
  closed = false;
  closeCode?: number;

  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (m) => {
      const f = JSON.parse(String(m.data));
      this.frames.push(f);
      this.waiters = this.waiters.filter((w) => (w.pred(f) ? (w.resolve(f), false) : true));
    };
    ws.onclose = (e) => {
      this.closed = true;
      this.closeCode = e.code;
    };
  }

  /** `headers` go with the upgrade request (e.g. X-Forwarded-For, as a reverse proxy adds it). */
  static async connect(url: string, headers?: Record<string, string>): Promise<Client> {
    const ws = headers ? new WebSocket(url, { headers }) : new WebSocket(url);
    const c = new Client(ws);
    await new Promise<void>((res, rej) => {
      ws.onopen = () => res();
      ws.onerror = () => rej(new Error(`cannot connect to ${url}`));
    });
    return c;
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === "string" ? msg : JSON.stringify(msg));
  }

  /** Resolves with the first frame (already received or future) matching pred. */
  next(pred: (f: any) => boolean, timeoutMs = 5000, from = 0): Promise<any> {
    const have = this.frames.slice(from).find(pred);
    if (have) return Promise.resolve(have);
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`timed out waiting for a frame; got ${JSON.stringify(this.frames).slice(-600)}`)),
        timeoutMs,
      );
      this.waiters.push({ pred, resolve: (f) => (clearTimeout(t), resolve(f)) });
    });
  }

  async publish(e: NostrEvent): Promise<[string, string, boolean, string]> {
    const from = this.frames.length;
    this.send(["EVENT", e]);
    return this.next((f) => f[0] === "OK" && f[1] === e.id, 5000, from);
  }

  /** Sends REQ and resolves at EOSE (or CLOSED) with the events received before it. */
  async req(subId: string, ...filters: unknown[]): Promise<{ events: NostrEvent[]; end: any[] }> {
    const from = this.frames.length;
    this.send(["REQ", subId, ...filters]);
    const end = await this.next((f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === subId, 5000, from);
    const events = this.frames
      .slice(from)
      .filter((f) => f[0] === "EVENT" && f[1] === subId)
      .map((f) => f[2]);
    return { events, end };
  }

  /** NIP-42: answers the relay's challenge as `s` and resolves with the OK frame. */
  async auth(s: Signer, relayUrl: string): Promise<any[]> {
    const [, challenge] = await this.next((f) => f[0] === "AUTH");
    const e = s.sign({
      kind: 22242,
      tags: [
        ["relay", relayUrl],
        ["challenge", challenge],
      ],
    });
    const from = this.frames.length;
    this.send(["AUTH", e]);
    return this.next((f) => f[0] === "OK" && f[1] === e.id, 5000, from);
  }

  /** Sends COUNT and resolves with the COUNT (or CLOSED) answer for that id. */
  count(subId: string, filters: unknown[], timeoutMs = 5000): Promise<any[]> {
    const from = this.frames.length;
    this.send(["COUNT", subId, ...filters]);
    return this.next((f) => (f[0] === "COUNT" || f[0] === "CLOSED") && f[1] === subId, timeoutMs, from);
  }

  eventsFor(subId: string): NostrEvent[] {
    return this.frames.filter((f) => f[0] === "EVENT" && f[1] === subId).map((f) => f[2]);
  }

  close(): void {
    this.ws.close();
  }
}

export const now = (): number => Math.floor(Date.now() / 1000);

/**
 * A fence for checking that something did NOT arrive on `c`, instead of a fixed sleep.
 * `const pass = await fence(c, via)` opens a subscription on `c` for an event that does not exist
 * yet: its EOSE means the relay has handled everything `c` sent before (a CLOSE, say). `await
 * pass()` publishes that event through `via` and waits until `c` has it: the relay sends a
 * connection's frames in order and fans out in commit order, so whatever it was going to send `c`
 * for what was published before has arrived by then.
 */
export async function fence(c: Client, via: Client = c): Promise<() => Promise<void>> {
  const e = signer().sign({ kind: 1, content: `fence ${Math.random()}` });
  const sub = `fence-${e.id.slice(0, 12)}`;
  expect((await c.req(sub, { ids: [e.id] })).end).toEqual(["EOSE", sub]);
  return async () => {
    expect(await via.publish(e)).toEqual(["OK", e.id, true, ""]);
    await c.next((f) => f[0] === "EVENT" && f[1] === sub && f[2].id === e.id);
    c.send(["CLOSE", sub]);
  };
}

/** Publishes and expects OK true with an empty message. */
export async function accepted(c: Client, e: NostrEvent): Promise<void> {
  expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
}

/** Publishes and expects OK false whose message starts with `prefix`. */
export async function refusedWith(c: Client, e: NostrEvent, prefix: string): Promise<void> {
  const ok = await c.publish(e);
  expect(ok[1]).toBe(e.id);
  expect(ok[2]).toBe(false);
  expect(ok[3]).toStartWith(prefix);
}

/** Rows stored with this id, read from the database itself (not through the relay's queries). */
export async function rowsWithId(r: Relay, id: string): Promise<number> {
  const store = r.ctx.store;
  if (store instanceof PostgresStore) return (await store.sql`SELECT count(*)::int AS n FROM events WHERE id = decode(${id}, 'hex')`)[0].n;
  return ((store as SqliteStore).db.query("SELECT count(*) AS n FROM events WHERE id = unhex(?)").get(id) as { n: number }).n;
}

/** The relay's NIP-11 document, fetched from its websocket URL as clients do. */
export async function relayInfo(wsUrl: string): Promise<Record<string, any>> {
  const res = await fetch(wsUrl.replace(/^ws/, "http"), { headers: { Accept: "application/nostr+json" } });
  return (await res.json()) as Record<string, any>;
}

/**
 * A NIP-86 call over HTTP to the relay at `wsUrl`, with a NIP-98 token signed by `as` (an [admin]
 * pubkey); the token names `u`, the URL called unless the relay calls itself otherwise ([info] relay_url).
 */
export async function adminCall(
  wsUrl: string,
  as: Signer,
  method: string,
  params: unknown[] = [],
  u?: string,
): Promise<{ status: number; body: any }> {
  const url = wsUrl.replace(/^ws/, "http");
  const body = JSON.stringify({ method, params });
  const payload = new Bun.CryptoHasher("sha256").update(body).digest("hex");
  const token = as.sign({
    kind: 27235,
    tags: [
      ["u", u || url],
      ["method", "POST"],
      ["payload", payload],
      ["nonce", crypto.randomUUID()],
    ],
  });
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/nostr+json+rpc", Authorization: `Nostr ${btoa(JSON.stringify(token))}` },
    body,
  });
  return { status: res.status, body: await res.json() };
}

export interface Signer {
  sk: Uint8Array;
  pubkey: string;
  sign(t: { kind: number; content?: string; tags?: string[][]; created_at?: number }): NostrEvent;
}

export function signer(): Signer {
  const sk = generateSecretKey();
  return {
    sk,
    pubkey: getPublicKey(sk),
    // A plain copy: nostr-tools marks its events with a symbol that the wire does not carry.
    sign: (t) =>
      JSON.parse(
        JSON.stringify(
          finalizeEvent({ kind: t.kind, content: t.content ?? "", tags: t.tags ?? [], created_at: t.created_at ?? now() }, sk),
        ),
      ) as NostrEvent,
  };
}

/**
 * For files whose relay runs in the test process: every test fails if the relay let an
 * exception escape (unhandled rejection, uncaught exception) or logged an internal error.
 */
export function failOnRelayErrors(): void {
  const escaped: string[] = [];
  const onUnhandled = (e: unknown) => void escaped.push(`unhandledRejection: ${String((e as Error)?.stack ?? e)}`);
  const onUncaught = (e: unknown) => void escaped.push(`uncaughtException: ${String((e as Error)?.stack ?? e)}`);
  let errorSpy: ReturnType<typeof spyOn>;
  beforeAll(() => {
    process.on("unhandledRejection", onUnhandled);
    process.on("uncaughtException", onUncaught);
    errorSpy = spyOn(console, "error");
  });
  afterAll(() => {
    process.off("unhandledRejection", onUnhandled);
    process.off("uncaughtException", onUncaught);
    errorSpy.mockRestore();
  });
  afterEach(() => {
    expect(escaped).toEqual([]);
    expect(errorSpy.mock.calls.map((c: unknown[]) => c.map(String).join(" ").slice(0, 500))).toEqual([]);
  });
}

/** Fixture events written straight into a store or a SQLite writer (no signatures checked, no deletions or search). */
export function storeEvents<R>(
  store: { writeBatch(batch: PendingWrite[], rules: WriteRules): R },
  events: NostrEvent[],
  rules: WriteRules = FIXTURE_RULES,
): R {
  return store.writeBatch(
    events.map((event) => ({ event, json: JSON.stringify(event) }) as PendingWrite),
    rules,
  );
}
const FIXTURE_RULES: WriteRules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set() };

/** Polls `cond` every 50 ms until it holds; throws, naming `what`, after `timeoutMs`. */
export async function waitUntil(what: string, cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

/** One filter and its limit as a store read of everything stored (store-level tests). */
export const storeJob = (filter: QueryJob["filters"][0], limit: number): QueryJob => ({
  filters: [filter],
  limits: [limit],
  maxSeq: Number.MAX_SAFE_INTEGER,
  now: 0,
});
