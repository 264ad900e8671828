// A query worker: its own read-only connection, so a heavy scan never blocks the event loop.
// It advances each job a slice at a time (a few ms of statements, or a bounded amount of rows)
// and reports back; the pool decides which job runs next (store/readers.ts).
import type { Database } from "bun:sqlite";
import { openDatabase } from "./db.ts";
import { countJob, negJob, queryFrames, runQuery, StatementCache, type ReadSteps } from "./query.ts";
import { NegSessions, type NegMsgJob } from "./neg-sessions.ts";
import type { ReadKind } from "./ports.ts";

declare const self: Worker;

/** A slice ends after this much time (ms) or this many bytes of rows, whichever comes first. */
const SLICE_MS = 5;
const SLICE_BYTES = 256 * 1024;

let db: Database | undefined;
let cache: StatementCache | undefined;
const jobs = new Map<number, ReadSteps<unknown>>();
const sessions = new NegSessions();

const start: Record<ReadKind, (c: StatementCache, job: never) => ReadSteps<unknown>> = {
  query: queryFrames,
  count: countJob,
  neg: negJob,
  negopen: (c, job) => sessions.open(c, job),
  negmsg: (c, job) => sessions.message(c, job),
};

type Message = { open: string } | { close: true } | { drop: number } | { negclose: number } | { id: number; op?: ReadKind; job?: unknown };

self.onmessage = (msg: MessageEvent) => {
  // A job's next slice comes as its id alone, a new plain job as JSON text (readers.ts dispatch).
  if (typeof msg.data === "number") return slice(msg.data, undefined, undefined);
  const data = (typeof msg.data === "string" ? JSON.parse(msg.data) : msg.data) as Message;
  if ("open" in data) {
    db = openDatabase({ path: data.open, synchronous: "normal", readonly: true });
    // Pages read into this connection's own cache, not mapped: every connection's map of the
    // file counts again in the relay's RSS (three maps of a 180 MB database were 557 MB of it).
    // 4 MB: a miss is a pread the kernel's page cache answers, and the issue-15 mix cost the same
    // CPU per REQ with 2, 4, 8 or 16 MB (bench/RESULTS.md, "Memory", 2026-12-03), while each
    // reader's full cache counts in the RSS.
    db.exec("PRAGMA mmap_size = 0");
    db.exec("PRAGMA cache_size = -4000");
    cache = new StatementCache(db);
    // Warm up before taking jobs (the first statement pays for page cache, prepares and the JIT)
    // so a worker started under load does not spend its first query's time budget on it.
    const warm = { maxSeq: Number.MAX_SAFE_INTEGER, now: 0 };
    runQuery(cache, {
      ...warm,
      filters: [{ ids: ["00".repeat(32)] }, { kinds: [1] }, { authors: ["00".repeat(32)], kinds: [0] }, { "#e": ["00".repeat(32)] }],
      limits: [1, 1, 1, 1],
    });
    self.postMessage({ ready: true });
    return;
  }
  if ("close" in data) {
    // Close our connection before the writer checkpoints, or the checkpoint finds us busy.
    jobs.clear();
    sessions.clear();
    db?.close(true);
    self.postMessage({ closed: true });
    return;
  }
  if ("negclose" in data) return garbage(sessions.close(data.negclose));
  if ("drop" in data) {
    jobs.get(data.drop)?.return(undefined as never);
    jobs.delete(data.drop);
    return;
  }
  if (data.op === "negmsg") garbage((data.job as NegMsgJob).message.length);
  slice(data.id, data.op, data.job);
};

/**
 * Bytes of NIP-77 garbage made since the last collection: messages answered, sessions closed.
 * A flood of them is garbage as soon as it is answered, but a worker's heap is collected lazily
 * and grew by hundreds of MiB under bench/hostile-reads.ts' negflood: past GC_BYTES, collect
 * (a few ms of this worker, between slices).
 */
let garbageBytes = 0;
const GC_BYTES = 4 * 1024 * 1024;
function garbage(bytes: number): void {
  garbageBytes += bytes;
  if (garbageBytes < GC_BYTES) return;
  garbageBytes = 0;
  Bun.gc(true);
}

/**
 * A slice's rows as one string, `id ms done length… \n` then the rows back to back (readers.ts
 * decodeRows): one string to clone instead of an array of them, cut here into substrings.
 */
function encodeRows(id: number, ms: number, done: boolean, rows: string[]): string {
  let head = `${id} ${ms} ${done ? 1 : 0}`;
  for (const r of rows) head += ` ${r.length}`;
  return `${head}\n${rows.join("")}`;
}

function slice(id: number, op: ReadKind | undefined, job: unknown): void {
  const started = performance.now();
  let steps = jobs.get(id);
  const rows: string[] = [];
  let bytes = 0;
  try {
    if (!steps) {
      if (!op) return void self.postMessage({ id, ms: 0, done: true, error: "unknown job" });
      steps = start[op](cache!, job as never);
      jobs.set(id, steps);
    }
    for (;;) {
      const r = steps.next();
      if (r.done) {
        jobs.delete(id);
        const { reply, items } = (r.value ?? {}) as { reply?: unknown; items?: unknown };
        // A NIP-77 reply is moved to the main thread, not copied.
        const transfer = reply instanceof Uint8Array ? [reply.buffer as ArrayBuffer] : [];
        if (r.value === undefined) self.postMessage(encodeRows(id, performance.now() - started, true, rows));
        else self.postMessage({ id, ms: performance.now() - started, done: true, rows, result: r.value }, transfer);
        // A NEG-OPEN's rows, read to build its index, are garbage now (about 200 bytes each).
        if (typeof items === "number") garbage(items * 200);
        return;
      }
      if (r.value) for (const json of r.value) rows.push(json), (bytes += json.length);
      if (bytes >= SLICE_BYTES || performance.now() - started >= SLICE_MS) break;
    }
    self.postMessage(encodeRows(id, performance.now() - started, false, rows));
  } catch (e) {
    jobs.delete(id);
    self.postMessage({ id, ms: performance.now() - started, done: true, error: String(e) });
  }
}
