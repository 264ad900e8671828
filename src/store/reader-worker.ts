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
