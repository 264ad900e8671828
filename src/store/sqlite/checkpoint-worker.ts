// The checkpointer thread: copies the WAL's committed pages into the database file (a PASSIVE
// checkpoint) on a connection of its own, so the copy and its two fsyncs are not the writer's
// (store/sqlite/checkpointer.ts). One message a checkpoint, answered when it is done.
import { Database } from "bun:sqlite";
import type { CheckpointReply, CheckpointRequest } from "./checkpointer.ts";

declare const self: Worker;

let db: Database | undefined;
const reply = (r: CheckpointReply) => self.postMessage(r);

self.onmessage = (msg: MessageEvent) => {
  const m = msg.data as CheckpointRequest;
  try {
    if (m === "close") {
      db?.close();
      db = undefined;
      return reply("closed");
    }
    if (typeof m === "object") {
      // The writer created and migrated the file: this connection only checkpoints. It never
      // waits for a lock (a PASSIVE checkpoint does not ask the busy handler anyway).
      db = new Database(m.open, { readwrite: true, create: false });
      db.exec("PRAGMA busy_timeout = 0");
      // NORMAL and FULL both sync the WAL before the copy and the database after it.
      db.exec(`PRAGMA synchronous = ${m.synchronous === "full" ? "FULL" : "NORMAL"}`);
      db.exec("PRAGMA cache_size = -256");
      db.exec("PRAGMA mmap_size = 0");
      db.exec("PRAGMA wal_autocheckpoint = 0");
      return reply("ready");
    }
    db?.query("PRAGMA wal_checkpoint(PASSIVE)").get();
    reply("done");
  } catch (e) {
    // A checkpoint that failed (disk full, I/O error) is tried again at the next poke; the
    // writer's own checkpoints (wal_autocheckpoint) still bound the WAL.
    const code = (e as { code?: unknown })?.code;
    reply({ error: e instanceof Error ? e.message : String(e), code: code === undefined ? undefined : String(code) });
  }
};
