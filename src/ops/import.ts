// `bunstr import`: JSON lines in, through the relay's own checks and its single writer.
//   line -> JSON -> shape -> policies -> id hash -> duplicate -> signature -> SqliteWriter
// The same order as relay/ingest.ts, and the same SqliteWriter and WriteRules, so replaceable
// and addressable winners, NIP-09 deletions, NIP-62 vanish and NIP-50 indexing are the relay's.
// Memory stays bounded: a few batches verify in workers while verified events wait for the next
// transaction. Transactions are short (about SHARED_TXN_MS) once another process (a running
// relay) has committed since the import began, so its writer waits milliseconds, not minutes;
// alone, they grow to about a second, which writes each index page once for many events
// (measured at 100k events: 2.8 WAL pages per event in 1,000-event transactions, 0.7 in 10,000).
import { adminViewOf } from "../admin/state.ts";
import type { Config } from "../config/schema.ts";
import { admitEvent } from "../policy/defaults.ts";
import { adminBans, kindLists, noAuthEvents, notExpired, pubkeyLists, sizeLimits, type AdminView, type Policy } from "../policy/rules.ts";
import { writeRules } from "../policy/visibility.ts";
import { nowSeconds, serializeEvent } from "../protocol/event.ts";
import { isEphemeral } from "../protocol/kinds.ts";
import { SqliteAdmin } from "../store/sqlite/admin.ts";
import { dataVersion, isBusy, isSqliteDb, tuneForBulkWrites, type Db } from "../store/sqlite/maintenance.ts";
import { PURGE_STEP_MS } from "../store/queue.ts";
import type { PendingWrite, Store, WriteOutcome } from "../store/types.ts";
import { SqliteWriter } from "../store/sqlite/write.ts";
import type { Verifier } from "../verify/pool.ts";

/**
 * The relay's policies that say what may be stored, whoever sends it. Left out: those about the
 * sender's connection (AUTH to write, NIP-70 protected events: their author published them to
 * the relay the file came from), the created_at window and proof of work (an archive is old by
 * nature) and whether a request to vanish names this relay (it named the relay it came from).
 */
/** An import keeps to the lists (config and admin bans), not to the rules of live publishing (time window, PoW, AUTH). */
export const importPolicies: readonly Policy[] = [noAuthEvents, sizeLimits, notExpired, adminBans, kindLists, pubkeyLists];

export interface ImportCounts {
  /** Non-empty lines read. */
  lines: number;
  /** Stored. */
  accepted: number;
  /** Already stored (or twice in the input). */
  duplicate: number;
  /** A newer version of this replaceable or addressable event is stored. */
  older: number;
  /** Refused because its author deleted it (NIP-09) or asked to vanish (NIP-62). */
  deleted: number;
  /** Refused by the config: expired (NIP-40), kind or pubkey lists, size limits, kind 22242. */
  refused: number;
  /** Kinds 20000–29999 are never stored. */
  ephemeral: number;
  badJson: number;
  /** JSON, but not a NIP-01 event (a field missing or of the wrong type), or a line too long. */
  badEvent: number;
  badId: number;
  badSig: number;
}

export interface ImportProblem {
  line: number;
  reason: string;
}

export interface ImportSummary extends ImportCounts {
  /** The first few lines that failed, with why. */
  problems: ImportProblem[];
  /** Bytes of input read. */
  bytes: number;
  seconds: number;
}

export interface ImportOptions {
  config: Config;
  /** undefined: signatures are not checked (--no-verify). */
  verifier?: Verifier;
  /** Events per verification batch, and per transaction while another process writes. */
  batchSize?: number;
  /** Most events per transaction when no other process writes. */
  maxTxn?: number;
  /** How many failing lines to keep for the report. */
  maxProblems?: number;
  /** After each committed batch. */
  onProgress?: (s: ImportSummary) => void;
  /** Once, the first time the database stays locked past busy_timeout. */
  onBusy?: () => void;
}

interface Candidate extends PendingWrite {
  line: number;
}

/** Batches verifying at least (more when a transaction is larger than this): keeps the workers busy. */
const IN_FLIGHT = 3;
/** Alone, a transaction grows until it holds the write lock about this long... */
const ALONE_TXN_MS = 1000;
/** ...up to this many events (bounds memory: the events wait in memory for their commit). */
const ALONE_TXN_MAX = 20_000;
/**
 * Once another process has committed (a relay is writing), each transaction holds the lock about
 * this long and the import then pauses as long (at most SHARED_PAUSE_MAX_MS): SQLite's busy
 * handler polls a waiting writer at growing intervals of up to 100 ms, and back-to-back
 * transactions would leave it no window (measured: a waiting writer starved for seconds).
 */
const SHARED_TXN_MS = 50;
const SHARED_PAUSE_MAX_MS = 100;
/** Keep retrying a batch the database refuses as locked (a compact running, say) this long. */
const BUSY_GIVE_UP_MS = 10 * 60_000;

/** Where an import writes: the SQLite file itself, or a Store (Postgres) through its writer. */
interface Target {
  admin: AdminView;
  /** Already stored? (cheaper than a signature check); stores without a fast answer say false. */
  has(id: string): boolean;
  /** Commits one transaction; the outcomes in order. */
  commit(writes: PendingWrite[]): Promise<WriteOutcome[]>;
  /** Events in the next transaction. */
  txnSize: number;
}

/**
 * The SQLite file, written by our own writer: transactions sized by time (ALONE_TXN_MS, or
 * SHARED_TXN_MS and a pause once another process writes too), retried while it is locked.
 */
function sqliteTarget(db: Db, opts: ImportOptions, batchSize: number): Target {
  const writer = new SqliteWriter(db);
  const rules = writeRules(opts.config);
  tuneForBulkWrites(db);
  const maxTxn = opts.maxTxn ?? ALONE_TXN_MAX;
  let ourVersion = dataVersion(db);
  /** Another process has committed since the import began: it is running, share the lock. */
  let shared = false;
  let busyReported = false;
  const once = async (writes: PendingWrite[]) => {
    const since = performance.now();
    for (;;) {
      try {
        return writer.writeBatchImmediate(writes, rules);
      } catch (err) {
        // Each attempt already waited busy_timeout (5 s) for the lock.
        if (!isBusy(err) || performance.now() - since > BUSY_GIVE_UP_MS) throw err;
        if (!busyReported) (busyReported = true), opts.onBusy?.();
        await Bun.sleep(100);
      }
    }
  };
  /** The deletions the batch recorded (requests to vanish), in steps: a running relay's writer gets the lock between them. */
  const purgeAll = async () => {
    const since = performance.now();
    for (;;) {
      try {
        if (!writer.purgeStep(PURGE_STEP_MS)) return;
      } catch (err) {
        if (!isBusy(err) || performance.now() - since > BUSY_GIVE_UP_MS) throw err;
        await Bun.sleep(100);
        continue;
      }
      if (shared) await Bun.sleep(PURGE_STEP_MS);
    }
  };
  const target: Target = {
    admin: adminViewOf(new SqliteAdmin(db, writer).entries()),
    has: (id) => writer.has(id),
    txnSize: batchSize,
    async commit(writes) {
      const t0 = performance.now();
      if (!shared && dataVersion(db) !== ourVersion) shared = true;
      const outcomes = await once(writes);
      await purgeAll();
      const t1 = performance.now();
      ourVersion = dataVersion(db);
      // The next transaction: about SHARED_TXN_MS or ALONE_TXN_MS of work at this rate.
      const perEvent = Math.max((t1 - t0) / writes.length, 1e-3);
      target.txnSize = shared
        ? Math.round(Math.min(batchSize, Math.max(50, SHARED_TXN_MS / perEvent)))
        : Math.round(Math.min(maxTxn, Math.max(batchSize, ALONE_TXN_MS / perEvent)));
      if (shared) await Bun.sleep(Math.min(SHARED_PAUSE_MAX_MS, Math.max(5, t1 - t0)));
      return outcomes;
    },
  };
  return target;
}

/** A Store (Postgres): its own batch writer, which other nodes' writes already share. */
async function storeTarget(store: Store, opts: ImportOptions, batchSize: number): Promise<Target> {
  const rules = writeRules(opts.config);
  return {
    admin: adminViewOf(await store.admin.entries()),
    has: () => false, // a duplicate is found by the write itself
    txnSize: batchSize,
    async commit(writes) {
      const outcomes = await store.writeBatch(writes, rules);
      while (await store.purgeStep?.(PURGE_STEP_MS));
      return outcomes;
    },
  };
}

export async function importEvents(into: Db | Store, input: AsyncIterable<Uint8Array>, opts: ImportOptions): Promise<ImportSummary> {
  const { config, verifier } = opts;
  const batchSize = opts.batchSize ?? 1000;
  const maxProblems = opts.maxProblems ?? 10;
  // A line longer than any frame the relay would decode is not an event it could have stored.
  const maxLine = Math.max(4 * config.limits.max_message_bytes, 1 << 20);
  const target = isSqliteDb(into) ? sqliteTarget(into, opts, batchSize) : await storeTarget(into, opts, batchSize);
  const started = performance.now();
  const s: ImportSummary = {
    lines: 0, accepted: 0, duplicate: 0, older: 0, deleted: 0, refused: 0, ephemeral: 0,
    badJson: 0, badEvent: 0, badId: 0, badSig: 0, problems: [], bytes: 0, seconds: 0,
  };
  const problem = (line: number, reason: string) => {
    if (s.problems.length < maxProblems) s.problems.push({ line, reason });
  };
  const policyCtx = { config, now: nowSeconds(), authed: new Set<string>(), relayUrl: config.info.relay_url, admin: target.admin };

  let batch: Candidate[] = [];
  const inFlight: Promise<{ batch: Candidate[]; ok: boolean[] | undefined }>[] = [];
  /** Verified, waiting for the next transaction. */
  let pending: Candidate[] = [];

  function take(text: string, line: number): void {
    s.lines++;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      s.badJson++;
      return problem(line, "not JSON");
    }
    const e = admitEvent(raw, importPolicies, policyCtx);
    if ("fate" in e && e.vanish) {
      // A request to vanish refused for its author's standing: carried out, not stored (NIP-62).
      batch.push({ event: e.vanish, json: serializeEvent(e.vanish), line, vanishOnly: e.reason });
      return;
    }
    if ("fate" in e) {
      s[e.fate]++;
      return problem(line, e.reason);
    }
    if (isEphemeral(e.kind)) {
      s.ephemeral++;
      return;
    }
    // Cheaper than a signature check (without one, the write's ON CONFLICT finds duplicates anyway);
    // duplicates within the in-flight batches are caught at the write.
    if (verifier && target.has(e.id)) {
      s.duplicate++;
      return;
    }
    batch.push({ event: e, json: serializeEvent(e), line });
  }

  async function writeOldest(): Promise<void> {
    const { batch: b, ok } = await inFlight.shift()!;
    b.forEach((c, i) => {
      if (!ok || ok[i]) return void pending.push(c);
      s.badSig++;
      problem(c.line, "invalid: signature verification failed");
    });
    await commitPending(false);
  }

  /** Commits what waits, in transactions of txnSize events; `all`: the last partial one too. */
  async function commitPending(all: boolean): Promise<void> {
    while (pending.length >= target.txnSize || (all && pending.length > 0)) {
      const writes = pending.slice(0, target.txnSize);
      pending = pending.slice(writes.length);
      await commitOne(writes);
    }
  }

  async function commitOne(writes: Candidate[]): Promise<void> {
    const outcomes = await target.commit(writes);
    outcomes.forEach((o, i) => {
      if (writes[i]!.vanishOnly !== undefined) s.refused++, problem(writes[i]!.line, o.stored || o.duplicate ? writes[i]!.vanishOnly! : o.reason);
      else if (o.stored) s.accepted++;
      else if (o.duplicate) s.duplicate++;
      else if (o.reason.startsWith("blocked:")) s.deleted++, problem(writes[i]!.line, o.reason);
      else if (o.reason.startsWith("duplicate:")) s.older++;
      else s.refused++, problem(writes[i]!.line, o.reason);
    });
    s.seconds = (performance.now() - started) / 1000;
    opts.onProgress?.(s);
  }

  async function flush(): Promise<void> {
    if (batch.length === 0) return;
    const b = batch;
    batch = [];
    policyCtx.now = nowSeconds();
    inFlight.push(verifier ? Promise.all(b.map((c) => verifier.verify(c.event))).then((ok) => ({ batch: b, ok })) : Promise.resolve({ batch: b, ok: undefined }));
    // Verify up to a whole transaction ahead, so the workers check the next one while this is written.
    const ahead = verifier ? Math.ceil(target.txnSize / batchSize) + 1 : 0;
    while (inFlight.length >= Math.max(IN_FLIGHT, ahead)) await writeOldest();
  }

  const decoder = new TextDecoder();
  let rest = "";
  let line = 0;
  let skipping = false; // inside a line that is too long: drop until its end
  for await (const chunk of input) {
    s.bytes += chunk.byteLength;
    let text = decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", start)) {
      line++;
      if (skipping) skipping = false;
      else {
        const l = (start === 0 ? rest + text.slice(0, nl) : text.slice(start, nl)).trimEnd();
        if (l.length > 0) take(l, line);
      }
      if (start === 0) rest = "";
      start = nl + 1;
      if (batch.length >= batchSize) await flush();
    }
    text = text.slice(start);
    if (skipping) continue;
    rest = start === 0 ? rest + text : text;
    if (rest.length > maxLine) {
      s.lines++;
      s.badEvent++;
      problem(line + 1, `line longer than ${maxLine} bytes`);
      rest = "";
      skipping = true;
    }
  }
  rest += decoder.decode();
  if (!skipping && rest.trim().length > 0) take(rest.trimEnd(), ++line);
  await flush();
  while (inFlight.length > 0) await writeOldest();
  await commitPending(true);
  s.problems.sort((x, y) => x.line - y.line);
  s.seconds = (performance.now() - started) / 1000;
  return s;
}
