// A query worker: its own read-only connection, so a heavy scan never blocks the event loop.
import type { Database } from "bun:sqlite";
import { openDatabase } from "./db.ts";
import { runCount, runNegItems, runQuery, StatementCache } from "./query.ts";
import type { ReadOp } from "./sqlite.ts";

declare const self: Worker;

let db: Database | undefined;
let cache: StatementCache | undefined;

const ops = {
  query: runQuery,
  count: runCount,
  neg: runNegItems,
} as const;

self.onmessage = (msg: MessageEvent) => {
  const data = msg.data as { open: string } | { close: true } | ReadOp;
  if ("open" in data) {
    db = openDatabase({ path: data.open, synchronous: "normal", readonly: true });
    cache = new StatementCache(db);
    // Warm up before taking jobs (the first statement pays for page cache, prepares and the JIT)
    // so a worker started under load does not spend its first query's time budget on it.
    const warm = { maxSeq: Number.MAX_SAFE_INTEGER, now: 0 };
    runQuery(cache, { ...warm, filters: [{ ids: ["00".repeat(32)] }, { kinds: [1] }, { authors: ["00".repeat(32)], kinds: [0] }, { "#e": ["00".repeat(32)] }], limits: [1, 1, 1, 1] });
    self.postMessage({ ready: true });
    return;
  }
  if ("close" in data) {
    // Close our connection before the writer checkpoints, or the checkpoint finds us busy.
    db?.close(true);
    self.postMessage({ closed: true });
    return;
  }
  try {
    self.postMessage({ n: data.n, result: (ops[data.op] as (c: StatementCache, j: unknown) => unknown)(cache!, data.job) });
  } catch (e) {
    self.postMessage({ n: data.n, error: String(e) });
  }
};
