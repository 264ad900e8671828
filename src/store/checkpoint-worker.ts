// WAL checkpoints off the event loop: the writer's own automatic checkpoints would stall every
// client for the length of the disk writes. This worker folds the WAL back into the database
// with PASSIVE checkpoints (which never block the writer or readers) on its own connection.
import { Database } from "bun:sqlite";

declare const self: Worker;

let db: Database | undefined;
let timer: ReturnType<typeof setInterval> | undefined;

self.onmessage = (msg: MessageEvent) => {
  const data = msg.data as { open: string; everyMs: number } | { close: true };
  if ("open" in data) {
    db = new Database(data.open, { readwrite: true, create: false });
    db.exec("PRAGMA busy_timeout = 1000");
    timer = setInterval(() => {
      try {
        db!.exec("PRAGMA wal_checkpoint(PASSIVE)");
      } catch (e) {
        console.error("checkpoint failed:", e);
      }
    }, data.everyMs);
    return;
  }
  clearInterval(timer);
  db?.close(true);
  self.postMessage({ closed: true });
};
