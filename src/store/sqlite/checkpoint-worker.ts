// The checkpointer: its own connection copies the WAL back into the database file (a PASSIVE
// checkpoint: it never waits for, nor blocks, the writer or the readers), a few times a second.
// The writer thread's connection has its automatic checkpoints turned off: run at the end of a
// commit, each made that commit wait for the copy and its fsyncs, and the writer thread, the
// stage that bounds ingest, spent most of its time waiting on them (100k events, 8x64: 1,213
// -> 2,083 accepted/s without them). Under steady ingest these checkpoints never catch up with
// the writer's last frame, so the writer copies the little that is left itself, about once a
// second (writer-worker.ts tailCheckpoint), and its next transaction starts the WAL over.
import type { Database } from "bun:sqlite";
import { openDatabase } from "./db.ts";

declare const self: Worker;

/** How often the WAL is checkpointed (ms). */
export const CHECKPOINT_INTERVAL_MS = 250;

let db: Database | undefined;
let timer: ReturnType<typeof setInterval> | undefined;
let failing = false;

function checkpoint(): void {
  if (!db) return;
  try {
    db.query("PRAGMA wal_checkpoint(PASSIVE)").get();
    failing = false;
  } catch (e) {
    // The WAL keeps every commit meanwhile. A full disk (the database file cannot grow) is the
    // writer's to say, once per minute (store/queue.ts FailureLog): its commits fail too. Anything
    // else is said once, not a line every interval.
    const full = String((e as { code?: unknown })?.code) === "SQLITE_FULL";
    if (!failing && !full) console.warn(`checkpointer: could not checkpoint the WAL (${String((e as Error)?.message ?? e)}); retrying`);
    failing = true;
  }
}

self.onmessage = (msg: MessageEvent) => {
  const m = msg.data as { open: string; synchronous: "normal" | "full" } | { close: true };
  if ("open" in m) {
    db = openDatabase({ path: m.open, synchronous: m.synchronous });
    db.exec("PRAGMA cache_size = -2000");
    timer = setInterval(checkpoint, CHECKPOINT_INTERVAL_MS);
    return self.postMessage({ ready: true });
  }
  clearInterval(timer);
  db?.close(true);
  db = undefined;
  self.postMessage({ closed: true });
};
