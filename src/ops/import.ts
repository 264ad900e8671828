// `bunstr import` (and the downloads of `sync` and `stream`): JSON lines or parsed events in,
// through the relay's own pipeline (admit/admit.ts) and its writer code.
//   line -> JSON -> admit(): shape -> policies -> id hash -> duplicate -> signature -> writer
// The store's bulk writer (BulkStore.writer: SQLite's store/sqlite/bulk.ts, Postgres's
// store/postgres/bulk.ts) runs the relay's writer code with the same WriteRules, so replaceable and addressable winners,
// NIP-09 deletions, NIP-62 vanish and NIP-50 indexing are the relay's. Events reach the writer
// in input order (the verifier's answers are taken in order), so what a file says later wins as
// it would have on the relay. Memory stays bounded: a few batches verify in workers while
// verified events wait for the next transaction. On SQLite, transactions are short (about 50 ms) once another process (a running
// relay) has committed since the import began, so its writer waits milliseconds, not minutes;
// alone, they grow to about a second, which writes each index page once for many events
// (measured at 100k events: 2.8 WAL pages per event in 1,000-event transactions, 0.7 in 10,000).
import { adminViewOf } from "../admin/state.ts";
import type { Config } from "../config/schema.ts";
import { GroupState } from "../groups/state.ts";
import { admit, type AdmitContext, type Source } from "../admit/admit.ts";
import { countOutcome, newCounts, problemOf, type Counts } from "../admit/outcome.ts";
import { importPolicies } from "../policy/defaults.ts";
import type { PolicyContext } from "../policy/rules.ts";
import { nowSeconds, type NostrEvent } from "../protocol/event.ts";
import { writeRules } from "../policy/visibility.ts";
import type { Verifier } from "../verify/pool.ts";
import type { BulkStore, BulkWriter, PendingWrite, WriteOutcome } from "../store/types.ts";

/** What an import counts (admit/outcome.ts). */
export type ImportCounts = Counts;

interface ImportProblem {
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
  /** Events verified ahead per step (a few steps ahead), and per transaction while another process writes. */
  batchSize?: number;
  /** Most events per transaction when no other process writes. */
  maxTxn?: number;
  /** How many failing lines to keep for the report. */
  maxProblems?: number;
  /** After each committed batch. */
  onProgress?: (s: ImportSummary) => void;
  /** Once, the first time the database stays locked past busy_timeout. */
  onBusy?: () => void;
  /**
   * NIP-29 ([groups] enabled): the target's group state (importGroupState), for the groupImports
   * policy; each event the import stores is applied to it in commit order, so a 9008 earlier in
   * the input keeps the group's later events out as the relay would.
   */
  groups?: GroupState;
}

/**
 * The group state of the database an import writes to, rebuilt from its stored events, with
 * `relayPubkey` (cli/relay-key.ts resolveRelayKey, as `serve` finds it) as this relay's key: only
 * its 39000-39009 are taken. The import never publishes relay-signed events itself: a relay
 * serving the database catches the new rows up, a stopped one rebuilds at its next start.
 */
export async function importGroupState(into: BulkStore, config: Config, relayPubkey: string): Promise<GroupState> {
  const state = new GroupState({ config: () => config, relayPubkey });
  await state.rebuild(into.groups);
  return state;
}

/** Batches verifying at least (more when a transaction is larger than this): keeps the workers busy. */
const IN_FLIGHT = 3;

/** `bunstr import`: JSON lines. */
export async function importEvents(into: BulkStore, input: AsyncIterable<Uint8Array>, opts: ImportOptions): Promise<ImportSummary> {
  const run = await startImport(into, opts);
  // A line longer than any frame the relay would decode is not an event it could have stored.
  const maxLine = Math.max(4 * opts.config.limits.max_message_bytes, 1 << 20);
  await eachLine(input, maxLine, {
    bytes: (n) => void (run.s.bytes += n),
    line(text, line) {
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch {
        run.s.lines++;
        run.s.badJson++;
        return run.problem(line, "not JSON");
      }
      return run.take(raw, line);
    },
    tooLong(line) {
      run.s.lines++;
      run.s.badEvent++;
      run.problem(line, `line longer than ${maxLine} bytes`);
    },
  });
  return run.finish();
}

/** Events already parsed (sync, stream), in batches; their "line" is their place in the sequence, from 1. */
export async function importParsed(
  into: BulkStore,
  batches: AsyncIterable<readonly unknown[]> | Iterable<readonly unknown[]>,
  opts: ImportOptions,
): Promise<ImportSummary> {
  const run = await startImport(into, opts);
  let line = 0;
  for await (const batch of batches) for (const raw of batch) await run.take(raw, ++line);
  return run.finish();
}

/** One import under way: take() each event, then finish(). */
interface ImportRun {
  readonly s: ImportSummary;
  problem(line: number, reason: string): void;
  /** Starts the event through the pipeline; a promise when the caller should wait before the next (memory). */
  take(raw: unknown, line: number): void | Promise<void>;
  /** Waits for every event taken to be committed or turned away; throws what the target threw. */
  finish(): Promise<ImportSummary>;
}

async function startImport(into: BulkStore, opts: ImportOptions): Promise<ImportRun> {
  const { config, verifier } = opts;
  const batchSize = opts.batchSize ?? 1000;
  const maxProblems = opts.maxProblems ?? 10;
  const target = await into.writer({ rules: writeRules(config), batchSize, maxTxn: opts.maxTxn, onBusy: opts.onBusy });
  const admin = adminViewOf(await target.adminEntries());
  const started = performance.now();
  const s: ImportSummary = { ...newCounts(), problems: [], bytes: 0, seconds: 0 };
  // The lowest-numbered failing lines (outcomes come in commit order, not line order).
  const problem = (line: number, reason: string) => {
    if (maxProblems <= 0) return;
    if (s.problems.length === maxProblems && line > s.problems[maxProblems - 1]!.line) return;
    s.problems.push({ line, reason });
    s.problems.sort((x, y) => x.line - y.line);
    if (s.problems.length > maxProblems) s.problems.pop();
  };
  const writer = transactions(target, () => {
    s.seconds = (performance.now() - started) / 1000;
    opts.onProgress?.(s);
  });
  const stored = (id: string) => verifier !== undefined && target.has(id);
  const ctx: AdmitContext = {
    closing: false,
    inflight: 0,
    // Cheaper than a signature check; without one, the write's ON CONFLICT finds duplicates anyway.
    store: { hasNow: stored, has: async (id) => stored(id) },
    verifier: inOrder(verifier),
    writer,
  };
  const policy: PolicyContext = {
    config,
    now: nowSeconds(),
    authed: new Set<string>(),
    relayUrl: config.info.relay_url,
    admin,
    groups: opts.groups,
  };
  const src: Source = { policies: importPolicies, policy };

  /** Events taken and not yet committed or turned away, and the one waiting for room among them. */
  let open = 0;
  let wake: (() => void) | undefined;
  let failure: { err: unknown } | undefined;
  const settled = () => {
    open--;
    const w = wake;
    wake = undefined;
    w?.();
  };
  // Up to a whole transaction verifying ahead, so the workers check the next one while this is written.
  const room = () => target.txnSize + Math.max(IN_FLIGHT, verifier ? Math.ceil(target.txnSize / batchSize) + 1 : 0) * batchSize;
  const wait = () => new Promise<void>((resolve) => (wake = resolve));
  let sinceNow = 0;

  return {
    s,
    problem,
    take(raw, line) {
      // A failed commit ends the import at once: nothing more is read, parsed or verified.
      if (failure) throw failure.err;
      s.lines++;
      if (++sinceNow >= batchSize) (sinceNow = 0), (policy.now = nowSeconds());
      open++;
      admit(ctx, raw, src).then(
        (o) => {
          if (o.fate === "accepted") opts.groups?.applyCommitted(o.event);
          countOutcome(s, o);
          const p = problemOf(o);
          if (p !== undefined) problem(line, p);
          settled();
        },
        (err) => {
          failure ??= { err };
          settled();
        },
      );
      if (open >= room() && !failure)
        return (async () => {
          while (open >= room() && !failure) await wait();
        })();
    },
    async finish() {
      writer.finishing();
      while (open > 0) await wait();
      if (failure) throw failure.err;
      s.seconds = (performance.now() - started) / 1000;
      return s;
    },
  };
}

const TRUE = Promise.resolve(true);

/**
 * The verifier's answers in the order asked: admit() enqueues an import's event as soon as its
 * answer comes (no plugin, no other wait between), so the writes reach the writer in input order.
 */
function inOrder(verifier: Verifier | undefined): AdmitContext["verifier"] {
  if (!verifier) return { verify: () => TRUE };
  let last: Promise<unknown> = TRUE;
  return {
    verify(e: NostrEvent) {
      const answer = verifier.verify(e);
      const inTurn = last.then(() => answer);
      last = inTurn;
      return inTurn;
    },
  };
}

/**
 * The import's writer: writes wait in the order they come and go to the target txnSize at a
 * time (all that wait, once finishing), one transaction after another; each resolves with its
 * outcome after its commit. A failed commit fails every write after it.
 */
function transactions(target: BulkWriter, committed: () => void): AdmitContext["writer"] & { finishing(): void } {
  let waiting: { w: PendingWrite; resolve: (o: WriteOutcome) => void; reject: (err: unknown) => void }[] = [];
  let busy = false;
  let all = false;
  let broken: { err: unknown } | undefined;
  const run = async () => {
    busy = true;
    while (!broken && (waiting.length >= target.txnSize || (all && waiting.length > 0))) {
      const txn = waiting.slice(0, target.txnSize);
      waiting = waiting.slice(txn.length);
      try {
        const outcomes = await target.commit(txn.map((q) => q.w));
        txn.forEach((q, i) => q.resolve(outcomes[i]!));
      } catch (err) {
        broken = { err };
        for (const q of [...txn, ...waiting.splice(0)]) q.reject(err);
      }
      // After the outcomes above are counted (their callbacks run before the next task).
      setImmediate(committed);
    }
    busy = false;
  };
  return {
    enqueue: (w) =>
      new Promise((resolve, reject) => {
        if (broken) return reject(broken.err);
        waiting.push({ w, resolve, reject });
        if (!busy) void run();
      }),
    finishing() {
      all = true;
      if (!busy) void run();
    },
  };
}

/** Splits the input into lines: each non-empty one to `line` (awaited when it returns a promise), one over maxLine characters to `tooLong`. */
async function eachLine(
  input: AsyncIterable<Uint8Array>,
  maxLine: number,
  on: { bytes(n: number): void; line(text: string, line: number): void | Promise<void>; tooLong(line: number): void },
): Promise<void> {
  const decoder = new TextDecoder();
  let rest = "";
  let line = 0;
  let skipping = false; // inside a line that is too long: drop until its end
  for await (const chunk of input) {
    on.bytes(chunk.byteLength);
    let text = decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", start)) {
      line++;
      if (skipping) skipping = false;
      else {
        const l = (start === 0 ? rest + text.slice(0, nl) : text.slice(start, nl)).trimEnd();
        if (l.length > 0) {
          const pause = on.line(l, line);
          if (pause) await pause;
        }
      }
      if (start === 0) rest = "";
      start = nl + 1;
    }
    text = text.slice(start);
    if (skipping) continue;
    rest = start === 0 ? rest + text : text;
    if (rest.length > maxLine) {
      on.tooLong(line + 1);
      rest = "";
      skipping = true;
    }
  }
  rest += decoder.decode();
  if (!skipping && rest.trim().length > 0) {
    const pause = on.line(rest.trimEnd(), ++line);
    if (pause) await pause;
  }
}
