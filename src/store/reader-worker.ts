// A REQ query worker: its own read-only connection, so a heavy scan never blocks the event loop.
import { openDatabase } from "./db.ts";
import { runQuery, StatementCache, type QueryJob } from "./query.ts";

declare const self: Worker;

let cache: StatementCache | undefined;

self.onmessage = (msg: MessageEvent) => {
  const data = msg.data as { open: string } | { n: number; job: QueryJob };
  if ("open" in data) {
    cache = new StatementCache(openDatabase({ path: data.open, synchronous: "normal", readonly: true }));
    return;
  }
  try {
    self.postMessage({ n: data.n, events: runQuery(cache!, data.job) });
  } catch (e) {
    self.postMessage({ n: data.n, error: String(e) });
  }
};
